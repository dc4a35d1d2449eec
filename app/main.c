/*
 * main.c: the command line. Parses the options, opens the log, loads and
 * validates the config (every problem reported as file:line, exit 78),
 * then hands over to the FastCGI accept loop, or serves one CGI request.
 * At FastCGI start and in --check-config it warns about files that users
 * other than rlgate's may read or write: the log, and the store's (which
 * the store reports on itself). Both say which [store] commit applies;
 * a plain CGI process, one per request, turns commit = auto into each
 * before its store opens (a table and a flusher thread for one request
 * are pure cost).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "metrics.h"
#include "request.h"
#include "server.h"
#include "store.h"
#include "supervisor.h"
#include "util.h"

#define THREADS_DEFAULT 4
#define THREADS_MAX     256

/* What the command line asks for. */
struct options {
	const char *config;        /* --config FILE, or NULL */
	const char *log;           /* --log FILE, or NULL: stderr */
	int threads;               /* --threads N */
	int check_only;            /* --check-config */
	int strict;                /* --strict (with --check-config) */
	const char *reset;         /* --reset CLIENT, or NULL */
	const char *policy;        /* --policy NAME (with --reset), or NULL */
	int processes;             /* --processes N; 0: serve in this one */
	int hash_key;              /* --hash-key */
};

/* What a worker process of the supervisor serves with (serve_worker). */
struct worker_ctx {
	const struct rlg_config *cfg;
	const char *path;
	int threads;
};

static int serve_worker(void *arg);
static void adopt_systemd_socket(void);

static void usage(FILE *f);
static int parse_options(int argc, char **argv, struct options *o);
static int check_options(int argc, char **argv, const struct options *o);
static int check_config(const struct rlg_config *cfg, const char *path,
    const char *log_path, bool strict);
static int check_redis(const struct rlg_config *cfg, const char *path,
    bool strict);
static int serve(struct rlg_config *cfg, const char *path, int threads,
    int processes, const char *log_warning);
static const char *describe_commit(const struct rlg_config *cfg,
    bool check, char *buf, size_t size);
static int parse_count(const char *option, const char *s, int max,
    int *out);
static int open_log(const char *path, char *warning, size_t size);
static void log_mode_warning(const char *path, mode_t mode, char *buf,
    size_t size);
static void check_log_path(const char *path);
static int check_store_dir(const struct rlg_config *cfg, const char *path);
static void warn_log(void *ctx, const char *line);
static void warn_stdout(void *ctx, const char *line);
static void describe_policies(const struct rlg_config *cfg, char *buf,
    size_t len);
static int hash_keys(const struct rlg_config *cfg, FILE *in, FILE *out);
static int reset_client(const struct rlg_config *cfg, const char *client,
    const char *policy);

static void
usage(FILE *f)
{
	fprintf(f,
	    "Usage: rlgate [--config FILE] [--threads N] [--processes N] [--log FILE]\n"
	    "              [--check-config [--strict]]\n"
	    "       rlgate [--config FILE] --reset CLIENT [--policy NAME]\n"
	    "       rlgate [--config FILE] --hash-key < KEYS\n"
	    "       rlgate --version | --help\n"
	    "\n"
	    "A rate-limit gateway: a FastCGI application (or CGI program) that\n"
	    "decides per client whether each request is within its quota.\n"
	    "\n"
	    "  -c, --config FILE   configuration file (else $RLGATE_CONFIG,\n"
	    "                      else %s if it exists,\n"
	    "                      else built-in defaults)\n"
	    "  -t, --threads N     FastCGI worker threads per process (default %d)\n"
	    "  -P, --processes N   fork N worker processes on the socket and keep\n"
	    "                      them running (a supervisor); default: serve\n"
	    "                      in this process\n"
	    "  -l, --log FILE      append log lines to FILE instead of stderr\n"
	    "                      (spawn-fcgi points stderr at /dev/null);\n"
	    "                      created mode 0640, never a symbolic link\n"
	    "  -C, --check-config  validate the configuration, print problems, exit\n"
	    "                      (a Redis store: connect, load the script)\n"
	    "  -s, --strict        with --check-config: a Redis store it\n"
	    "                      cannot reach fails the check (exit 69)\n"
	    "  -r, --reset CLIENT  forget CLIENT's state (its key as the clients\n"
	    "                      view shows it) under every policy, or NAME's\n"
	    "  -p, --policy NAME   with --reset: only under [policy NAME]\n"
	    "  -k, --hash-key      read API keys, one per line, on stdin and\n"
	    "                      print each one's client key (k:HASH, keyed\n"
	    "                      with [client] key_secret), for [tier] clients,\n"
	    "                      the overrides and --reset\n"
	    "  -V, --version       print the version and exit\n"
	    "  -h, --help          print this help and exit\n"
	    "\n"
	    "Run it under a FastCGI spawner, which passes the socket on stdin:\n"
	    "  spawn-fcgi -s /run/rlgate.sock -F 2 -- rlgate --config FILE\n"
	    "  spawn-fcgi -s /run/rlgate.sock -n -- rlgate --processes 2\n"
	    "or systemd's socket activation (LISTEN_FDS), or from a web server\n"
	    "as CGI (GATEWAY_INTERFACE set). SIGHUP reloads the configuration,\n"
	    "SIGUSR1 reopens the log, SIGTERM stops after the requests in flight.\n"
	    "Exit codes: 0 ok, 64 bad usage, 69 store unavailable (--reset,\n"
	    "--check-config --strict),\n"
	    "78 bad configuration.\n",
	    RLG_DEFAULT_CONFIG_PATH, THREADS_DEFAULT);
}

/*
 * The value s of --option, an integer from 1 to max, into *out: 0, or -1
 * said on stderr.
 */
static int
parse_count(const char *option, const char *s, int max, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 1 || v > max) {
		fprintf(stderr, "rlgate: --%s: must be an integer from 1 to %d"
		    " (got \"%s\")\n", option, max, s);
		return -1;
	}
	*out = (int)v;
	return 0;
}

/* "default fixed_window 60/60s, burst token_bucket 10/1s burst 5" */
static void
describe_policies(const struct rlg_config *cfg, char *buf, size_t len)
{
	size_t i, used = 0;
	int n;

	buf[0] = '\0';
	for (i = 0; i < cfg->npolicies && used < len; i++) {
		const struct rlg_policy *p = &cfg->policies[i];

		n = snprintf(buf + used, len - used, "%s%s %s %lld/%llds",
		    i > 0 ? ", " : "", p->name,
		    rlg_algorithm_name(p->lim.algorithm),
		    (long long)p->lim.limit,
		    (long long)(p->lim.window_ms / 1000));
		if (n < 0)
			break;
		used += (size_t)n;
		if (rlg_limiter_has_burst(&p->lim) && used < len) {
			n = snprintf(buf + used, len - used, " burst %lld",
			    (long long)p->lim.burst);
			if (n < 0)
				break;
			used += (size_t)n;
		}
	}
}

/*
 * Which [store] commit a SQLite store has, and why when auto chose each:
 * "commit = behind (auto): decided in PATH-table, written to the database
 * every 1000 ms", "commit = each (auto: [policy s] is a sliding_log,
 * whose log lives in the database): one SQLite transaction per decision".
 * check adds what a CGI process does with auto. NULL for Redis.
 */
static const char *
describe_commit(const struct rlg_config *cfg, bool check, char *buf,
    size_t size)
{
	const struct rlg_sqlite_config *sq = &cfg->store.sqlite;
	char why[256] = "", table[4200];

	if (!rlg_store_can(&cfg->store, RLG_STORE_CAN_COMMIT))
		return NULL;
	if (sq->commit_auto && sq->commit == RLG_COMMIT_EACH)
		(void)rlg_config_why_each(cfg, why, sizeof why);
	if (sq->commit == RLG_COMMIT_BEHIND)
		snprintf(buf, size, "commit = behind%s: decided in %s, written"
		    " to the database every %lld ms%s",
		    sq->commit_auto ? " (auto)" : "",
		    rlg_store_table_path(sq->path, table, sizeof table),
		    (long long)sq->flush_ms, sq->commit_auto && check ?
		    "; each when run as CGI, one process per request" : "");
	else
		snprintf(buf, size, "commit = each%s%s%s: one SQLite "
		    "transaction per decision", why[0] != '\0' ? " (auto: " :
		    "", why, why[0] != '\0' ? ")" : "");
	return buf;
}

/*
 * Points stderr, where rlg_log writes, at the end of the file at path,
 * created with mode 0640 (less if the umask says so). A symbolic link is
 * refused: whoever can write the log's directory could otherwise point it
 * at any file rlgate may write (its database) and have log lines appended
 * there. A log that others may read or write gets a warning in warning
 * (empty otherwise), for the caller to log once it is open.
 */
static int
open_log(const char *path, char *warning, size_t size)
{
	struct stat st;
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
	    O_NOFOLLOW, 0640);

	warning[0] = '\0';
	if (fd < 0 && errno == ELOOP) {
		fprintf(stderr, "rlgate: --log %s: is a symbolic link, which"
		    " rlgate does not follow: give the path of the file"
		    " itself\n", path);
		return -1;
	}
	if (fd < 0) {
		fprintf(stderr, "rlgate: --log %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) == 0)
		log_mode_warning(path, st.st_mode, warning, size);
	if (fd != STDERR_FILENO) {
		if (dup2(fd, STDERR_FILENO) < 0) {
			fprintf(stderr, "rlgate: --log %s: %s\n", path,
			    strerror(errno));
			close(fd);
			return -1;
		}
		close(fd);
	}
	return 0;
}

/*
 * A log others may read (client addresses, key hashes) or write (forged
 * lines): "warning: ..." with the mode and the chmod into buf; else "".
 * The group may read it (0640: adm reads logs).
 */
static void
log_mode_warning(const char *path, mode_t mode, char *buf, size_t size)
{
	unsigned bits = mode & (S_IWGRP | S_IXGRP | S_IRWXO);
	char words[128], chmod_arg[16];

	buf[0] = '\0';
	if (bits == 0)
		return;
	rlg_mode_describe(bits, words, sizeof words, chmod_arg,
	    sizeof chmod_arg);
	snprintf(buf, size, "warning: the log %s has mode %04o (%s): users"
	    " other than rlgate's can %s it (rlgate creates it with mode"
	    " 0640): chmod %s %s", path, (unsigned)(mode & 07777), words,
	    (bits & (S_IWGRP | S_IWOTH)) != 0 ? "write into" : "read",
	    chmod_arg, path);
}

/* --check-config: what starting with --log path would warn or refuse. */
static void
check_log_path(const char *path)
{
	char warning[1024];
	struct stat st;

	if (lstat(path, &st) != 0)
		return;
	if (S_ISLNK(st.st_mode)) {
		printf("warning: the log %s is a symbolic link: rlgate will"
		    " refuse to open it (exit 64); give the path of the file"
		    " itself\n", path);
		return;
	}
	log_mode_warning(path, st.st_mode, warning, sizeof warning);
	if (warning[0] != '\0')
		printf("%s\n", warning);
}

/* A warning at start: one line in the log. */
static void
warn_log(void *ctx, const char *line)
{
	(void)ctx;
	rlg_log("%s", line);
}

/* A warning of --check-config: a line of its output. */
static void
warn_stdout(void *ctx, const char *line)
{
	(void)ctx;
	printf("%s\n", line);
}

/*
 * The options into *o. -1 to go on; else the exit code to return at once
 * (0 after --version or --help, RLG_EXIT_USAGE for a bad command line,
 * which is said on stderr).
 */
static int
parse_options(int argc, char **argv, struct options *o)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "threads", required_argument, NULL, 't' },
		{ "processes", required_argument, NULL, 'P' },
		{ "log", required_argument, NULL, 'l' },
		{ "check-config", no_argument, NULL, 'C' },
		{ "strict", no_argument, NULL, 's' },
		{ "reset", required_argument, NULL, 'r' },
		{ "policy", required_argument, NULL, 'p' },
		{ "hash-key", no_argument, NULL, 'k' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	/* The options that keep their argument, and those that are flags. */
	const char **const keep[128] = { ['c'] = &o->config, ['l'] = &o->log,
		['r'] = &o->reset, ['p'] = &o->policy };
	int *const flag[128] = { ['C'] = &o->check_only, ['s'] = &o->strict,
		['k'] = &o->hash_key };
	int c;

	while ((c = getopt_long(argc, argv, "c:t:P:l:Csr:p:kVh", opts, NULL)) !=
	    -1) {
		if (c > 0 && c < 128 && keep[c] != NULL) {
			*keep[c] = optarg;
			continue;
		}
		if (c > 0 && c < 128 && flag[c] != NULL) {
			*flag[c] = 1;
			continue;
		}
		switch (c) {
		case 't':
			if (parse_count("threads", optarg, THREADS_MAX,
			    &o->threads) != 0)
				return RLG_EXIT_USAGE;
			break;
		case 'P':
			if (parse_count("processes", optarg,
			    RLG_SUPERVISOR_PROCESSES_MAX, &o->processes) != 0)
				return RLG_EXIT_USAGE;
			break;
		case 'V':
			printf("rlgate %s\n", PACKAGE_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return RLG_EXIT_USAGE;
		}
	}
	return check_options(argc, argv, o);
}

/*
 * What getopt left, and the options that go together: -1 when the command
 * line holds, else RLG_EXIT_USAGE (said on stderr).
 */
static int
check_options(int argc, char **argv, const struct options *o)
{
	if (optind < argc) {
		fprintf(stderr, "rlgate: unexpected argument \"%s\"\n",
		    argv[optind]);
		usage(stderr);
		return RLG_EXIT_USAGE;
	}
	if (o->strict && !o->check_only) {
		fprintf(stderr, "rlgate: --strict goes with --check-config\n");
		return RLG_EXIT_USAGE;
	}
	if (o->policy != NULL && o->reset == NULL) {
		fprintf(stderr, "rlgate: --policy goes with --reset\n");
		return RLG_EXIT_USAGE;
	}
	if (o->reset != NULL && (o->reset[0] == '\0' ||
	    strlen(o->reset) > RLG_CLIENT_KEY_MAX)) {
		fprintf(stderr, "rlgate: --reset: a client key is 1 to %d"
		    " bytes\n", RLG_CLIENT_KEY_MAX);
		return RLG_EXIT_USAGE;
	}
	return -1;
}

/*
 * --check-config on a config that loaded: the warnings about files others
 * may read or write (the store's, the log's), which commit a SQLite store
 * has, whether a Redis store answers (check_redis), then "ok". Returns 0:
 * warnings are no problems; with strict, a Redis store it cannot reach
 * is one (RLG_EXIT_UNAVAILABLE).
 */
static int
check_config(const struct rlg_config *cfg, const char *path,
    const char *log_path, bool strict)
{
	char commit[4600];

	if (check_store_dir(cfg, path) != 0)
		return RLG_EXIT_CONFIG;
	if (check_redis(cfg, path, strict) != 0)
		return RLG_EXIT_UNAVAILABLE;
	(void)rlg_store_check_files(&cfg->store, warn_stdout, NULL);
	if (log_path != NULL)
		check_log_path(log_path);
	if (describe_commit(cfg, true, commit, sizeof commit) != NULL)
		printf("%s\n", commit);
	printf("%s: configuration ok\n",
	    path != NULL ? path : "built-in defaults");
	return 0;
}

/*
 * With a Redis store, --check-config connects as a worker would (AUTH,
 * SELECT, SCRIPT LOAD: store_redis_io.c) and PINGs, within [store]
 * connect_timeout_ms and timeout_ms, and says so on standard output:
 * "redis: reachable at HOST:PORT, script loaded" (a cluster: at its
 * first seed; Sentinel: "redis: sentinel H:P says master NAME is at H:P:
 * reachable, script loaded"). When it cannot, one line on standard error says why
 * ("redis: not reachable at HOST:PORT: why"): a warning, as rlgate would
 * start and answer as on_error says until Redis is back, unless strict,
 * when it is the problem that fails the check: -1 then, else 0.
 */
static int
check_redis(const struct rlg_config *cfg, const char *path, bool strict)
{
	const struct rlg_redis_config *rc = &cfg->store.redis;
	const char *src = path != NULL ? path : "built-in defaults";
	struct rlg_store *s = NULL;
	char where[RLG_CONFIG_LINE_MAX + 16];
	int ok;

	if (!rlg_store_can(&cfg->store, RLG_STORE_CAN_CONNECT))
		return 0;
	if (rc->master != NULL)
		snprintf(where, sizeof where, "master %s (via sentinels)",
		    rc->master);
	else if (rc->socket != NULL)
		snprintf(where, sizeof where, "unix:%s", rc->socket);
	else
		snprintf(where, sizeof where, strchr(rc->host != NULL ?
		    rc->host : "", ':') != NULL ? "[%s]:%d" : "%s:%d",
		    rc->host != NULL ? rc->host : "-", rc->port);
	/* its "store lost" line would say it twice */
	rlg_log_set_store_quiet(true);
	ok = rlg_store_open(&cfg->store, &s) == RLG_OK &&
	    rlg_store_probe(s, rlg_now_ms()) == RLG_OK;
	if (ok && rc->master != NULL)
		printf("redis: %s: reachable, script loaded\n",
		    rlg_store_errmsg(s));
	else if (ok)
		printf("%s: reachable at %s%s, script loaded\n", rc->cluster ?
		    "redis_cluster" : "redis", where, rc->cluster ?
		    " (the first seed)" : "");
	else
		fprintf(stderr, "%s: %s%s: not reachable at %s: %s\n", src,
		    strict ? "" : "warning: ", rc->cluster ? "redis_cluster" :
		    "redis", where, rlg_store_errmsg(s));
	rlg_store_close(s);
	rlg_log_set_store_quiet(false);
	if (ok || !strict)
		return 0;
	fprintf(stderr, "%s: 1 problem (--strict: the store must answer), not "
	    "starting\n", src);
	return -1;
}

/*
 * The SQLite database's directory must exist and be writable by the user
 * who checks (run --check-config as rlgate's user): else an
 * out-of-the-box install would answer every request 503 (on_error) while
 * the file itself looked fine. Prints the problem on stderr as the
 * loader's are (rlg_config_check_dir: file:line), and returns -1; 0 when
 * it can work.
 */
static int
check_store_dir(const struct rlg_config *cfg, const char *path)
{
	char msg[2 * RLG_CONFIG_LINE_MAX + 256];

	if (rlg_config_check_dir(cfg, msg, sizeof msg) == 0)
		return 0;
	fprintf(stderr, "%s\n%s: 1 problem, not starting\n", msg,
	    path != NULL ? path : "built-in defaults");
	return -1;
}

/*
 * A FastCGI worker process: the host's scoreboard, then the threads until
 * a stop (server.c). The supervisor's workers, or the one process.
 */
static int
serve_worker(void *arg)
{
	const struct worker_ctx *w = arg;
	char metrics[4200];
	int rc;

	(void)rlg_metrics_open(rlg_metrics_path(w->cfg, metrics,
	    sizeof metrics), w->cfg);
	rc = rlg_server_run_fastcgi(w->cfg, w->path, w->threads);
	rlg_metrics_close();
	return rc;
}

/*
 * systemd's socket activation passes the listening socket as fd 3
 * (LISTEN_FDS=1, LISTEN_PID this process); libfcgi listens on fd 0: move
 * it there, as spawn-fcgi leaves it. The variables go, so that the
 * supervisor's workers do not take them for theirs.
 */
static void
adopt_systemd_socket(void)
{
	const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");

	if (pid == NULL || fds == NULL || strtol(pid, NULL, 10) != getpid())
		return;
	if (strcmp(fds, "1") != 0) {
		rlg_log("LISTEN_FDS=%s: rlgate listens on one socket; the"
		    " first is used", fds);
	}
	if (dup2(3, 0) == 0)
		close(3);
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
}

/*
 * --reset: deletes client's state (under policy, or every policy) in the
 * store, the decision table's included, and says how many states went.
 * With commit = each, a running worker that remembered a rejection of
 * the client (the rejection cache) answers it until that rejection's
 * retry time.
 */
static int
reset_client(const struct rlg_config *cfg, const char *client,
    const char *policy)
{
	struct rlg_store *s = NULL;
	int64_t deleted = 0;
	size_t i;
	int rc;

	if (policy != NULL) {
		for (i = 0; i < cfg->npolicies; i++)
			if (strcmp(cfg->policies[i].name, policy) == 0 ||
			    (cfg->policies[i].new_keys_policy != NULL &&
			    strcmp(cfg->policies[i].new_keys_policy->name,
			    policy) == 0))
				break;
		if (i == cfg->npolicies) {
			fprintf(stderr, "rlgate: --policy %s: the config has"
			    " no such policy\n", policy);
			return RLG_EXIT_USAGE;
		}
	}
	rc = rlg_store_open(&cfg->store, &s);
	if (rc == RLG_OK)
		rc = rlg_store_reset(s, client, policy, &deleted);
	if (rc != RLG_OK) {
		fprintf(stderr, "rlgate: --reset %s: %s\n", client,
		    rlg_store_errmsg(s));
		rlg_store_close(s);
		return RLG_EXIT_UNAVAILABLE;
	}
	printf("rlgate: reset %s: %lld state%s deleted\n", client,
	    (long long)deleted, deleted == 1 ? "" : "s");
	rlg_store_close(s);
	return 0;
}

/*
 * Serves with cfg (from path, NULL: the built-in defaults): FastCGI on
 * the socket at fd 0, after one line saying what it serves, the warnings
 * about files (log_warning: the log's, or "") and, at level info, which
 * commit applies; else one CGI request, with each for an auto commit.
 * Returns the exit code.
 */
static int
serve(struct rlg_config *cfg, const char *path, int threads, int processes,
    const char *log_warning)
{
	char policies[1024], store[512], commit[4600], metrics[4200];
	char dirmsg[2 * RLG_CONFIG_LINE_MAX + 256];
	struct rlg_sqlite_config *sq = &cfg->store.sqlite;
	struct worker_ctx ctx = { cfg, path, threads };
	char procs[64] = "";
	int rc;

	if (rlg_server_is_fastcgi()) {
		describe_policies(cfg, policies, sizeof policies);
		if (processes > 0)
			snprintf(procs, sizeof procs, " in %d process%s",
			    processes, processes == 1 ? "" : "es");
		rlg_log("rlgate %s serving FastCGI with %d thread%s%s: config"
		    " %s, store %s (on_error = %s), headers %s, %zu route%s, "
		    "policies: %s",
		    PACKAGE_VERSION, threads, threads == 1 ? "" : "s", procs,
		    path != NULL ? path : "built-in defaults",
		    rlg_store_describe(&cfg->store, store, sizeof store),
		    rlg_on_error_name(cfg->store.on_error),
		    rlg_style_name(cfg->style), cfg->nroutes,
		    cfg->nroutes == 1 ? "" : "s", policies);
		if (log_warning[0] != '\0')
			rlg_log("%s", log_warning);
		/* not fatal: the store opens once the directory is there */
		if (rlg_config_check_dir(cfg, dirmsg, sizeof dirmsg) != 0)
			rlg_log("warning: %s (until then every request is "
			    "answered as on_error says)", dirmsg);
		(void)rlg_store_check_files(&cfg->store, warn_log, NULL);
		if (cfg->log_level >= RLG_LOG_INFO &&
		    describe_commit(cfg, false, commit, sizeof commit) != NULL)
			rlg_log("%s", commit);
		if (processes > 0)
			return rlg_supervise(processes, serve_worker, &ctx);
		return serve_worker(&ctx);
	}
	if (processes > 0) {
		fprintf(stderr, "rlgate: --processes: no FastCGI socket on"
		    " standard input to share with the workers (start rlgate"
		    " under spawn-fcgi -n, or systemd's socket activation)\n");
		return RLG_EXIT_USAGE;
	}
	if (getenv("GATEWAY_INTERFACE") != NULL) {
		/*
		 * One process per request: the table would be mapped, and a
		 * flusher started and joined, for one decision. An explicit
		 * behind is the operator's (every process of the host then
		 * decides in the one table).
		 */
		if (sq->commit_auto && sq->commit == RLG_COMMIT_BEHIND) {
			sq->commit = RLG_COMMIT_EACH;
			sq->table_entries = 0;
		}
		(void)rlg_metrics_open(rlg_metrics_path(cfg, metrics,
		    sizeof metrics), cfg);
		rc = rlg_server_run_cgi(cfg);
		rlg_metrics_close();
		return rc;
	}
	fprintf(stderr, "rlgate: no FastCGI socket on standard input "
	    "and GATEWAY_INTERFACE is not set: start rlgate under "
	    "spawn-fcgi or a web server (see rlgate --help)\n");
	return RLG_EXIT_USAGE;
}

/*
 * --hash-key: each line of in (without its end of line) is an API key as
 * the client sends it; out gets its client key, k:HASH, a line each, as
 * the store, the logs and [tier] clients write it. Read from stdin, not
 * the command line, so that no key shows in ps or a shell's history. 0,
 * or RLG_EXIT_USAGE at an empty line (nothing after it is read).
 */
static int
hash_keys(const struct rlg_config *cfg, FILE *in, FILE *out)
{
	char hash[RLG_KEY_HASH_TEXT];
	char *line = NULL;
	size_t cap = 0, lineno = 0;
	ssize_t n;
	int rc = 0;

	if (cfg->client.key_secret == NULL)
		fprintf(stderr, "rlgate: note: [client] key_secret is not set:"
		    " the hashes are unkeyed, as rlgate makes them with this"
		    " configuration\n");
	while ((n = getline(&line, &cap, in)) > 0) {
		lineno++;
		if (line[n - 1] == '\n')
			line[--n] = '\0';
		if (n > 0 && line[n - 1] == '\r')
			line[--n] = '\0';
		if (n == 0 || strlen(line) != (size_t)n) {
			fprintf(stderr, "rlgate: --hash-key: line %zu is %s\n",
			    lineno, n == 0 ? "empty" : "not text (a NUL byte)");
			rc = RLG_EXIT_USAGE;
			break;
		}
		rlg_request_key_hash(line, &cfg->client, hash);
		fprintf(out, "%s\n", hash);
	}
	if (line != NULL)
		explicit_bzero(line, cap);     /* it held API keys */
	free(line);
	return rc;
}

int
main(int argc, char **argv)
{
	struct options o = { .threads = THREADS_DEFAULT };
	const char *path;
	struct rlg_config *cfg;
	char log_warning[1024] = "";
	int rc, problems;

	if ((rc = parse_options(argc, argv, &o)) >= 0)
		return rc;
	adopt_systemd_socket();
	if (o.log != NULL && !o.check_only) {
		if (open_log(o.log, log_warning, sizeof log_warning) != 0)
			return RLG_EXIT_USAGE;
		rlg_log_set_path(o.log);
	}

	path = rlg_config_pick(o.config);
	if (path == NULL) {
		cfg = rlg_config_defaults();
	} else if ((problems = rlg_config_load(path, stderr, &cfg)) != 0) {
		fprintf(stderr, "rlgate: %s: %d problem%s, not starting\n",
		    path, problems, problems == 1 ? "" : "s");
		return RLG_EXIT_CONFIG;
	}
	rlg_log_set_json(cfg->log_format == RLG_LOG_JSON);
	if (cfg->nroutes > 0 && cfg->ndefault == 0)
		fprintf(stderr, "rlgate: note: %s has routes but no "
		    "[policy default]: requests that match no route are not "
		    "limited\n", path != NULL ? path : "the configuration");
	if (o.hash_key)
		rc = hash_keys(cfg, stdin, stdout);
	else if (o.check_only)
		rc = check_config(cfg, path, o.log, o.strict != 0);
	else if (o.reset != NULL)
		rc = reset_client(cfg, o.reset, o.policy);
	else
		rc = serve(cfg, path, o.threads, o.processes, log_warning);
	rlg_config_free(cfg);
	return rc;
}
