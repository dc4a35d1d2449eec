/*
 * util.h: what every module shares: result codes, the one logging function,
 * the xmalloc family (allocation failure aborts) and the clock read.
 */
#ifndef RLG_UTIL_H
#define RLG_UTIL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* Result codes: 0 ok, negative on error. "Rejected" is never one of these. */
#define RLG_OK        0
#define RLG_EINVAL  (-1)   /* bad argument or input */
#define RLG_ESTORE  (-2)   /* the store failed: apply on_error */
#define RLG_ENOSPC  (-3)   /* an output buffer was too small */
#define RLG_EFULL   (-4)   /* the store holds max_clients: apply on_error */

/*
 * Writes one line to stderr (the web server's error log): the time, RFC
 * 3339 in UTC with milliseconds ("2026-12-03T23:15:08.123Z"), a space,
 * "rlgate[pid]: ", then the formatted message and a newline. Safe from several threads: the
 * line is formatted first and written with one write(2). With
 * rlg_log_set_json(1), the line is one JSON object instead: "time",
 * "pid", then an event line's ("event=NAME key=value ...") pairs as
 * members (retry_after_s, cost and suppressed as numbers), or
 * "message".
 */
void rlg_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * The file --log opened, for rlg_log_reopen: a SIGUSR1 handler (server.c)
 * that opens path again and points stderr at it, after a log rotation
 * moved the file away. Without a path it does nothing.
 */
void rlg_log_set_path(const char *path);
void rlg_log_reopen(int sig);

/* [log] format = json (on) or text: for every thread, from now on. */
void rlg_log_set_json(int on);

/*
 * Whether the calling thread reports its store connection's state (lost,
 * back, the database file moved): the overrides reader's thread does not
 * (overrides.c): its failures change no answer, and the workers'
 * connections say the same. Every thread reports until it says otherwise.
 */
void rlg_log_set_store_quiet(bool quiet);
bool rlg_log_store_quiet(void);

/*
 * Writes in (at most its first max bytes) into out (cap bytes) as one
 * log token: bytes other than letters, digits and -._~/!$&()*+,;=:@
 * percent-encoded, "..." after it when cut (by max or cap). Returns the
 * length written (NUL not counted).
 */
size_t rlg_log_token(char *out, size_t cap, const char *in, size_t max);

/* Allocation that never returns NULL: on failure it logs and aborts. */
/*
 * Writes s[0..len) to out as a JSON string, quotes included ('"' and '\\'
 * escaped, control bytes and DEL as \u00XX, other bytes as they are);
 * out needs 6 * len + 2 bytes. Returns the bytes written (no NUL).
 */
size_t rlg_json_escape(char *out, const char *s, size_t len);

/* A growing string (the admin endpoints' bodies): zero it to start. */
struct rlg_sb {
	char *p;               /* NUL-terminated once anything is added */
	size_t len;
	size_t cap;
};
void rlg_sb_mem(struct rlg_sb *b, const char *s, size_t n);
void rlg_sb_printf(struct rlg_sb *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* s as a JSON string (rlg_json_escape). */
void rlg_sb_json(struct rlg_sb *b, const char *s);
void rlg_sb_free(struct rlg_sb *b);

void *rlg_xmalloc(size_t size);
void *rlg_xcalloc(size_t n, size_t size);
char *rlg_xstrdup(const char *s);

/*
 * Copies src into dst of size bytes (size > 0), cut to fit and always
 * terminated; returns strlen(src), so a result >= size says it was cut.
 * snprintf(dst, size, "%s", src) without the printf machinery.
 */
size_t rlg_copy(char *dst, const char *src, size_t size);

/*
 * Stops a worker thread that waits on cv under mu until *stop: sets *stop
 * under mu, wakes the thread and joins it.
 */
void rlg_thread_stop(pthread_t thread, pthread_mutex_t *mu,
    pthread_cond_t *cv, bool *stop);

/* The value of a hex digit (0-9, a-f, A-F), or -1. */
int rlg_hexval(int c);

/*
 * Whether s[0..len) is a token of 1 to max bytes, each an ASCII letter or
 * digit or one of the bytes of punct (s need not be terminated).
 */
bool rlg_token_ok(const char *s, size_t len, size_t max, const char *punct);

/* Wall-clock time in milliseconds since the epoch (CLOCK_REALTIME). */
int64_t rlg_now_ms(void);

/* A monotonic clock (CLOCK_MONOTONIC) in nanoseconds: for durations. */
int64_t rlg_mono_ns(void);

/*
 * The reason phrase of an HTTP status code rlgate may send: 200, and every
 * 4xx and 5xx code of the IANA registry (RFC 9110 section 15 and the
 * codes registered since: 421, 422, 425, 426, 428, 429, 431, 451, 506,
 * 507, 508, 510, 511). NULL for any other code.
 */
const char *rlg_http_reason(int code);

/*
 * Describes the group and other permission bits in bits (a st_mode, masked
 * by the caller to the bits that are too many): in words into words
 * ("group-writable, world-readable"), and as the chmod argument that
 * removes them into chmod_arg ("g-w,o-r"). Empty strings when there are
 * none.
 */
void rlg_mode_describe(unsigned bits, char *words, size_t wsize,
    char *chmod_arg, size_t csize);

/*
 * Opens a file rlgate maps shared with its other processes (the table,
 * the scoreboard: what names it in messages) read-write, after checking
 * it as every such file is checked: a regular file, not a symbolic link,
 * owned by the running user, mode 0600. Nothing that fails the check is
 * opened for use, and no device or FIFO is opened at all. create: a
 * missing file is created (mode 0600).
 * Returns the descriptor (O_CLOEXEC); -1 with errno (ENOENT: missing)
 * and why set (size bytes); or -2 when the file was refused: why holds
 * the line to log (the file, its owner and mode, what to do) and
 * *refused what it is (for rlg_shared_set_aside). Logs nothing.
 */
int rlg_shared_open(const char *path, const char *what, bool create,
    struct stat *refused, char *why, size_t size);

/*
 * Moves a refused shared file out of the way: renames path to
 * path.refused (replacing an older one), so that a new file can be made
 * under path and the operator can look at the old one; nothing when path
 * names another file than refused by now (another process moved it
 * already and may have made the new one). 0, or -1 (errno: a sticky
 * directory keeps another user's file where it is).
 */
int rlg_shared_set_aside(const char *path, const struct stat *refused);

#endif
