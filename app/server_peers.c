/*
 * server_peers.c: who may connect to the FastCGI socket, and how the log
 * names a connection's peer (server_peers.h). libfcgi's own check of
 * FCGI_WEB_SERVER_ADDRS covers IPv4 peers only, and runs in its accept,
 * which the workers no longer call (server.c accepts itself).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "server_peers.h"
#include "util.h"

/*
 * FCGI_WEB_SERVER_ADDRS, as libfcgi reads it: the addresses (commas
 * between, no spaces) of the only web servers that may connect over TCP;
 * unset or empty: any. Read once at start (rlg_web_servers_read).
 */
#define RLG_WEB_SERVERS_MAX 64
static struct {
	int n;                  /* -1: unset, any peer */
	int family[RLG_WEB_SERVERS_MAX];
	struct in6_addr addr[RLG_WEB_SERVERS_MAX];  /* an IPv4 one in its
	                                               first 4 bytes */
} web_servers = { .n = -1 };

/* The web server's address as the log says it: "127.0.0.1", "unix". */
void
rlg_peer_name(const struct sockaddr_storage *sa, char *buf, size_t size)
{
	const void *a = NULL;

	if (sa->ss_family == AF_INET)
		a = &((const struct sockaddr_in *)sa)->sin_addr;
	else if (sa->ss_family == AF_INET6)
		a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
	if (a == NULL || inet_ntop(sa->ss_family, a, buf, (socklen_t)size) ==
	    NULL)
		rlg_copy(buf, sa->ss_family == AF_UNIX ? "unix" : "-", size);
}

/* FCGI_WEB_SERVER_ADDRS into web_servers; a bad item is logged. */
void
rlg_web_servers_read(void)
{
	const char *list = getenv("FCGI_WEB_SERVER_ADDRS");
	char item[INET6_ADDRSTRLEN + 1];
	struct in_addr a4;
	size_t len;
	int i;

	if (list == NULL || *list == '\0')
		return;
	web_servers.n = 0;
	for (; *list != '\0'; list += len + (list[len] == ',')) {
		len = strcspn(list, ",");
		i = web_servers.n;
		if (len == 0)
			continue;
		if (len >= sizeof item || i == RLG_WEB_SERVERS_MAX) {
			rlg_log("FCGI_WEB_SERVER_ADDRS: an item of %zu bytes, or"
			    " more than %d items: ignored", len,
			    RLG_WEB_SERVERS_MAX);
			continue;
		}
		memcpy(item, list, len);
		item[len] = '\0';
		memset(&web_servers.addr[i], 0, sizeof web_servers.addr[i]);
		if (inet_aton(item, &a4) != 0) {
			web_servers.family[i] = AF_INET;
			memcpy(&web_servers.addr[i], &a4, sizeof a4);
		} else if (inet_pton(AF_INET6, item, &web_servers.addr[i]) == 1) {
			web_servers.family[i] = AF_INET6;
		} else {
			rlg_log("FCGI_WEB_SERVER_ADDRS: an item is no IP"
			    " address: ignored");
			continue;
		}
		web_servers.n++;
	}
}

/*
 * Whether a TCP peer may connect: FCGI_WEB_SERVER_ADDRS unset, or its
 * address listed. libfcgi checks IPv4 peers only; an IPv6 one (an
 * IPv4-mapped one as its IPv4 address) is held to the list too.
 */
bool
rlg_web_server_ok(const struct sockaddr_storage *sa)
{
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
	struct in6_addr a;
	int family = sa->ss_family, i;

	if (web_servers.n < 0 || (family != AF_INET && family != AF_INET6))
		return true;
	memset(&a, 0, sizeof a);
	if (family == AF_INET) {
		memcpy(&a, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
		family = AF_INET;
		memcpy(&a, &s6->sin6_addr.s6_addr[12], 4);
	} else {
		a = s6->sin6_addr;
	}
	for (i = 0; i < web_servers.n; i++)
		if (web_servers.family[i] == family &&
		    memcmp(&web_servers.addr[i], &a, sizeof a) == 0)
			return true;
	return false;
}
