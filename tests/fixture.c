/*
 * fixture.c: the helpers of fixture.h.
 */
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"

static int saved_stderr = -1;
static char log_path[512];

static int rm_entry(const char *path, const struct stat *st, int flag,
    struct FTW *ftw);

int
rlg_test_mkdtemp(char *template)
{
	return mkdtemp(template) != NULL ? 0 : -1;
}

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	(void)remove(path);
	return 0;
}

void
rlg_test_rmtree(const char *path)
{
	(void)nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int
rlg_test_log_begin(const char *path)
{
	int fd;

	snprintf(log_path, sizeof log_path, "%s", path);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	saved_stderr = dup(STDERR_FILENO);
	if (saved_stderr < 0 || dup2(fd, STDERR_FILENO) < 0) {
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

int
rlg_test_log_end(const char *needle)
{
	char line[4096];
	FILE *f;
	int n = 0;

	if (saved_stderr >= 0) {
		(void)dup2(saved_stderr, STDERR_FILENO);
		close(saved_stderr);
		saved_stderr = -1;
	}
	f = fopen(log_path, "r");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL)
		if (strstr(line, needle) != NULL)
			n++;
	fclose(f);
	return n;
}

struct rlg_store_stats
rlg_test_stats(const struct rlg_store *s)
{
	struct rlg_store_stats st;

	rlg_store_stats(s, &st);
	return st;
}
