/*
 * request_client.h: who the client is when the peer is a trusted proxy:
 * the walk of the one forwarding header the operator names (Forwarded of
 * RFC 7239, or X-Forwarded-For) from the right, past trusted hops.
 */
#ifndef RLG_REQUEST_CLIENT_H
#define RLG_REQUEST_CLIENT_H

#include "config.h"
#include "front.h"
#include "net.h"

/* Where the walk behind a trusted peer ended. */
enum rlg_walk {
	RLG_WALK_PEER,             /* no header naming anyone: the peer */
	RLG_WALK_CLIENT,           /* the client's address from the header */
	RLG_WALK_HIDDEN,           /* a trusted proxy hides the client */
	RLG_WALK_BAD,              /* malformed or oversized: a flaw */
	RLG_WALK_DUPLICATE,        /* the header came twice: a flaw */
};

/*
 * The client behind the trusted peer, from the one header the operator
 * says the trusted proxies set (cc->forwarded_header; a header a proxy
 * merely passes through would let the client choose its key), read from
 * params: walking from the right past hops in cc->trusted_proxies, the first
 * untrusted hop is the client; every hop trusted, the leftmost. out is
 * the client for RLG_WALK_CLIENT, else the peer. A hop that hides the
 * client ends as RLG_WALK_HIDDEN; a header malformed where the walk reads
 * it, over 8 KiB or over 64 hops all trusted as RLG_WALK_BAD; one that
 * came twice as RLG_WALK_DUPLICATE.
 */
enum rlg_walk rlg_request_client(const struct rlg_params *params,
    const struct rlg_client_config *cc, const struct rlg_addr *peer,
    struct rlg_addr *out);

#endif
