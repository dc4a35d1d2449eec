/*
 * request.h: a FastCGI or CGI request as rlgate sees it.
 *
 * The parser takes the parameters as an array of "NAME=value" strings (the
 * FastCGI envp, or environ in CGI mode), so it needs no FastCGI and the
 * unit tests feed it plain arrays. Everything it keeps is copied into
 * bounded buffers inside the struct: nothing is borrowed from libfcgi, which
 * frees its parameters at the next accept.
 */
#ifndef RLG_REQUEST_H
#define RLG_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

#include "store.h"

#define RLG_METHOD_MAX  15
#define RLG_PATH_MAX    2047

enum rlg_method {
	RLG_METHOD_OTHER = 0,
	RLG_METHOD_GET,
	RLG_METHOD_HEAD,
};

struct rlg_request {
	char method_name[RLG_METHOD_MAX + 1];   /* as sent, truncated */
	enum rlg_method method;
	char path[RLG_PATH_MAX + 1];     /* decoded path, no query string */
	bool path_ok;                    /* false: missing, too long or bad escape */
	char client[RLG_CLIENT_KEY_MAX + 1];     /* the client key for the store */
};

/* The key every client without a usable address shares. */
#define RLG_CLIENT_UNKNOWN "unknown"

/*
 * Looks up NAME in envp ("NAME=value" strings, NULL-terminated). Returns a
 * pointer into envp, or NULL.
 */
const char *rlg_request_param(char *const *envp, const char *name);

/*
 * Fills r from envp. The path comes from REQUEST_URI (else SCRIPT_NAME +
 * PATH_INFO), without its query string, percent-decoded. The client key is
 * the address in REMOTE_ADDR in canonical text form ("192.0.2.1",
 * "2001:db8::1"); a missing or malformed address gets RLG_CLIENT_UNKNOWN.
 * Never fails: malformed input shows in the fields.
 */
void rlg_request_parse(struct rlg_request *r, char *const *envp);

/*
 * Writes the canonical client key for the address text addr into key
 * (keylen bytes). Returns RLG_OK, or RLG_EINVAL (and RLG_CLIENT_UNKNOWN in
 * key) when addr is not an IPv4 or IPv6 address.
 */
int rlg_request_client_key(const char *addr, char *key, size_t keylen);

/*
 * Percent-decodes the path part of uri (up to '?' or '#') into out
 * (outlen bytes). Returns RLG_OK, RLG_ENOSPC if it does not fit, or
 * RLG_EINVAL for a bad escape or an encoded NUL.
 */
int rlg_request_decode_path(const char *uri, char *out, size_t outlen);

#endif
