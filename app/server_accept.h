/*
 * server_accept.h: the connections a FastCGI process serves, ready for a
 * worker: new ones on the listening socket and the web server's kept ones
 * (nginx's fastcgi_keep_conn) that have sent their next request. One
 * epoll set per process, which every worker waits in, so that a kept
 * connection holds a descriptor between its requests but never a thread.
 */
#ifndef RLG_SERVER_ACCEPT_H
#define RLG_SERVER_ACCEPT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

/*
 * Makes the set for the listening socket lfd (made non-blocking: every
 * worker of every process on it only accepts when told it is ready).
 * log_level: the current [log] level (read atomically; refused peers
 * are logged from RLG_LOG_WARN); read_timeout_ms: the current read
 * deadline (read atomically), how long a connection stays idle in the
 * set. The set holds at most the descriptor limit (RLIMIT_NOFILE) less
 * reserved idle connections: past that, new connections wait in the
 * listening queue (the kernel's, not this process's descriptors) and a
 * kept one is closed. Returns 0, or an errno (no set: the caller cannot
 * serve).
 */
int rlg_accept_init(int lfd, const int *log_level,
    const int *read_timeout_ms, int reserved);

/*
 * The next connection with something to read, for the calling worker:
 * a new one (accepted, TCP_NODELAY on TCP, a TCP peer not in
 * FCGI_WEB_SERVER_ADDRS closed; *peer is its address) or a kept one that
 * has sent its next request or closed (*peer is left alone: the caller
 * knows it or asks getpeername). *kept says which. Running out of
 * descriptors or memory is logged (paced) and waited out, 100 ms at a
 * time. Returns the descriptor, -EINTR when a signal interrupted the wait
 * (a stop: the caller looks), or another -errno when the socket is no
 * listening socket (the worker stops).
 */
int rlg_accept_next(struct sockaddr_storage *peer, bool *kept);

/*
 * Gives the idle kept connection fd back to the set: the next worker to
 * find it ready takes its next request. The caller no longer touches fd
 * (another worker may have it at once). On failure (no memory in the
 * kernel) fd is closed: the web server opens another.
 */
void rlg_accept_keep(int fd);

/*
 * Closes every connection idle in the set past its read deadline at
 * now_ns (rlg_mono_ns) with nothing to read: a kept one the web server no
 * longer uses, or a new one that never sent a byte; then takes into the
 * set what the listening queue holds, while it has room (a worker that
 * found the set full left it there). Returns how many silent new ones
 * were closed (the caller logs them; *peer: the first one's address).
 */
int rlg_accept_reap(int64_t now_ns, struct sockaddr_storage *peer);

#endif
