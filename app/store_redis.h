/*
 * store_redis.h: the Redis address of [store] url, parsed into the redis_*
 * fields of struct rlg_store_config, and the store described for the logs
 * with every secret masked (store_redis_url.c). The config calls these to
 * check [store] url; the stores and main call rlg_store_describe.
 */
#ifndef RLG_STORE_REDIS_H
#define RLG_STORE_REDIS_H

#include <stddef.h>

#include "config.h"

/*
 * Parses a Redis address into sc->redis (struct rlg_redis_config),
 * replacing what its address fields held:
 *   redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]   (PORT 6379 by default)
 *   redis://[[USER]:PASSWORD@]HOST[:PORT],HOST[:PORT]...[/DB]
 *   unix:/PATH[?db=N][&password=P][&user=U]      (unix:///PATH too)
 * HOST is a name, an IPv4 address or an IPv6 one in brackets; USER and
 * PASSWORD may hold %XX escapes (%40 for '@'). A list (at most
 * RLG_REDIS_SEEDS_MAX) names the seed nodes of a Redis Cluster: the first
 * goes to host and port, the others to seeds; whether
 * the backend wants a list is the config's check, not this one's.
 * Returns 0, or -1 with why the url is refused in why (size bytes; never
 * the password) and sc unchanged.
 */
int rlg_config_redis_url(struct rlg_store_config *sc, const char *url,
    char *why, size_t size);

/*
 * Where the store is, for the logs, never with a password: "sqlite PATH",
 * "redis HOST:PORT[/DB]", "redis [V6ADDR]:PORT", "redis unix:PATH[?db=N]",
 * "redis_cluster HOST:PORT,HOST:PORT..." (the seed nodes).
 * Writes into buf (size bytes) and returns it.
 */
const char *rlg_store_describe(const struct rlg_store_config *sc, char *buf,
    size_t size);

/*
 * url for a message, whatever its shape, valid or not, with every part
 * that may be a secret replaced by "***" (the userinfo; every query value
 * but db's). Returns a new string: the caller frees it.
 */
char *rlg_url_masked(const char *url);

/* Frees the strings and seeds of sc->redis and sets them to NULL (and its
 * db to 0); the other fields are left alone. */
void rlg_redis_fields_free(struct rlg_store_config *sc);

#endif
