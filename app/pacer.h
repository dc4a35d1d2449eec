/*
 * pacer.h: log now, or count the line as suppressed until the next
 * interval. An event that may come in a flood (a failing store, refused
 * requests, refused connections) writes one line at once, then at most
 * one per interval saying how many were held back in between, so a flood
 * costs no disk. One pacer per kind of line: a worker thread's own, or
 * one for every thread of the process (it is lock-free: relaxed atomics,
 * a compare-and-swap only when a line is due).
 */
#ifndef RLG_PACER_H
#define RLG_PACER_H

#include <stdint.h>

/* Store errors, refused clients and refused requests (and connections)
 * are logged once, then at most once per this interval. */
#define RLG_ERROR_LOG_INTERVAL_MS 10000

/*
 * A pacer: all zero is one whose first line is due at once. Times are
 * in ms of whichever clock its caller reads (the same one every time).
 */
struct rlg_pacer {
	int64_t next_ms;        /* no line before this */
	long suppressed;        /* lines held back since the last one */
};

/*
 * Whether a line is due at now_ms: the number of lines held back since
 * the last one (>= 0; the next line is due interval_ms from now), or -1:
 * hold this one back too (counted). Any thread.
 */
long rlg_pacer_take(struct rlg_pacer *p, int64_t now_ms,
    int64_t interval_ms);

/*
 * A line was written at now_ms outside the pacer (the first of a new
 * episode): the next is due interval_ms from now, nothing held back.
 */
void rlg_pacer_restart(struct rlg_pacer *p, int64_t now_ms,
    int64_t interval_ms);

#endif
