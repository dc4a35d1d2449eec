/*
 * redis_url.h: the Redis store's address, as [store] url gives it. The
 * settings of a Redis store (struct rlg_redis_config), the parser that
 * fills them from a url, the description of a store for the logs and the
 * masking of a url for a message: no secret ever leaves this module
 * unmasked. A module of its own, next to the Redis store and below the
 * config: the config's setter calls the parser and the store reads what
 * it parsed, while it needs neither of them (no circle: scripts/lint.sh).
 */
#ifndef RLG_REDIS_URL_H
#define RLG_REDIS_URL_H

#include <stdbool.h>
#include <stddef.h>

#define RLG_DEFAULT_REDIS_PORT 6379
#define RLG_DEFAULT_REDIS_TIMEOUT_MS 500      /* a request's connects, and
                                                 its commands */
#define RLG_REDIS_TIMEOUT_MS_MAX 60000
#define RLG_REDIS_DB_MAX 2147483647
#define RLG_REDIS_SEEDS_MAX 32                /* HOST:PORT in one url */
#define RLG_REDIS_SENTINELS_MAX 16            /* sentinels in one url */
#define RLG_REDIS_MASTER_MAX 64               /* a sentinel's master name */
#define RLG_DEFAULT_SENTINEL_PORT 26379

/* One more seed node of a Redis Cluster ([store] url). */
struct rlg_redis_seed {
	char *host;                /* as struct rlg_redis_config's */
	int port;
};

/* [store] clock (Redis): whose clock says what time it is. */
enum rlg_store_clock {
	RLG_CLOCK_REDIS = 0,       /* Redis TIME, inside the script */
	RLG_CLOCK_LOCAL,           /* the gateway's own (the caller's now_ms) */
};

/*
 * [store] for backend = redis or redis_cluster ([store] url, timeouts,
 * clock), the address filled from the url by rlg_redis_url_parse. A TCP host and port, or a unix
 * socket (then host is NULL). host is a name or an address, an IPv6 one
 * without its brackets. AUTH follows the connect when password is set
 * (with user, an ACL user, if set too); SELECT when db is not 0. The
 * password is never logged.
 */
struct rlg_redis_config {
	char *host;
	int port;                  /* 1..65535 */
	char *socket;              /* absolute path, or NULL */
	char *user;                /* or NULL: the default user */
	char *password;            /* or NULL: no AUTH */
	int db;                    /* 0..RLG_REDIS_DB_MAX */
	/*
	 * backend = redis_cluster: a Redis Cluster, whose seed nodes are
	 * host:port and then seeds, in url order
	 * (redis://HOST:PORT,HOST:PORT,...). The config allows a list only
	 * with it, or as the sentinels of a master (below). The seeds are
	 * owned.
	 */
	bool cluster;
	struct rlg_redis_seed *seeds;
	size_t nseeds;             /* < RLG_REDIS_SEEDS_MAX */
	/*
	 * redis+sentinel://: the name of the master the sentinels watch (1
	 * to RLG_REDIS_MASTER_MAX of A-Z a-z 0-9 . - _), or NULL. Then
	 * host:port and seeds are the sentinels (at most
	 * RLG_REDIS_SENTINELS_MAX), user, password and db the master's: the
	 * sentinels are asked without a password.
	 */
	char *master;
	int connect_timeout_ms;    /* the connects of a step, together (TCP or
	                              socket); 0: the default */
	int timeout_ms;            /* the commands of a step: one deadline;
	                              0: the default */
	enum rlg_store_clock clock;
};

/*
 * Parses a Redis address into rc, replacing what its address fields
 * (host, port, socket, user, password, db, seeds, master) held:
 *   redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]   (PORT 6379 by default)
 *   redis://[[USER]:PASSWORD@]HOST[:PORT],HOST[:PORT]...[/DB]
 *   unix:/PATH[?db=N][&password=P][&user=U]      (unix:///PATH too)
 *   redis+sentinel://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/MASTER[?db=N]
 *                                                (PORT 26379 by default)
 * HOST is a name, an IPv4 address or an IPv6 one in brackets; USER and
 * PASSWORD may hold %XX escapes (%40 for '@'). A list (at most
 * RLG_REDIS_SEEDS_MAX) names the seed nodes of a Redis Cluster: the first
 * goes to host and port, the others to seeds; whether the backend wants a
 * list is the config's check, not this one's. Returns 0, or -1 with why
 * the url is refused in why (size bytes; never the password) and rc
 * unchanged.
 */
int rlg_redis_url_parse(struct rlg_redis_config *rc, const char *url,
    char *why, size_t size);

/*
 * Where a Redis store is, for the logs, never with a password:
 * "redis HOST:PORT[/DB]", "redis [V6ADDR]:PORT", "redis unix:PATH[?db=N]",
 * "redis_cluster HOST:PORT,HOST:PORT..." (the seed nodes),
 * "redis sentinel master NAME via HOST:PORT,...[/DB]". Writes into
 * buf (size bytes) and returns it.
 */
const char *rlg_redis_describe(const struct rlg_redis_config *rc, char *buf,
    size_t size);

/*
 * url for a message, whatever its shape, valid or not, with every part
 * that may be a secret replaced by "***" (the userinfo; every query value
 * but db's). Returns a new string: the caller frees it.
 */
char *rlg_redis_url_masked(const char *url);

/* Frees the strings and seeds of rc (the master name too) and sets them
 * to NULL (and its db to 0); the other fields are left alone. */
void rlg_redis_config_free(struct rlg_redis_config *rc);

#endif
