/*
 * naive.c: the rate limiter anyone would write in sixty lines, the
 * baseline of tests/bench/ceiling.sh. One SQLite file (WAL,
 * synchronous = normal, busy_timeout 2000), one connection and one
 * prepared statement per thread, and per request ONE autocommit
 *     INSERT INTO hits(client, count) VALUES(?, 1)
 *     ON CONFLICT(client) DO UPDATE SET count = count + 1
 * keyed by the X-API-Key header if the request has one (the benchmark's
 * 10,000 clients), else by REMOTE_ADDR. It never says no: it counts and
 * answers with noop's bytes (responder.c, as many as rlgate's 200), or a
 * 500 if the statement failed. It serves as noop does (responder.c).
 * rlgate must beat this to be worth its code; noop is the ceiling over
 * both.
 *
 * Usage: spawn-fcgi -s SOCKET -F N -- naive --db FILE [--threads N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "responder.h"

#define NAIVE_500 \
	"Status: 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n"
#define NAIVE_UPSERT \
	"INSERT INTO hits(client, count) VALUES(?, 1) " \
	"ON CONFLICT(client) DO UPDATE SET count = count + 1"

static const char *db_path;

static void *naive_open(void);
static void naive_handle(FCGX_Request *req, void *state);

/* A thread's connection and its prepared UPSERT (NULL: said why). */
static void *
naive_open(void)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *upsert = NULL;
	int rc = SQLITE_ERROR, tries;

	/* every thread of every process sets the file up at once: switching
	 * to WAL can be refused busy without the busy handler, so retry */
	if (sqlite3_open(db_path, &db) == SQLITE_OK &&
	    sqlite3_busy_timeout(db, 2000) == SQLITE_OK)
		for (tries = 0; tries < 200; tries++) {
			rc = sqlite3_exec(db, "PRAGMA journal_mode = WAL; "
			    "PRAGMA synchronous = NORMAL; CREATE TABLE IF NOT "
			    "EXISTS hits(client TEXT PRIMARY KEY, "
			    "count INTEGER NOT NULL)", NULL, NULL, NULL);
			if (rc != SQLITE_BUSY && rc != SQLITE_LOCKED)
				break;
			sqlite3_sleep(10);
		}
	if (rc != SQLITE_OK ||
	    sqlite3_prepare_v2(db, NAIVE_UPSERT, -1, &upsert, NULL) != SQLITE_OK) {
		fprintf(stderr, "naive: %s: %s\n", db_path,
		    db != NULL ? sqlite3_errmsg(db) : "out of memory");
		sqlite3_close(db);
		return NULL;
	}
	return upsert;
}

static void
naive_handle(FCGX_Request *req, void *state)
{
	sqlite3_stmt *upsert = state;
	const char *key;
	int rc;

	key = FCGX_GetParam("HTTP_X_API_KEY", req->envp);
	if (key == NULL)
		key = FCGX_GetParam("REMOTE_ADDR", req->envp);
	sqlite3_bind_text(upsert, 1, key != NULL ? key : "-", -1,
	    SQLITE_STATIC);
	rc = sqlite3_step(upsert);
	sqlite3_reset(upsert);
	if (rc == SQLITE_DONE)
		responder_ok(req);
	else
		FCGX_PutS(NAIVE_500, req->out);
}

int
main(int argc, char **argv)
{
	int i, n = 1;

	for (i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--db") == 0)
			db_path = argv[i + 1];
		else if (strcmp(argv[i], "--threads") == 0)
			n = atoi(argv[i + 1]);
		else
			break;
	}
	if (i != argc || db_path == NULL || n < 1 ||
	    n > RESPONDER_THREADS_MAX) {
		fprintf(stderr, "usage: naive --db FILE [--threads 1-%d] "
		    "(under spawn-fcgi)\n", RESPONDER_THREADS_MAX);
		return 64;
	}
	return responder_run("naive", n, naive_open, naive_handle);
}
