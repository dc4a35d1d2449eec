/*
 * server_peers.h: the FastCGI socket's peers: the web servers that may
 * connect over TCP (FCGI_WEB_SERVER_ADDRS), and a peer's name for the log.
 */
#ifndef RLG_SERVER_PEERS_H
#define RLG_SERVER_PEERS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* Reads FCGI_WEB_SERVER_ADDRS, once at start; a bad item is logged. */
void rlg_web_servers_read(void);

/*
 * Whether a TCP peer may connect: FCGI_WEB_SERVER_ADDRS unset, or its
 * address listed (an IPv4-mapped IPv6 one as its IPv4 address).
 */
bool rlg_web_server_ok(const struct sockaddr_storage *sa);

/* sa's address as the log says it, into buf: "127.0.0.1", "unix", "-". */
void rlg_peer_name(const struct sockaddr_storage *sa, char *buf,
    size_t size);

#endif
