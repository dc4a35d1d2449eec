/*
 * util.c: logging to stderr, the allocation family that aborts on failure,
 * the clock, and file modes in words. Kept apart so every module links
 * the same few helpers.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
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

/* --log's path, for rlg_log_reopen; NULL: stderr is not rlgate's own. */
static const char *log_path;

void
rlg_log_set_path(const char *path)
{
	log_path = path;
}

/*
 * Only what a signal handler may call (open, dup2, close: POSIX's
 * async-signal-safe list), errno kept. A line being written while the
 * descriptor is swapped goes whole to one file or the other.
 */
void
rlg_log_reopen(int sig)
{
	int saved = errno, fd;

	(void)sig;
	if (log_path != NULL && (fd = open(log_path, O_WRONLY | O_APPEND |
	    O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640)) >= 0) {
		if (fd != STDERR_FILENO) {
			(void)dup2(fd, STDERR_FILENO);
			close(fd);
		}
	}
	errno = saved;
}

/* [log] format = json: set once at start (rlg_log_set_json). */
static int log_json;

void
rlg_log_set_json(int on)
{
	__atomic_store_n(&log_json, on != 0, __ATOMIC_RELAXED);
}

/* rlg_log_set_store_quiet: this thread's. */
static _Thread_local bool log_store_quiet;

void
rlg_log_set_store_quiet(bool quiet)
{
	log_store_quiet = quiet;
}

bool
rlg_log_store_quiet(void)
{
	return log_store_quiet;
}

size_t
rlg_log_token(char *out, size_t cap, const char *in, size_t max)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0, i;
	unsigned char c;

	if (cap < 4) {
		if (cap > 0)
			out[0] = '\0';
		return 0;
	}
	for (i = 0; i < max && in[i] != '\0'; i++) {
		c = (unsigned char)in[i];
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || strchr("-._~/!$&()*+,;=:@", c)) {
			if (o + 1 > cap - 4)
				break;
			out[o++] = (char)c;
		} else {
			if (o + 3 > cap - 4)
				break;
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	if (in[i] != '\0') {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
	return o;
}

size_t
rlg_json_escape(char *out, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, o = 0;
	unsigned char c;

	out[o++] = '"';
	for (i = 0; i < len; i++) {
		c = (unsigned char)s[i];
		if (c == '"' || c == '\\') {
			out[o++] = '\\';
			out[o++] = (char)c;
		} else if (c < 0x20 || c == 0x7f) {
			out[o++] = '\\';
			out[o++] = 'u';
			out[o++] = '0';
			out[o++] = '0';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		} else {
			out[o++] = (char)c;
		}
	}
	out[o++] = '"';
	return o;
}

/* Appends s[0..len) to out as a JSON string; returns the new length. */
static size_t
json_string(char *out, size_t o, const char *s, size_t len)
{
	return o + rlg_json_escape(out + o, s, len);
}

static void
sb_room(struct rlg_sb *b, size_t n)
{
	if (b->len + n + 1 <= b->cap)
		return;
	b->cap = (b->len + n + 1) * 2;
	b->p = realloc(b->p, b->cap);
	if (b->p == NULL) {
		rlg_log("out of memory (%zu bytes)", b->cap);
		abort();
	}
}

void
rlg_sb_mem(struct rlg_sb *b, const char *s, size_t n)
{
	sb_room(b, n);
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void
rlg_sb_printf(struct rlg_sb *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	sb_room(b, (size_t)n);
	va_start(ap, fmt);
	(void)vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void
rlg_sb_json(struct rlg_sb *b, const char *s)
{
	size_t n = strlen(s);

	sb_room(b, 6 * n + 2);
	b->len += rlg_json_escape(b->p + b->len, s, n);
	b->p[b->len] = '\0';
}

void
rlg_sb_free(struct rlg_sb *b)
{
	free(b->p);
	memset(b, 0, sizeof *b);
}

/*
 * Whether msg is an event line, "event=NAME key=value ...": every word a
 * key of [a-z_] and a value without spaces.
 */
static bool
is_event(const char *msg)
{
	const char *p = msg, *k;

	if (strncmp(msg, "event=", 6) != 0)
		return false;
	while (*p != '\0') {
		for (k = p; (*p >= 'a' && *p <= 'z') || *p == '_'; p++)
			;
		if (p == k || *p != '=')
			return false;
		p += strcspn(p, " ");
		if (*p == ' ')
			p++;
	}
	return true;
}

/*
 * The JSON line of msg into out (room for 8 + 6 times msg, plus the
 * time): {"time":...,"pid":...,} then an event's key=value pairs as
 * members (retry_after_s, cost, left and suppressed as numbers), or
 * "message".
 */
static size_t
json_line(char *out, const char *time, long pid, const char *msg)
{
	size_t o, klen, vlen;
	const char *p, *eq;
	bool number;

	o = (size_t)sprintf(out, "{\"time\":\"%s\",\"pid\":%ld", time, pid);
	if (!is_event(msg)) {
		o += (size_t)sprintf(out + o, ",\"message\":");
		o = json_string(out, o, msg, strlen(msg));
	} else {
		for (p = msg; *p != '\0'; p += *p == ' ') {
			eq = strchr(p, '=');
			klen = (size_t)(eq - p);
			vlen = strcspn(eq + 1, " ");
			out[o++] = ',';
			o = json_string(out, o, p, klen);
			out[o++] = ':';
			number = ((klen == 13 && strncmp(p, "retry_after_s", 13) == 0) ||
			    (klen == 4 && strncmp(p, "cost", 4) == 0) ||
			    (klen == 4 && strncmp(p, "left", 4) == 0) ||
			    (klen == 10 && strncmp(p, "suppressed", 10) == 0)) &&
			    vlen > 0 && vlen < 19 &&
			    strspn(eq + 1, "0123456789") == vlen;
			if (number) {
				memcpy(out + o, eq + 1, vlen);
				o += vlen;
			} else {
				o = json_string(out, o, eq + 1, vlen);
			}
			p = eq + 1 + vlen;
		}
	}
	out[o++] = '}';
	out[o++] = '\n';
	return o;
}

void
rlg_log(const char *fmt, ...)
{
	char msg[1536], time[32], line[16384];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	size_t t, n;
	int m;

	/* RFC 3339, UTC, milliseconds: 2026-12-03T23:15:08.123Z */
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0 ||
	    gmtime_r(&ts.tv_sec, &tm) == NULL ||
	    (t = strftime(time, sizeof time, "%Y-%m-%dT%H:%M:%S", &tm)) == 0)
		return;
	snprintf(time + t, sizeof time - t, ".%03ldZ", ts.tv_nsec / 1000000);
	va_start(ap, fmt);
	m = vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	if (__atomic_load_n(&log_json, __ATOMIC_RELAXED)) {
		n = json_line(line, time, log_pid_get(), msg);
	} else {
		m = snprintf(line, sizeof line, "%s rlgate[%ld]: %s\n", time,
		    log_pid_get(), msg);
		if (m < 0)
			return;
		n = (size_t)m < sizeof line ? (size_t)m : sizeof line - 1;
	}
	/* One write(2), so lines from several threads never interleave. */
	if (write(STDERR_FILENO, line, n) < 0)
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

int64_t
rlg_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

const char *
rlg_http_reason(int code)
{
	static const char *const c4xx[] = {
		"Bad Request", "Unauthorized", "Payment Required", "Forbidden",
		"Not Found", "Method Not Allowed", "Not Acceptable",
		"Proxy Authentication Required", "Request Timeout", "Conflict",
		"Gone", "Length Required", "Precondition Failed",
		"Content Too Large", "URI Too Long", "Unsupported Media Type",
		"Range Not Satisfiable", "Expectation Failed", "(Unused)",
		NULL, NULL, "Misdirected Request", "Unprocessable Content",
		"Locked", "Failed Dependency", "Too Early", "Upgrade Required",
		NULL, "Precondition Required", "Too Many Requests", NULL,
		"Request Header Fields Too Large",
	};
	static const char *const c5xx[] = {
		"Internal Server Error", "Not Implemented", "Bad Gateway",
		"Service Unavailable", "Gateway Timeout",
		"HTTP Version Not Supported", "Variant Also Negotiates",
		"Insufficient Storage", "Loop Detected", NULL,
		"Not Extended (OBSOLETED)", "Network Authentication Required",
	};

	if (code == 200)
		return "OK";
	if (code == 451)
		return "Unavailable For Legal Reasons";
	if (code >= 400 && code < 400 + (int)(sizeof c4xx / sizeof c4xx[0]))
		return c4xx[code - 400];
	if (code >= 500 && code < 500 + (int)(sizeof c5xx / sizeof c5xx[0]))
		return c5xx[code - 500];
	return NULL;
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
rlg_thread_stop(pthread_t thread, pthread_mutex_t *mu, pthread_cond_t *cv,
    bool *stop)
{
	pthread_mutex_lock(mu);
	*stop = true;
	pthread_cond_signal(cv);
	pthread_mutex_unlock(mu);
	pthread_join(thread, NULL);
}

bool
rlg_token_ok(const char *s, size_t len, size_t max, const char *punct)
{
	size_t i;
	char c;

	if (len == 0 || len > max)
		return false;
	for (i = 0; i < len; i++) {
		c = s[i];
		if ((c < 'a' || c > 'z') && (c < 'A' || c > 'Z') &&
		    (c < '0' || c > '9') &&
		    (c == '\0' || strchr(punct, c) == NULL))
			return false;
	}
	return true;
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

/* The refusal of a shared file: what, whose, which mode, what to do. */
static int
shared_refuse(const char *path, const char *what, const struct stat *st,
    const char *is, char *why, size_t size)
{
	snprintf(why, size, "%s %s: refused: %s (owner uid %u, mode %04o);"
	    " rlgate maps only a regular file of its own user (uid %u) with"
	    " mode 0600, and another user may have planted this one: remove"
	    " it, and keep its directory to rlgate's user (mode 0700)", what,
	    path, is, st != NULL ? (unsigned)st->st_uid : 0u,
	    st != NULL ? (unsigned)(st->st_mode & 07777) : 0u,
	    (unsigned)geteuid());
	return -2;
}

/* What is wrong with st for a shared file, or NULL. */
static const char *
shared_bad(const struct stat *st)
{
	if (S_ISLNK(st->st_mode))
		return "a symbolic link";
	if (!S_ISREG(st->st_mode))
		return "not a regular file";
	if (st->st_uid != geteuid())
		return "another user's file";
	if ((st->st_mode & 07777) != 0600)
		return "a file of another mode";
	return NULL;
}

int
rlg_shared_open(const char *path, const char *what, bool create,
    struct stat *refused, char *why, size_t size)
{
	struct stat before, st;
	const char *bad;
	int fd, err;

	/* Looked at first: a device or FIFO is never opened. */
	if (lstat(path, &before) != 0) {
		err = errno;
		if (err != ENOENT || !create) {
			snprintf(why, size, "%s %s: %s", what, path,
			    strerror(err));
			errno = err;
			return -1;
		}
	} else if ((bad = shared_bad(&before)) != NULL) {
		*refused = before;
		return shared_refuse(path, what, &before, bad, why, size);
	}
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK |
	    (create ? O_CREAT : 0), 0600);
	if (fd < 0) {
		err = errno;
		if (err == ELOOP) {     /* made a link since the lstat */
			memset(refused, 0, sizeof *refused);
			(void)lstat(path, refused);
			return shared_refuse(path, what, refused,
			    "a symbolic link", why, size);
		}
		snprintf(why, size, "%s %s: %s", what, path, strerror(err));
		errno = err;
		return -1;
	}
	if (fstat(fd, &st) != 0) {
		err = errno;
		close(fd);
		snprintf(why, size, "%s %s: %s", what, path, strerror(err));
		errno = err;
		return -1;
	}
	if ((bad = shared_bad(&st)) != NULL) {
		close(fd);
		*refused = st;
		return shared_refuse(path, what, &st, bad, why, size);
	}
	return fd;
}

int
rlg_shared_set_aside(const char *path, const struct stat *refused)
{
	char aside[4200];
	struct stat now;

	if (lstat(path, &now) != 0)
		return errno == ENOENT ? 0 : -1;
	if (now.st_dev != refused->st_dev || now.st_ino != refused->st_ino)
		return 0;

	if ((size_t)snprintf(aside, sizeof aside, "%s.refused", path) >=
	    sizeof aside) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return rename(path, aside);
}
