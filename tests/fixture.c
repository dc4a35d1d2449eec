/*
 * fixture.c: the helpers of fixture.h.
 */
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "fixture.h"
#include "front_cgi.h"
#include "util.h"

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

int
rlg_test_step(struct rlg_store *s, const struct rlg_policy *p,
    const char *client, int64_t now, bool *admitted)
{
	struct rlg_store_item item = { p, client, false, false, 1 };
	struct rlg_decision d;
	int rc = rlg_store_step(s, &item, 1, now, &d);

	if (admitted != NULL)
		*admitted = rc == RLG_OK && d.admitted;
	return rc;
}

struct rlg_store_stats
rlg_test_stats(const struct rlg_store *s)
{
	struct rlg_store_stats st;

	rlg_store_stats(s, &st);
	return st;
}

size_t
rlg_test_envv(char **envp, size_t max, va_list ap)
{
	size_t n = 0;
	char *e;

	while ((e = va_arg(ap, char *)) != NULL) {
		if (n + 1 >= max) {
			fprintf(stderr, "rlg_test_envv: more than %zu"
			    " parameters\n", max - 1);
			abort();
		}
		envp[n++] = e;
	}
	envp[n] = NULL;
	return n;
}

void
rlg_test_threads(int n, void *(*fn)(void *), void *args, size_t size)
{
	pthread_t *t = calloc((size_t)n, sizeof *t);
	int i;

	if (t == NULL)
		abort();
	for (i = 0; i < n; i++) {
		if (pthread_create(&t[i], NULL, fn,
		    (char *)args + (size_t)i * size) != 0) {
			fprintf(stderr, "rlg_test_threads: pthread_create"
			    " failed\n");
			abort();
		}
	}
	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	free(t);
}

uint64_t
rlg_test_xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

uint64_t
rlg_test_clock_walk(uint64_t *x, int64_t *now, uint64_t back_one_in,
    int64_t back, int64_t on)
{
	uint64_t r = rlg_test_xorshift(x);

	if (r % back_one_in == 0)
		*now -= (int64_t)(r >> 8) % back;
	else
		*now += (int64_t)(r >> 8) % on;
	return r;
}

void
rlg_test_decide_envp(struct rlg_gate *g, char **envp, int64_t now_ms,
    struct rlg_verdict *v)
{
	struct rlg_params in;

	rlg_params_envp(&in, envp);
	rlg_gate_decide(g, &in, now_ms, v);
}

/*
 * n override rows of policy "default" (spec limit=2000000), row i's client
 * named by client(i), written to the SQLite database at path in one
 * transaction as an operator's sqlite3 would (the store made the table).
 * who names the program in a message; any error ends it (exit 1).
 */
void
rlg_test_put_overrides(const char *path, const char *who, int n,
    void (*client)(int i, char *buf, size_t size))
{
	sqlite3 *h;
	sqlite3_stmt *st;
	char name[64];
	int i;

	if (sqlite3_open(path, &h) != SQLITE_OK ||
	    sqlite3_busy_timeout(h, 5000) != SQLITE_OK ||
	    sqlite3_exec(h, "BEGIN", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(h, "INSERT INTO rlg_override(policy, client,"
	    " spec) VALUES ('default', ?1, 'limit=2000000')", -1, &st,
	    NULL) != SQLITE_OK) {
		fprintf(stderr, "%s: %s: %s\n", who, path, sqlite3_errmsg(h));
		exit(1);
	}
	for (i = 0; i < n; i++) {
		client(i, name, sizeof name);
		sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
		if (sqlite3_step(st) != SQLITE_DONE) {
			fprintf(stderr, "%s: %s: %s\n", who, path,
			    sqlite3_errmsg(h));
			exit(1);
		}
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	if (sqlite3_exec(h, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		fprintf(stderr, "%s: %s: %s\n", who, path, sqlite3_errmsg(h));
		exit(1);
	}
	sqlite3_close(h);
}
