/*
 * config_jwt.c: [client] jwt_key, the file of the key that verifies bearer
 * tokens (key = jwt:CLAIM), read and checked when the configuration is
 * (at start, on SIGHUP, by --check-config), so that a request never
 * touches the file and a bad file is a file:line problem, not a run of
 * refused tokens.
 *
 * Whoever can write this file can sign tokens for any client: it must be
 * a regular file of at most RLG_JWT_KEY_MAX bytes, owned by root or by the
 * user rlgate runs as, and writable by nobody else. An HS256 secret (its
 * one trailing newline dropped, as `openssl rand -hex 32 >FILE` writes
 * one) is at least RLG_JWT_SECRET_MIN bytes, and one that others may read
 * is a warning; an RS256 or ES256 key is a PEM public key, never a
 * private one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "config_priv.h"
#include "util.h"

static unsigned char *jwt_read(struct rlg_parse *p, int line,
    const char *path, size_t *len);
static bool jwt_key_ok(struct rlg_parse *p, int line,
    struct rlg_client_config *cc, const char *path);

/* Every load of a jwt_key in this process gets its own number. */
static atomic_uint_fast64_t jwt_generations;

void
rlg_jwt_finish(struct rlg_parse *p)
{
	struct rlg_client_config *cc = &p->cfg->client;
	struct rlg_set_lines *l = rlg_lines(p, 0, "client", "jwt_key");
	int line = l->ok;

	if (cc->jwt_key_file == NULL || line == 0)
		return;
	cc->jwt_key = jwt_read(p, line, cc->jwt_key_file, &cc->jwt_key_len);
	if (cc->jwt_key == NULL)
		return;
	if (!jwt_key_ok(p, line, cc, cc->jwt_key_file)) {
		free(cc->jwt_key);
		cc->jwt_key = NULL;
		cc->jwt_key_len = 0;
		return;
	}
	cc->jwt_generation = atomic_fetch_add(&jwt_generations, 1) + 1;
}

/*
 * The contents of path (NUL-ended; *len without the NUL), or NULL with the
 * problem at line: a file rlgate cannot read, that is no regular file,
 * empty, too large, or that another user could have written.
 */
static unsigned char *
jwt_read(struct rlg_parse *p, int line, const char *path, size_t *len)
{
	unsigned char *buf = NULL;
	struct stat st;
	ssize_t got;
	size_t have = 0;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		rlg_problem(p, line, "[client] jwt_key: %s: %s", path,
		    strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		rlg_problem(p, line, "[client] jwt_key: %s: not a regular file",
		    path);
	} else if (st.st_size == 0 || st.st_size > RLG_JWT_KEY_MAX) {
		rlg_problem(p, line, "[client] jwt_key: %s: %s (%lld bytes)",
		    path, st.st_size == 0 ? "empty" : "larger than 64 KiB",
		    (long long)st.st_size);
	} else if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
		rlg_problem(p, line, "[client] jwt_key: %s: writable by group "
		    "or others (mode %03o): whoever writes it signs tokens",
		    path, (unsigned)(st.st_mode & 0777));
	} else if (st.st_uid != 0 && st.st_uid != geteuid()) {
		rlg_problem(p, line, "[client] jwt_key: %s: owned by uid %u, "
		    "neither root nor the user rlgate runs as (%u)", path,
		    (unsigned)st.st_uid, (unsigned)geteuid());
	} else {
		buf = rlg_xmalloc((size_t)st.st_size + 1);
		while (have < (size_t)st.st_size &&
		    ((got = read(fd, buf + have, (size_t)st.st_size - have)) > 0 ||
		    (got < 0 && errno == EINTR)))
			if (got > 0)
				have += (size_t)got;
		if (have != (size_t)st.st_size) {
			rlg_problem(p, line, "[client] jwt_key: %s: read %zu "
			    "of %lld bytes", path, have, (long long)st.st_size);
			free(buf);
			buf = NULL;
		} else {
			buf[have] = '\0';
			*len = have;
			if ((st.st_mode & S_IROTH) != 0 &&
			    p->cfg->client.jwt_algorithm == RLG_JWT_HS256) {
				rlg_problem(p, line, "[client] jwt_key: %s: "
				    "readable by others (mode %03o): whoever "
				    "reads an HS256 secret signs tokens", path,
				    (unsigned)(st.st_mode & 0777));
				p->problems[p->nproblems - 1].warning = true;
			}
		}
	}
	close(fd);
	return buf;
}

/* Whether the key read suits jwt_algorithm (the problem at line if not);
 * an HS256 secret loses its one trailing newline. */
static bool
jwt_key_ok(struct rlg_parse *p, int line, struct rlg_client_config *cc,
    const char *path)
{
	char *text = (char *)cc->jwt_key;
	size_t n = cc->jwt_key_len;

	if (cc->jwt_algorithm == RLG_JWT_HS256) {
		if (n > 0 && text[n - 1] == '\n')
			n--;
		if (n > 0 && text[n - 1] == '\r')
			n--;
		text[n] = '\0';
		cc->jwt_key_len = n;
		if (n < RLG_JWT_SECRET_MIN) {
			rlg_problem(p, line, "[client] jwt_key: %s: an HS256 "
			    "secret of at least %d bytes (got %zu)", path,
			    RLG_JWT_SECRET_MIN, n);
			return false;
		}
		return true;
	}
	if (strstr(text, "PRIVATE KEY") != NULL) {
		rlg_problem(p, line, "[client] jwt_key: %s: holds a private key:"
		    " give rlgate the public key only (openssl pkey -pubout)",
		    path);
		return false;
	}
	if (strstr(text, "-----BEGIN PUBLIC KEY-----") == NULL) {
		rlg_problem(p, line, "[client] jwt_key: %s: not a PEM public "
		    "key (-----BEGIN PUBLIC KEY-----), as %s needs", path,
		    cc->jwt_algorithm == RLG_JWT_RS256 ? "RS256" : "ES256");
		return false;
	}
	return true;
}
