/*
 * util.c: logging to stderr, the allocation family that aborts on failure,
 * the clock, and file modes in words. Kept apart so every module links
 * the same few helpers.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

/*
 * The process id a log line starts with, asked of the kernel once per
 * process (getpid is a system call): a child forgets its parent's.
 */
static long log_pid;
static pthread_once_t log_pid_once = PTHREAD_ONCE_INIT;

static void
log_pid_forget(void)
{
	__atomic_store_n(&log_pid, 0, __ATOMIC_RELAXED);
}

static void
log_pid_init(void)
{
	(void)pthread_atfork(NULL, NULL, log_pid_forget);
}

static long
log_pid_get(void)
{
	long pid;

	(void)pthread_once(&log_pid_once, log_pid_init);
	if ((pid = __atomic_load_n(&log_pid, __ATOMIC_RELAXED)) == 0) {
		pid = (long)getpid();
		__atomic_store_n(&log_pid, pid, __ATOMIC_RELAXED);
	}
	return pid;
}

void
rlg_log(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n, m;

	struct timespec ts;
	struct tm tm;
	size_t t;

	/* RFC 3339, UTC, milliseconds: 2026-12-03T23:15:08.123Z */
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0 ||
	    gmtime_r(&ts.tv_sec, &tm) == NULL ||
	    (t = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm)) == 0)
		return;
	n = snprintf(line + t, sizeof line - t, ".%03ldZ rlgate[%ld]: ",
	    ts.tv_nsec / 1000000, log_pid_get());
	if (n < 0)
		return;
	n += (int)t;
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	n += m;
	if ((size_t)n > sizeof line - 2)
		n = (int)sizeof line - 2;
	line[n++] = '\n';
	/* One write(2), so lines from several threads never interleave. */
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}

static void
rlg_oom(size_t size)
{
	rlg_log("out of memory allocating %zu bytes", size);
	abort();
}

void *
rlg_xmalloc(size_t size)
{
	void *p = malloc(size ? size : 1);

	if (p == NULL)
		rlg_oom(size);
	return p;
}

void *
rlg_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (p == NULL)
		rlg_oom(n * size);
	return p;
}

char *
rlg_xstrdup(const char *s)
{
	size_t len = strlen(s) + 1;
	char *p = rlg_xmalloc(len);

	memcpy(p, s, len);
	return p;
}

int64_t
rlg_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

size_t
rlg_copy(char *dst, const char *src, size_t size)
{
	size_t n = strlen(src);
	size_t k = n < size ? n : size - 1;

	memcpy(dst, src, k);
	dst[k] = '\0';
	return n;
}

int
rlg_hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

void
rlg_mode_describe(unsigned bits, char *words, size_t wsize,
    char *chmod_arg, size_t csize)
{
	static const struct {
		unsigned bit;
		const char *word;
	} names[] = {
		{ S_IRGRP, "group-readable" }, { S_IWGRP, "group-writable" },
		{ S_IXGRP, "group-executable" }, { S_IROTH, "world-readable" },
		{ S_IWOTH, "world-writable" }, { S_IXOTH, "world-executable" },
	};
	static const char rwx[] = "rwx";
	size_t i, w = 0, c = 0;
	int who, k;

	words[0] = '\0';
	chmod_arg[0] = '\0';
	for (i = 0; i < sizeof names / sizeof names[0]; i++) {
		if ((bits & names[i].bit) == 0 || w >= wsize)
			continue;
		k = snprintf(words + w, wsize - w, "%s%s", w > 0 ? ", " : "",
		    names[i].word);
		if (k > 0)
			w += (size_t)k;
	}
	/* who 0: group (bits 070), 1: others (bits 007). */
	for (who = 0; who < 2; who++) {
		unsigned b = (bits >> (who == 0 ? 3 : 0)) & 7;

		if (b == 0 || c + 8 > csize)
			continue;
		if (c > 0)
			chmod_arg[c++] = ',';
		chmod_arg[c++] = who == 0 ? 'g' : 'o';
		chmod_arg[c++] = '-';
		for (k = 0; k < 3; k++)
			if (b & (4u >> k))
				chmod_arg[c++] = rwx[k];
		chmod_arg[c] = '\0';
	}
}
