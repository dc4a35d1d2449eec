/*
 * server_park.h: answers held for their turn (a smoothing policy:
 * config.h, delay), without a worker thread each. A worker that decided
 * a request whose answer must wait renders it, reserves a slot and
 * hands the request here (rlg_park_add); one thread of the process, the
 * parker, answers each when it is due, in the order of their turns, and
 * then closes its connection without blocking (a lingering close: its
 * side shut, what the web server still sends read and dropped until it
 * closes too, or the read deadline). The transport is the caller's: the
 * park only calls its answer function and closes the descriptor it
 * returns. No libfcgi here (server.c says how a FastCGI request is
 * answered).
 */
#ifndef RLG_SERVER_PARK_H
#define RLG_SERVER_PARK_H

#include <stdbool.h>
#include <stdint.h>

/*
 * Answers what arg stands for (at its turn, or at once at a stop), on
 * the parker's thread. Returns the descriptor of its connection, for the
 * park to close (lingering), or -1 when there is none left to close.
 */
typedef int rlg_park_answer_fn(void *arg);

/*
 * Starts the parker thread; linger_ms bounds each lingering close.
 * Returns 0 (also when it was started before), or an errno.
 */
int rlg_park_start(int linger_ms);

/*
 * A slot for one answer, if fewer than max are taken (parked, or still
 * closing): true, and the caller then either parks (rlg_park_add) or
 * gives it back (rlg_park_unreserve). false: the park is full.
 */
bool rlg_park_reserve(int max);
void rlg_park_unreserve(void);

/*
 * Parks an answer in the caller's reserved slot: answer(arg) at due_ns
 * (rlg_mono_ns), after every one parked before it with a due time not
 * later. A park not started, or stopping, answers it at once on the
 * caller's thread (and closes what it returns the same way).
 */
void rlg_park_add(int64_t due_ns, rlg_park_answer_fn *answer, void *arg);

/* How many slots are taken (parked, closing, or reserved). */
int rlg_park_count(void);

/*
 * A graceful stop: every parked answer is given at once (as it was
 * decided), then the closes finish or pass their bound; returns when the
 * parker has ended. How many were answered early goes to the log.
 */
void rlg_park_stop(void);

/*
 * Closes fd as the park does, blocking the caller up to timeout_ms: its
 * sending side shut, then read until the peer closes (or the time is
 * up), then closed. For a worker whose descriptor is too high for
 * libfcgi's own lingering close (select(2): below FD_SETSIZE only).
 */
void rlg_linger_close(int fd, int timeout_ms);

#endif
