/*
 * loadgen.c: drives an HTTP endpoint from many client addresses at once and
 * records, per client and per fixed window, how many requests got which
 * answer, so a test can check rate limiting exactly under load.
 *
 * Client i sends from its own source address (127.1.X.Y: the whole of
 * 127/8 is local on Linux, so each client is a distinct REMOTE_ADDR behind
 * lighttpd), over keep-alive connections, one request at a time. Up to
 * --concurrency clients are in flight together (libcurl's multi interface).
 *
 * Windows are the epoch-aligned windows rlgate's fixed_window uses
 * (floor(now_ms / window_ms)). A request is sent only when at least
 * --guard-ms remain in the current window, and loadgen waits --guard-ms
 * into a new window before sending again; each answer is filed under the
 * window in which the request was sent. An answer that arrives in a later
 * window than its request was sent in (a stall of more than --guard-ms)
 * is filed by its RateLimit-Reset header (draft03: seconds until the
 * window it was counted in ends): counted just before the boundary, it
 * says at most the stall; counted after, nearly a whole window. A reset
 * of at most half a window files it under the window it was sent in,
 * else under the next. The summary counts these "late" answers, and as
 * "ambiguous" the late ones without the header (a test wants zero).
 *
 * In each window, client i plans to send min + (hash(i, window) %
 * (max - min + 1)) requests (--per-client MIN:MAX); each window starts
 * with the client after the last one the window before reached, so a
 * window that ends early starves nobody. loadgen stops once it has sent
 * --total requests over at least --min-windows windows and every client
 * has sent (finishing the window it is in), or after --max-seconds (exit
 * status 3). With --seconds S it runs for S seconds instead, whatever it
 * has sent: it finishes the window in which S seconds have passed and
 * stops, exit status 0 if every client has sent by then (a sustained-load
 * test).
 *
 * Output: --out FILE gets one line per (window, client) that sent anything:
 *     WINDOW_START_MS ADDRESS SENT N200 N429 NOTHER
 * NOTHER counts any other status and transport errors. stdout gets a
 * summary: requests, seconds, requests/s, statuses, p50/p99 latency,
 * ambiguous answers. Exit status 0, or 2 for bad options, 3 when the
 * targets were not reached in time.
 */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

struct cell {                   /* one (window, client) */
	uint32_t sent, n200, n429, nother;
};

struct lane {                   /* one in-flight slot */
	CURL *easy;
	long client;            /* -1: idle */
	uint32_t left;          /* requests still to send for client */
	int64_t sent_us;        /* when the request in flight was sent */
	int64_t window;         /* its window index */
	long reset_s;           /* its answer's RateLimit-Reset; -1: none */
};

static struct {
	const char *url, *out;
	long clients, concurrency;
	int64_t window_ms, guard_ms;
	uint32_t per_min, per_max;
	uint64_t total;
	long min_windows, max_seconds;
	long seconds;                   /* > 0: run this long (--seconds) */
	long timeout_ms;
	bool verbose;
} opt = {
	.clients = 1000, .concurrency = 32, .window_ms = 10000, .guard_ms = 500,
	.per_min = 10, .per_max = 90, .total = 100000, .min_windows = 2,
	.max_seconds = 600, .timeout_ms = 20000,
};

static int64_t first_window;    /* index of the first window used */
static long nwindows;           /* windows allocated in cells */
static struct cell *cells;      /* [nwindows][clients] */
static uint32_t *lat_us;        /* one latency per answer */
static uint64_t nlat, cap_lat;
static uint64_t nsent, ndone, n200, n429, nother, late, ambiguous;
static long rotate;             /* the client the next window starts with */
static long nseen;              /* clients that have sent */
static bool *seen;              /* [clients] */

static int64_t
now_us(void)
{
	return rlg_test_clock_ns(CLOCK_REALTIME) / 1000;
}

static void
die(const char *msg)
{
	fprintf(stderr, "loadgen: %s\n", msg);
	exit(2);
}

static void
client_addr(long i, char *buf, size_t size)
{
	snprintf(buf, size, "127.1.%ld.%ld", i / 250, i % 250 + 1);
}

static uint32_t
planned(long client, int64_t window)
{
	uint64_t h = (uint64_t)client * 0x9E3779B97F4A7C15u ^
	    (uint64_t)window * 0xC2B2AE3D27D4EB4Fu;

	h ^= h >> 29;
	h *= 0xBF58476D1CE4E5B9u;
	h ^= h >> 32;
	return opt.per_min + (uint32_t)(h % (opt.per_max - opt.per_min + 1));
}

static struct cell *
cell_at(int64_t window, long client)
{
	int64_t w = window - first_window;

	if (w < 0 || w >= nwindows)
		return NULL;
	return &cells[w * opt.clients + client];
}

static size_t
discard(char *p, size_t size, size_t n, void *ud)
{
	(void)p;
	(void)ud;
	return size * n;
}

/* Keeps the RateLimit-Reset of the answer (header names are any case). */
static size_t
on_header(char *p, size_t size, size_t n, void *ud)
{
	struct lane *l = ud;
	static const char name[] = "ratelimit-reset:";
	size_t len = size * n;

	if (len > sizeof(name) - 1 &&
	    strncasecmp(p, name, sizeof(name) - 1) == 0)
		l->reset_s = strtol(p + sizeof(name) - 1, NULL, 10);
	return len;
}

static void
lane_send(CURLM *multi, struct lane *l, int64_t window)
{
	char addr[32], iface[40];

	client_addr(l->client, addr, sizeof(addr));
	snprintf(iface, sizeof(iface), "host!%s", addr);
	curl_easy_setopt(l->easy, CURLOPT_INTERFACE, iface);
	l->window = window;
	l->reset_s = -1;
	l->sent_us = now_us();
	nsent++;
	curl_multi_add_handle(multi, l->easy);
}

static void
record(struct lane *l, CURLcode rc)
{
	int64_t done_us = now_us(), window = l->window;
	long status = 0;
	struct cell *c;

	if (rc == CURLE_OK)
		curl_easy_getinfo(l->easy, CURLINFO_RESPONSE_CODE, &status);
	if (done_us / 1000 / opt.window_ms != window) {
		late++;
		if (l->reset_s < 0)
			ambiguous++;
		else if (l->reset_s * 1000 > opt.window_ms / 2)
			window++;
	}
	c = cell_at(window, l->client);
	if (nlat == cap_lat) {
		cap_lat = cap_lat ? cap_lat * 2 : 65536;
		lat_us = realloc(lat_us, cap_lat * sizeof(*lat_us));
		if (lat_us == NULL)
			die("out of memory");
	}
	lat_us[nlat++] = (uint32_t)(done_us - l->sent_us);
	ndone++;
	if (c != NULL)
		c->sent++;
	if (status == 200) {
		n200++;
		if (c != NULL)
			c->n200++;
	} else if (status == 429) {
		n429++;
		if (c != NULL)
			c->n429++;
	} else {
		nother++;
		if (c != NULL)
			c->nother++;
		if (opt.verbose)
			fprintf(stderr, "loadgen: client %ld: %s (status %ld)\n",
			    l->client, rc == CURLE_OK ? "answer" :
			    curl_easy_strerror(rc), status);
	}
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

static void
sleep_until_us(int64_t t)
{
	int64_t d;

	while ((d = t - now_us()) > 0) {
		struct timespec ts = { d / 1000000, (d % 1000000) * 1000 };

		nanosleep(&ts, NULL);
	}
}

/*
 * Runs one window: every client in rotated order sends its plan, as long as
 * guard_ms remain. Returns, when nothing is in flight, the number of
 * requests sent.
 */
static uint64_t
run_window(CURLM *multi, struct lane *lanes, int64_t window)
{
	int64_t stop_us = ((window + 1) * opt.window_ms - opt.guard_ms) * 1000;
	long next = 0, start = rotate;
	long inflight = 0, i;
	uint64_t sent0 = nsent;

	for (;;) {
		bool open = now_us() < stop_us;
		CURLMsg *m;
		int running, left;

		for (i = 0; open && i < opt.concurrency; i++) {
			struct lane *l = &lanes[i];

			if (l->client >= 0)
				continue;
			if (next >= opt.clients)
				break;
			l->client = (start + next++) % opt.clients;
			rotate = (l->client + 1) % opt.clients;
			if (!seen[l->client]) {
				seen[l->client] = true;
				nseen++;
			}
			l->left = planned(l->client, window);
			l->left--;
			lane_send(multi, l, window);
			inflight++;
		}
		if (inflight == 0)
			return nsent - sent0;
		curl_multi_perform(multi, &running);
		while ((m = curl_multi_info_read(multi, &left)) != NULL) {
			struct lane *l = NULL;

			if (m->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE,
			    (char **)&l);
			record(l, m->data.result);
			curl_multi_remove_handle(multi, l->easy);
			if (l->left > 0 && now_us() < stop_us) {
				l->left--;
				lane_send(multi, l, window);
			} else {
				l->client = -1;
				inflight--;
			}
		}
		if (inflight > 0)
			curl_multi_poll(multi, NULL, 0, 100, NULL);
	}
}

static void
usage(void)
{
	fprintf(stderr,
	    "usage: loadgen --url URL --out FILE [--clients N] [--concurrency C]\n"
	    "               [--window-ms W] [--guard-ms G] [--per-client MIN:MAX]\n"
	    "               [--total N] [--min-windows K] [--max-seconds S]\n"
	    "               [--seconds S] [--timeout-ms T] [--verbose]\n");
	exit(2);
}

static void
parse_options(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "url", required_argument, NULL, 'u' },
		{ "out", required_argument, NULL, 'o' },
		{ "clients", required_argument, NULL, 'c' },
		{ "concurrency", required_argument, NULL, 'C' },
		{ "window-ms", required_argument, NULL, 'w' },
		{ "guard-ms", required_argument, NULL, 'g' },
		{ "per-client", required_argument, NULL, 'p' },
		{ "total", required_argument, NULL, 't' },
		{ "min-windows", required_argument, NULL, 'k' },
		{ "max-seconds", required_argument, NULL, 's' },
		{ "seconds", required_argument, NULL, 'S' },
		{ "timeout-ms", required_argument, NULL, 'T' },
		{ "verbose", no_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;
	unsigned a, b;

	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'u': opt.url = optarg; break;
		case 'o': opt.out = optarg; break;
		case 'c': opt.clients = atol(optarg); break;
		case 'C': opt.concurrency = atol(optarg); break;
		case 'w': opt.window_ms = atoll(optarg); break;
		case 'g': opt.guard_ms = atoll(optarg); break;
		case 'p':
			if (sscanf(optarg, "%u:%u", &a, &b) != 2 || a < 1 || b < a)
				die("--per-client wants MIN:MAX with 1 <= MIN <= MAX");
			opt.per_min = a;
			opt.per_max = b;
			break;
		case 't': opt.total = strtoull(optarg, NULL, 10); break;
		case 'k': opt.min_windows = atol(optarg); break;
		case 's': opt.max_seconds = atol(optarg); break;
		case 'S': opt.seconds = atol(optarg); break;
		case 'T': opt.timeout_ms = atol(optarg); break;
		case 'v': opt.verbose = true; break;
		default: usage();
		}
	}
	if (opt.url == NULL || opt.out == NULL || optind != argc)
		usage();
	if (opt.clients < 1 || opt.clients > 250 * 256)
		die("--clients must be 1..64000");
	if (opt.concurrency < 1 || opt.concurrency > 1024)
		die("--concurrency must be 1..1024");
	if (opt.window_ms < 100 || opt.guard_ms < 0 ||
	    2 * opt.guard_ms >= opt.window_ms)
		die("--window-ms must be >= 100 and more than twice --guard-ms");
	if (opt.max_seconds < 1 || opt.min_windows < 1 || opt.seconds < 0)
		die("--max-seconds and --min-windows must be >= 1");
	if (opt.seconds > 0 && opt.max_seconds <= opt.seconds)
		opt.max_seconds = opt.seconds + opt.window_ms / 1000 + 10;
}

int
main(int argc, char **argv)
{
	struct lane *lanes;
	CURLM *multi;
	FILE *out;
	int64_t t0, t1, window, deadline_us;
	long i, windows = 0, w, c;
	bool reached;
	char addr[32];
	double secs;

	parse_options(argc, argv);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
		die("curl_global_init failed");
	multi = curl_multi_init();
	curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, opt.concurrency * 2);
	lanes = calloc((size_t)opt.concurrency, sizeof(*lanes));
	if (lanes == NULL)
		die("out of memory");
	for (i = 0; i < opt.concurrency; i++) {
		CURL *e = curl_easy_init();

		if (e == NULL)
			die("curl_easy_init failed");
		curl_easy_setopt(e, CURLOPT_URL, opt.url);
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
		curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, opt.timeout_ms);
		curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)&lanes[i]);
		curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
		curl_easy_setopt(e, CURLOPT_HEADERDATA, &lanes[i]);
		lanes[i].easy = e;
		lanes[i].client = -1;
	}

	t0 = now_us();
	deadline_us = t0 + (int64_t)opt.max_seconds * 1000000;
	nwindows = opt.max_seconds * 1000 / opt.window_ms + 3;
	cells = calloc((size_t)nwindows * (size_t)opt.clients, sizeof(*cells));
	seen = calloc((size_t)opt.clients, sizeof(*seen));
	if (cells == NULL || seen == NULL)
		die("out of memory");
	/* the current window (guard_ms into it at the earliest) */
	window = t0 / 1000 / opt.window_ms;
	first_window = window;
	for (;;) {
		sleep_until_us((window * opt.window_ms + opt.guard_ms) * 1000);
		if (now_us() >= deadline_us)
			break;
		if (run_window(multi, lanes, window) > 0)
			windows++;
		if (opt.seconds > 0 ? now_us() - t0 >=
		    (int64_t)opt.seconds * 1000000 :
		    nsent >= opt.total && windows >= opt.min_windows &&
		    nseen == opt.clients)
			break;
		window = now_us() / 1000 / opt.window_ms + 1;
		if (window - first_window >= nwindows)
			break;
	}
	t1 = now_us();
	reached = opt.seconds > 0 ? now_us() - t0 >=
	    (int64_t)opt.seconds * 1000000 && nseen == opt.clients :
	    nsent >= opt.total && windows >= opt.min_windows &&
	    nseen == opt.clients;

	out = fopen(opt.out, "w");
	if (out == NULL) {
		fprintf(stderr, "loadgen: %s: %s\n", opt.out, strerror(errno));
		return 2;
	}
	for (w = 0; w < nwindows; w++) {
		for (c = 0; c < opt.clients; c++) {
			const struct cell *x = &cells[w * opt.clients + c];

			if (x->sent == 0)
				continue;
			client_addr(c, addr, sizeof(addr));
			fprintf(out, "%" PRId64 " %s %u %u %u %u\n",
			    (first_window + w) * opt.window_ms, addr, x->sent,
			    x->n200, x->n429, x->nother);
		}
	}
	if (fclose(out) != 0)
		die("cannot write --out");

	qsort(lat_us, nlat, sizeof(*lat_us), cmp_u32);
	secs = (double)(t1 - t0) / 1e6;
	printf("requests %" PRIu64 "\nwindows %ld\nclients %ld\nseconds %.1f\n"
	    "requests_per_s %.0f\nstatus_200 %" PRIu64 "\nstatus_429 %" PRIu64
	    "\nstatus_other %" PRIu64 "\nlate %" PRIu64 "\nambiguous %"
	    PRIu64 "\n"
	    "p50_ms %.2f\np99_ms %.2f\nmax_ms %.2f\n",
	    ndone, windows, opt.clients, secs,
	    secs > 0 ? (double)ndone / secs : 0.0, n200, n429, nother,
	    late, ambiguous,
	    nlat ? lat_us[nlat / 2] / 1000.0 : 0.0,
	    nlat ? lat_us[nlat * 99 / 100] / 1000.0 : 0.0,
	    nlat ? lat_us[nlat - 1] / 1000.0 : 0.0);

	for (i = 0; i < opt.concurrency; i++)
		curl_easy_cleanup(lanes[i].easy);
	curl_multi_cleanup(multi);
	curl_global_cleanup();
	free(lanes);
	free(cells);
	free(seen);
	free(lat_us);
	return reached ? 0 : 3;
}
