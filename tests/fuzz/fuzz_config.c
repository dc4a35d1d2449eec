/*
 * fuzz_config.c: libFuzzer target for the config loader, the code that
 * reads the operator's INI file (the reader, ini.c, and every key's
 * parser). The input, cut at its first NUL, is loaded with
 * rlg_config_load_string. On success it checks the invariants the rest of
 * rlgate relies on: 1 to RLG_POLICIES_MAX policies, each with a name of 1
 * to 64 [A-Za-z0-9_.-], a limit, window and burst in range, and routes and
 * default policies that index existing policies, and that errs holds
 * nothing but warnings (whole lines, each "file:line: warning: ..."). On
 * failure it checks that the count is > 0, that out is NULL and that the
 * problems were written to errs.
 *
 * Build with ./configure CC=clang --enable-fuzzing; run scripts/fuzz.sh.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "limiter.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_name(const char *name)
{
	size_t n;

	if (name == NULL)
		abort();
	n = strlen(name);
	if (n < 1 || n > RLG_POLICY_NAME_MAX ||
	    strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789_.-") != n)
		abort();
}

static void
check_policy(const struct rlg_policy *p)
{
	check_name(p->name);
	if ((unsigned)p->lim.algorithm > RLG_ALG_SLIDING_LOG)
		abort();
	if (p->lim.limit < 1 || p->lim.limit > RLG_LIMIT_MAX)
		abort();
	if (p->lim.algorithm == RLG_ALG_SLIDING_LOG &&
	    p->lim.limit > RLG_SLIDING_LOG_LIMIT_MAX)
		abort();
	if (p->lim.window_ms < 1000 || p->lim.window_ms > RLG_WINDOW_S_MAX * 1000 ||
	    p->lim.window_ms % 1000 != 0)
		abort();
	if (p->lim.algorithm == RLG_ALG_TOKEN_BUCKET &&
	    (p->lim.burst < 1 || p->lim.burst > RLG_BURST_MAX))
		abort();
	if (p->nexempt > RLG_CIDRS_MAX || (p->nexempt > 0 && p->exempt == NULL))
		abort();
	if (p->key_name != NULL &&
	    (strlen(p->key_name) < 1 ||
	    strlen(p->key_name) > RLG_HEADER_NAME_MAX))
		abort();
}

static void
check_config(const struct rlg_config *cfg)
{
	size_t i, j;

	if (cfg->npolicies < 1 || cfg->npolicies > RLG_POLICIES_MAX ||
	    cfg->policies == NULL)
		abort();
	for (i = 0; i < cfg->npolicies; i++) {
		check_policy(&cfg->policies[i]);
		for (j = 0; j < i; j++)
			if (strcmp(cfg->policies[i].name,
			    cfg->policies[j].name) == 0)
				abort();
	}
	if (cfg->nroutes > RLG_ROUTES_MAX ||
	    (cfg->nroutes > 0 && cfg->routes == NULL))
		abort();
	for (i = 0; i < cfg->nroutes; i++) {
		const struct rlg_route *r = &cfg->routes[i];

		check_name(r->name);
		if (r->path == NULL || r->path[0] != '/')
			abort();
		if (r->nmethods > RLG_ROUTE_METHODS_MAX ||
		    (r->nmethods > 0 && r->methods == NULL))
			abort();
		for (j = 0; j < r->nmethods; j++)
			if (r->methods[j] == NULL || r->methods[j][0] == '\0')
				abort();
		if (r->npolicies > 0 && r->policies == NULL)
			abort();
		for (j = 0; j < r->npolicies; j++)
			if (r->policies[j] >= cfg->npolicies)
				abort();
	}
	if (cfg->ndefault > cfg->npolicies ||
	    (cfg->ndefault > 0 && cfg->default_policies == NULL))
		abort();
	for (i = 0; i < cfg->ndefault; i++)
		if (cfg->default_policies[i] >= cfg->npolicies)
			abort();
	if (cfg->client.ipv6_prefix < 1 || cfg->client.ipv6_prefix > 128)
		abort();
	if (cfg->client.ntrusted > RLG_CIDRS_MAX ||
	    cfg->client.nexempt > RLG_CIDRS_MAX)
		abort();
	if (cfg->client.key_secret != NULL &&
	    strlen(cfg->client.key_secret) < RLG_KEY_SECRET_MIN)
		abort();
	if ((unsigned)cfg->style > RLG_STYLE_NONE ||
	    (unsigned)cfg->errors > RLG_ERRORS_PROBLEM ||
	    (unsigned)cfg->log_level > RLG_LOG_INFO ||
	    (unsigned)cfg->store.on_error > RLG_ON_ERROR_OPEN)
		abort();
}

/* Only whole lines, each a warning ("...: warning: ..."), or nothing. */
static int
only_warnings(const char *msgs, size_t len)
{
	static const char mark[] = ": warning: ";
	const char *line = msgs, *nl, *c;

	while (line < msgs + len) {
		nl = memchr(line, '\n', (size_t)(msgs + len - line));
		if (nl == NULL)
			return 0;
		for (c = line; c + sizeof mark - 1 <= nl; c++)
			if (strncmp(c, mark, sizeof mark - 1) == 0)
				break;
		if (c + sizeof mark - 1 > nl)
			return 0;
		line = nl + 1;
	}
	return 1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rlg_config *cfg = (struct rlg_config *)&cfg; /* not NULL */
	char *text, *msgs = NULL;
	size_t msglen = 0;
	FILE *errs;
	int n;

	text = malloc(size + 1);
	if (text == NULL)
		abort();
	memcpy(text, data, size);
	text[size] = '\0';
	errs = open_memstream(&msgs, &msglen);
	if (errs == NULL)
		abort();

	n = rlg_config_load_string(text, "fuzz.conf", errs, &cfg);
	if (fclose(errs) != 0)
		abort();
	if (n == 0) {
		if (cfg == NULL || !only_warnings(msgs, msglen))
			abort();
		check_config(cfg);
	} else if (n < 0 || cfg != NULL || msglen == 0 ||
	    msgs[msglen - 1] != '\n') {
		abort();
	}
	rlg_config_free(cfg);
	free(msgs);
	free(text);
	return 0;
}
