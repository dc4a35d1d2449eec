/*
 * naive.c: the rate limiter anyone would write in sixty lines, the
 * baseline of tests/bench/ceiling.sh (issue 14). One SQLite file (WAL,
 * synchronous = normal, busy_timeout 2000), one connection and one
 * prepared statement per thread, and per request ONE autocommit
 *     INSERT INTO hits(client, count) VALUES(?, 1)
 *     ON CONFLICT(client) DO UPDATE SET count = count + 1
 * keyed by the X-API-Key header if the request has one (the benchmark's
 * 10,000 clients), else by REMOTE_ADDR. It never says no: it counts and
 * answers with noop's bytes (tests/bench/noop.c, as many as rlgate's 200),
 * or a 500 if the statement failed. rlgate must beat this to be worth its
 * code; noop is the ceiling over both.
 *
 * Usage: spawn-fcgi -s SOCKET -F N -- naive --db FILE [--threads N]
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcgiapp.h>
#include <sqlite3.h>

#define NAIVE_BODY \
	"{\"status\":\"success\",\"data\":{\"message\":\"Here is the resource payload.\"}}"
/* noop's headers: as many bytes as rlgate's draft03 200 */
#define NAIVE_HEAD \
	"Status: 200 OK\r\nContent-Type: application/json\r\n" \
	"Cache-Control: no-store\r\nX-Noop-Limit-00: 1000000000\r\n" \
	"X-Noop-Remaining-00: 999999999\r\nX-Noop-Reset-00: 36\r\n"
#define NAIVE_500 \
	"Status: 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n"
#define NAIVE_UPSERT \
	"INSERT INTO hits(client, count) VALUES(?, 1) " \
	"ON CONFLICT(client) DO UPDATE SET count = count + 1"

static const char *db_path;
static char answer[512];
static int answer_len;
static pthread_mutex_t accept_lock = PTHREAD_MUTEX_INITIALIZER;

static sqlite3 *
naive_open(sqlite3_stmt **upsert)
{
	sqlite3 *db = NULL;
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
	    sqlite3_prepare_v2(db, NAIVE_UPSERT, -1, upsert, NULL) != SQLITE_OK) {
		fprintf(stderr, "naive: %s: %s\n", db_path,
		    db != NULL ? sqlite3_errmsg(db) : "out of memory");
		sqlite3_close(db);
		return NULL;
	}
	return db;
}

static void *
naive_thread(void *arg)
{
	FCGX_Request req;
	sqlite3_stmt *upsert;
	sqlite3 *db = naive_open(&upsert);
	const char *key;
	int rc;

	(void)arg;
	if (db == NULL || FCGX_InitRequest(&req, 0, 0) != 0)
		exit(70);
	for (;;) {
		pthread_mutex_lock(&accept_lock);
		rc = FCGX_Accept_r(&req);
		pthread_mutex_unlock(&accept_lock);
		if (rc < 0)
			break;
		key = FCGX_GetParam("HTTP_X_API_KEY", req.envp);
		if (key == NULL)
			key = FCGX_GetParam("REMOTE_ADDR", req.envp);
		sqlite3_bind_text(upsert, 1, key != NULL ? key : "-", -1,
		    SQLITE_STATIC);
		rc = sqlite3_step(upsert);
		sqlite3_reset(upsert);
		if (rc == SQLITE_DONE)
			FCGX_PutStr(answer, answer_len, req.out);
		else
			FCGX_PutS(NAIVE_500, req.out);
		FCGX_Finish_r(&req);
	}
	return NULL;
}

int
main(int argc, char **argv)
{
	pthread_t tids[256];
	int i, n = 1;

	for (i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--db") == 0)
			db_path = argv[i + 1];
		else if (strcmp(argv[i], "--threads") == 0)
			n = atoi(argv[i + 1]);
		else
			break;
	}
	if (i != argc || db_path == NULL || n < 1 || n > 256) {
		fprintf(stderr, "usage: naive --db FILE [--threads 1-256] "
		    "(under spawn-fcgi)\n");
		return 64;
	}
	answer_len = snprintf(answer, sizeof answer,
	    "%sContent-Length: %zu\r\n\r\n%s", NAIVE_HEAD,
	    sizeof NAIVE_BODY - 1, NAIVE_BODY);
	if (FCGX_Init() != 0 || FCGX_IsCGI()) {
		fprintf(stderr, "naive: start it under spawn-fcgi\n");
		return 64;
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, SIG_DFL);
	for (i = 0; i < n; i++)
		if (pthread_create(&tids[i], NULL, naive_thread, NULL) != 0)
			return 71;
	for (i = 0; i < n; i++)
		pthread_join(tids[i], NULL);
	return 0;
}
