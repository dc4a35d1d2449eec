/*
 * metrics.c: the host's scoreboard of counters (metrics.h).
 *
 * The file: a header (magic, layout size, when it was made, the policy
 * names it counts), then RLG_METRICS_SLOTS slots of 64-byte aligned
 * counters. It is made whole under a temporary name (its blocks taken
 * with posix_fallocate, so a full disk refuses it at once instead of
 * killing a writer with SIGBUS later) and linked into place, so no
 * process ever maps half a file; two processes making it at once agree
 * on whichever link came first. Names are added under an flock of the
 * file; counts are written by each slot's thread alone with relaxed
 * atomic stores (plain moves on x86-64), read by the sums with relaxed
 * loads: a sum may miss an increment made while it reads, never tear one.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"
#include "util.h"

/* The layout's version: a slot's counters changed (unguarded, 003;
 * bad_tokens, 004; held and park_full, 005). */
#define MX_MAGIC "rlgmx005"

_Static_assert(RLG_METRICS_TOKENS == RLG_TOKEN_COUNT - RLG_TOKEN_INVALID,
    "rlgate_bad_tokens_total counts every reason from RLG_TOKEN_INVALID on");
#define MX_NAME_MAX (RLG_POLICY_NAME_MAX + sizeof RLG_NEW_KEYS_SUFFIX)
/* Slots of the process's own memory when the file cannot be used. */
#define MX_PRIVATE_SLOTS 64

struct mx_head {
	char magic[8];
	uint64_t size;            /* the whole file: the layout's check */
	int64_t start_s;
	uint32_t nslots;
	uint32_t npolicies;       /* names in use, only grows */
	char names[RLG_METRICS_POLICIES][MX_NAME_MAX];
	/* The write-behind's flushes, by whichever process made them. */
	uint64_t flush_failures;
	int64_t flush_ok_ms;      /* the last good one's end; 0: none */
} __attribute__((aligned(64)));

/* A config's map, in the process's list of them. */
struct mx_mapnode {
	struct rlg_metrics_map m;
	struct mx_mapnode *next;
};

/* The process's scoreboard. */
static struct {
	struct mx_head *head;
	struct rlg_metrics_slot *slots;
	/*
	 * The slots there are, fixed when mapped: the file is written by
	 * every process, so its own count is never a loop bound.
	 */
	uint32_t nslots;
	size_t map_size;          /* 0: private memory */
	int fd;                   /* the file, for its flock; -1: private */
	char path[4200];
	pthread_mutex_t mu;       /* the maps, and names added */
	struct mx_mapnode *maps;
	uint64_t serial;
	bool full_said;
	bool names_said;
} mx = { .fd = -1, .mu = PTHREAD_MUTEX_INITIALIZER };

/* by index (rlg_metrics_code_index) */
static const int mx_codes[RLG_METRICS_CODES] = {
	0, 200, 400, 404, 405, 429, 500, 503
};

static const int64_t mx_bucket_ns[RLG_METRICS_BUCKETS] = {
	1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
	1000000, 2500000, 5000000, 10000000, 25000000, 50000000,
	100000000, 250000000, 500000000, 1000000000, INT64_MAX
};

static size_t mx_file_size(void);
static int mx_create(const char *path, bool replace);
static int mx_map(int fd, const char *path);
static int mx_names(int fd, const struct rlg_config *cfg, int *idx);
static const char *mx_config_name(const struct rlg_config *cfg, size_t i,
    char *buf, size_t size);
static void mx_private(void);
static struct rlg_metrics_map *mx_map_new(const struct rlg_config *cfg,
    int *rc);

static size_t
mx_file_size(void)
{
	return sizeof(struct mx_head) +
	    RLG_METRICS_SLOTS * sizeof(struct rlg_metrics_slot);
}

const char *
rlg_metrics_path(const struct rlg_config *cfg, char *buf, size_t size)
{
	snprintf(buf, size, "%s-metrics", cfg->store.sqlite.path != NULL ?
	    cfg->store.sqlite.path : "");
	return buf;
}

/*
 * A new scoreboard at path: made whole as path.PID.tmp, then linked to
 * path (replace: renamed over what is there). 0 (the caller opens path
 * again), or -1 with errno.
 */
static int
mx_create(const char *path, bool replace)
{
	char tmp[4200];
	struct mx_head *h;
	int fd, rc, err;

	if (snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid()) >=
	    (int)sizeof tmp) {
		errno = ENAMETOOLONG;
		return -1;
	}
	(void)unlink(tmp);
	fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
	    0600);
	if (fd < 0)
		return -1;
	/* 0600 whatever the umask: the mode every shared file is held to */
	if (fchmod(fd, 0600) != 0)
		goto fail;
	if ((rc = posix_fallocate(fd, 0, (off_t)mx_file_size())) != 0) {
		errno = rc;
		goto fail;
	}
	h = mmap(NULL, sizeof *h, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED)
		goto fail;
	memcpy(h->magic, MX_MAGIC, sizeof h->magic);
	h->size = mx_file_size();
	h->start_s = (int64_t)time(NULL);
	h->nslots = RLG_METRICS_SLOTS;
	munmap(h, sizeof *h);
	rc = replace ? rename(tmp, path) : link(tmp, path);
	err = errno;
	if (!replace)
		(void)unlink(tmp);
	close(fd);
	if (rc != 0 && !(err == EEXIST && !replace)) {
		errno = err;
		return -1;
	}
	return 0;
fail:
	err = errno;
	close(fd);
	(void)unlink(tmp);
	errno = err;
	return -1;
}

/* Maps the file on fd if it is a scoreboard of this layout. 0 or -1. */
static int
mx_map(int fd, const char *path)
{
	struct stat sb;
	void *m;

	(void)path;
	if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_size != mx_file_size())
		return -1;
	m = mmap(NULL, mx_file_size(), PROT_READ | PROT_WRITE, MAP_SHARED,
	    fd, 0);
	if (m == MAP_FAILED)
		return -1;
	mx.head = m;
	if (memcmp(mx.head->magic, MX_MAGIC, sizeof mx.head->magic) != 0 ||
	    mx.head->size != mx_file_size() ||
	    mx.head->nslots != RLG_METRICS_SLOTS) {
		munmap(m, mx_file_size());
		mx.head = NULL;
		return -1;
	}
	mx.slots = (struct rlg_metrics_slot *)(mx.head + 1);
	mx.nslots = RLG_METRICS_SLOTS;
	mx.map_size = mx_file_size();
	return 0;
}

/* The name of the config's policy index i (rlg_metrics_policy), or
 * NULL when there is none. */
static const char *
mx_config_name(const struct rlg_config *cfg, size_t i, char *buf,
    size_t size)
{
	const struct rlg_policy *p = rlg_metrics_policy(cfg, i);

	if (p == NULL)
		return NULL;
	snprintf(buf, size, "%s", p->name);
	return buf;
}

/*
 * The config's policies mapped onto the file's names into idx, new ones
 * added, under the file's flock (fd -1: the process's own memory, under
 * mx.mu only). 0, or -1 when the file has no room for them all (those
 * without room map to -1).
 */
static int
mx_names(int fd, const struct rlg_config *cfg, int *idx)
{
	struct mx_head *h = mx.head;
	char buf[MX_NAME_MAX];
	const char *name;
	uint32_t j, n;
	size_t i;
	int rc = 0;

	for (i = 0; i < RLG_METRICS_POLICIES; i++)
		idx[i] = -1;
	if (fd >= 0 && flock(fd, LOCK_EX) != 0)
		return -1;
	/* The file's count of names, and each name, bounded here. */
	n = __atomic_load_n(&h->npolicies, __ATOMIC_ACQUIRE);
	if (n > RLG_METRICS_POLICIES)
		n = RLG_METRICS_POLICIES;
	for (i = 0; i < rlg_metrics_npolicies(cfg); i++) {
		if ((name = mx_config_name(cfg, i, buf, sizeof buf)) == NULL)
			continue;
		for (j = 0; j < n && strncmp(h->names[j], name,
		    MX_NAME_MAX) != 0; j++)
			;
		if (j == n) {
			if (n == RLG_METRICS_POLICIES) {
				rc = -1;
				continue;
			}
			snprintf(h->names[n], MX_NAME_MAX, "%s", name);
			__atomic_store_n(&h->npolicies, ++n, __ATOMIC_RELEASE);
		}
		idx[i] = (int)j;
	}
	if (fd >= 0)
		(void)flock(fd, LOCK_UN);
	return rc;
}

/* Counts in the process's own memory: a scoreboard for one process. */
static void
mx_private(void)
{
	mx.head = rlg_xcalloc(1, sizeof *mx.head + MX_PRIVATE_SLOTS *
	    sizeof(struct rlg_metrics_slot));
	mx.head->start_s = (int64_t)time(NULL);
	mx.head->nslots = MX_PRIVATE_SLOTS;
	mx.slots = (struct rlg_metrics_slot *)(mx.head + 1);
	mx.nslots = MX_PRIVATE_SLOTS;
	mx.map_size = 0;
	mx.fd = -1;
}

/* A new map of cfg, in the list (mx.mu held); *rc as mx_names'. */
static struct rlg_metrics_map *
mx_map_new(const struct rlg_config *cfg, int *rc)
{
	struct mx_mapnode *n = rlg_xcalloc(1, sizeof *n);

	n->m.cfg = cfg;
	*rc = mx_names(mx.fd, cfg, n->m.idx);
	n->next = mx.maps;
	mx.maps = n;
	return &n->m;
}

int
rlg_metrics_open(const char *path, const struct rlg_config *cfg)
{
	struct mx_mapnode *n;
	struct stat refused;
	char why[4600];
	int fd = -1, tries, rc;
	bool replace;

	rlg_metrics_close();
	snprintf(mx.path, sizeof mx.path, "%s", path);
	for (tries = 0; tries < 4; tries++) {
		fd = rlg_shared_open(path, "metrics", false, &refused, why,
		    sizeof why);
		if (fd == -2) {
			/* Planted, or of another mode: never mapped. */
			rlg_log("%s", why);
			if (rlg_shared_set_aside(path, &refused) != 0 &&
			    errno != ENOENT) {
				rlg_log("metrics %s: cannot move it aside (%s):"
				    " this process counts alone", path,
				    strerror(errno));
				errno = 0;
				break;
			}
			rlg_log("metrics %s: the refused file is now"
			    " %s.refused; a new scoreboard is made", path,
			    path);
			errno = ENOENT;
			fd = -1;
		}
		if (fd < 0 && errno != ENOENT)
			break;
		if (fd >= 0 && mx_map(fd, path) == 0) {
			mx.fd = fd;
			pthread_mutex_lock(&mx.mu);
			(void)mx_map_new(cfg, &rc);
			pthread_mutex_unlock(&mx.mu);
			if (rc == 0)
				return 0;
			/* full of other names: start afresh */
			n = mx.maps;
			mx.maps = NULL;
			free(n);
			munmap(mx.head, mx.map_size);
			mx.head = NULL;
			mx.fd = -1;
		}
		/* missing, of another layout, or full of other names */
		replace = fd >= 0;
		if (fd >= 0)
			close(fd);
		fd = -1;
		if (mx_create(path, replace) != 0)
			break;
		if (replace)
			rlg_log("metrics: %s was of another layout or held other"
			    " policies: replaced by a new one (the counts"
			    " restart)", path);
	}
	rlg_log("metrics: cannot use %s: %s; this process counts alone",
	    path, errno != 0 ? strerror(errno) : "no scoreboard");
	if (fd >= 0)
		close(fd);
	mx_private();
	pthread_mutex_lock(&mx.mu);
	(void)mx_map_new(cfg, &rc);
	pthread_mutex_unlock(&mx.mu);
	return -1;
}

const struct rlg_metrics_map *
rlg_metrics_map(const struct rlg_config *cfg)
{
	struct rlg_metrics_map *m = NULL;
	struct mx_mapnode *n;
	int rc = 0;

	if (mx.head == NULL)
		return NULL;
	pthread_mutex_lock(&mx.mu);
	for (n = mx.maps; n != NULL && n->m.cfg != cfg; n = n->next)
		;
	if (n != NULL)
		m = &n->m;
	else
		m = mx_map_new(cfg, &rc);
	pthread_mutex_unlock(&mx.mu);
	if (rc != 0 && !__atomic_exchange_n(&mx.names_said, true,
	    __ATOMIC_RELAXED))
		rlg_log("metrics: %s holds %zu policy names already: the"
		    " policies of the new configuration without room are not"
		    " counted (remove the file while rlgate is stopped to"
		    " start afresh)", mx.path, RLG_METRICS_POLICIES);
	return m;
}

void
rlg_metrics_unmap(const struct rlg_config *cfg)
{
	struct mx_mapnode **at, *n;

	pthread_mutex_lock(&mx.mu);
	for (at = &mx.maps; *at != NULL; at = &(*at)->next) {
		if ((*at)->m.cfg == cfg) {
			n = *at;
			*at = n->next;
			free(n);
			break;
		}
	}
	pthread_mutex_unlock(&mx.mu);
}

void
rlg_metrics_close(void)
{
	struct mx_mapnode *n;

	pthread_mutex_lock(&mx.mu);
	while ((n = mx.maps) != NULL) {
		mx.maps = n->next;
		free(n);
	}
	pthread_mutex_unlock(&mx.mu);
	if (mx.head != NULL) {
		if (mx.map_size > 0)
			munmap(mx.head, mx.map_size);
		else
			free(mx.head);
	}
	if (mx.fd >= 0)
		close(mx.fd);
	mx.head = NULL;
	mx.slots = NULL;
	mx.nslots = 0;
	mx.fd = -1;
	mx.map_size = 0;
	mx.serial = 0;
	mx.full_said = false;
	mx.names_said = false;
}

struct rlg_metrics_slot *
rlg_metrics_claim(void)
{
	uint64_t me, owner;
	uint32_t i, n;
	pid_t pid;
	int pass;

	if (mx.head == NULL)
		return NULL;
	n = mx.nslots;
	me = (uint64_t)getpid() << 32 |
	    (uint32_t)(__atomic_add_fetch(&mx.serial, 1, __ATOMIC_RELAXED));
	/* a free slot, else one whose process is gone */
	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < n; i++) {
			owner = __atomic_load_n(&mx.slots[i].owner,
			    __ATOMIC_RELAXED);
			if (pass == 0 && owner != 0)
				continue;
			if (pass == 1) {
				pid = (pid_t)(owner >> 32);
				/* no process has a pid <= 0: gone */
				if (owner == 0 || pid == getpid() ||
				    (pid > 0 && (kill(pid, 0) == 0 ||
				    errno != ESRCH)))
					continue;
			}
			if (__atomic_compare_exchange_n(&mx.slots[i].owner,
			    &owner, me, false, __ATOMIC_ACQ_REL,
			    __ATOMIC_RELAXED))
				return &mx.slots[i];
		}
	}
	if (!__atomic_exchange_n(&mx.full_said, true, __ATOMIC_RELAXED))
		rlg_log("metrics: all %u slots of the scoreboard are taken by"
		    " live threads: this thread's requests are not counted", n);
	return NULL;
}

void
rlg_metrics_release(struct rlg_metrics_slot *s)
{
	if (s != NULL)
		__atomic_store_n(&s->owner, 0, __ATOMIC_RELEASE);
}

const struct rlg_policy *
rlg_metrics_policy(const struct rlg_config *cfg, size_t i)
{
	if (cfg->policies == NULL || i >= rlg_metrics_npolicies(cfg))
		return NULL;
	if (i < cfg->npolicies)
		return &cfg->policies[i];
	return cfg->policies[i - cfg->npolicies].new_keys_policy;
}

size_t
rlg_metrics_npolicies(const struct rlg_config *cfg)
{
	return 2 * cfg->npolicies;
}

size_t
rlg_metrics_bound_index(const struct rlg_config *cfg,
    const struct rlg_policy *p)
{
	size_t i, n = rlg_metrics_npolicies(cfg);

	for (i = cfg->npolicies; i < n; i++)
		if (rlg_metrics_policy(cfg, i) == p)
			return i;
	return RLG_METRICS_POLICIES;
}

/*
 * A switch, not a search of mx_codes: every code answered in the same
 * few steps (a 429 was four compares behind a 200). check_admin.c holds
 * it to mx_codes (test_code_index).
 */
size_t
rlg_metrics_code_index(int code)
{
	switch (code) {
	case 200:
		return 1;
	case 400:
		return 2;
	case 404:
		return 3;
	case 405:
		return 4;
	case 429:
		return 5;
	case 500:
		return 6;
	case 503:
		return 7;
	default:
		return 0;
	}
}

int
rlg_metrics_code(size_t i)
{
	return i < RLG_METRICS_CODES ? mx_codes[i] : 0;
}

void
rlg_metrics_response(struct rlg_metrics_slot *s, int code, bool admin)
{
	if (s == NULL)
		return;
	rlg_metrics_add(admin ? &s->admin_responses[rlg_metrics_code_index(code)] :
	    &s->responses[rlg_metrics_code_index(code)], 1);
}

void
rlg_metrics_store_error(struct rlg_metrics_slot *s)
{
	if (s != NULL)
		rlg_metrics_add(&s->store_errors, 1);
}

void
rlg_metrics_cache_hit(struct rlg_metrics_slot *s)
{
	if (s != NULL)
		rlg_metrics_add(&s->cache_hits, 1);
}

void
rlg_metrics_unguarded(struct rlg_metrics_slot *s, enum rlg_role role)
{
	size_t i = (size_t)role - 1;

	if (s != NULL && role != RLG_ROLE_RESPONDER &&
	    i < RLG_METRICS_GUARDS)
		rlg_metrics_add(&s->unguarded[i], 1);
}

const char *
rlg_metrics_guard_name(size_t i)
{
	static const char *const names[RLG_METRICS_GUARDS] = {
		"authorizer", "auth_request", "forward_auth"
	};

	return i < RLG_METRICS_GUARDS ? names[i] : "unknown";
}

void
rlg_metrics_flush(bool ok)
{
	if (mx.head == NULL)
		return;
	if (ok)
		__atomic_store_n(&mx.head->flush_ok_ms, rlg_now_ms(),
		    __ATOMIC_RELAXED);
	else
		(void)__atomic_add_fetch(&mx.head->flush_failures, 1,
		    __ATOMIC_RELAXED);
}

void
rlg_metrics_step_time(struct rlg_metrics_slot *s, int64_t ns)
{
	size_t b = 0;

	if (s == NULL)
		return;
	if (ns < 0)
		ns = 0;
	while (ns > mx_bucket_ns[b])
		b++;
	rlg_metrics_add(&s->buckets[b], 1);
	rlg_metrics_add(&s->step_ns, (uint64_t)ns);
	rlg_metrics_add(&s->steps, 1);
}

/* What an item came to, as counted (a skipped charge is not). */
static const enum rlg_metric_decision mx_outcome[] = {
	[RLG_ITEM_ADMITTED] = RLG_MD_ADMITTED,
	[RLG_ITEM_REJECTED] = RLG_MD_REJECTED,
	[RLG_ITEM_DRY_RUN_REJECTED] = RLG_MD_DRY_RUN_REJECTED,
	[RLG_ITEM_EXEMPT] = RLG_MD_EXEMPT,
};

void
rlg_metrics_verdict(struct rlg_metrics_slot *s,
    const struct rlg_metrics_map *m, const struct rlg_decided *dd)
{
	const struct rlg_verdict_items *gi = &dd->gi;
	size_t i;

	if (s == NULL || dd->flaw != RLG_FLAW_NONE)
		return;
	if (dd->unguarded)
		rlg_metrics_unguarded(s, dd->req->role);
	if (dd->token >= RLG_TOKEN_INVALID &&
	    (size_t)(dd->token - RLG_TOKEN_INVALID) < RLG_METRICS_TOKENS)
		rlg_metrics_add(&s->bad_tokens[dd->token - RLG_TOKEN_INVALID],
		    1);
	if (dd->hold_ms > 0)
		rlg_metrics_add(&s->held, 1);
	else if (dd->park_full && !dd->admitted)
		rlg_metrics_add(&s->park_full, 1);
	for (i = 0; i < gi->nexempt; i++)
		rlg_metrics_decision(s, m, gi->exempt[i], RLG_MD_EXEMPT);
	if (dd->step_ns >= 0)
		rlg_metrics_step_time(s, dd->step_ns);
	if (dd->store == RLG_STORE_SAID_FULL ||
	    dd->store == RLG_STORE_SAID_FAILED) {
		rlg_metrics_store_error(s);
		return;
	}
	if (dd->store != RLG_STORE_SAID_OK)
		return;
	if (dd->cached)
		rlg_metrics_cache_hit(s);
	for (i = 0; i < gi->n; i++)
		if (gi->outcome[i] != RLG_ITEM_SKIPPED)
			rlg_metrics_decision(s, m, gi->base[i],
			    mx_outcome[gi->outcome[i]]);
}

int64_t
rlg_metrics_bucket_ns(size_t i)
{
	return i < RLG_METRICS_BUCKETS ? mx_bucket_ns[i] : INT64_MAX;
}

const char *
rlg_metrics_decision_name(enum rlg_metric_decision d)
{
	static const char *const names[RLG_MD_N] = {
		"admitted", "rejected", "dry_run_rejected", "exempt"
	};

	return (unsigned)d < RLG_MD_N ? names[d] : "unknown";
}

#define MX_LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

void
rlg_metrics_sum(const struct rlg_metrics_map *map,
    struct rlg_metrics_sums *out)
{
	const struct rlg_metrics_slot *s;
	uint32_t i, n;
	size_t p, d, k;
	int f;

	memset(out, 0, sizeof *out);
	if (mx.head == NULL || map == NULL)
		return;
	out->start_s = mx.head->start_s;
	out->shared = mx.map_size > 0;
	out->flush_failures = MX_LOAD(mx.head->flush_failures);
	out->flush_ok_ms = MX_LOAD(mx.head->flush_ok_ms);
	n = mx.nslots;
	for (i = 0; i < n; i++) {
		s = &mx.slots[i];
		for (p = 0; p < rlg_metrics_npolicies(map->cfg); p++) {
			if ((f = map->idx[p]) < 0)
				continue;
			for (d = 0; d < RLG_MD_N; d++)
				out->requests[p][d] += MX_LOAD(s->requests[f][d]);
		}
		for (k = 0; k < RLG_METRICS_CODES; k++) {
			out->responses[k] += MX_LOAD(s->responses[k]);
			out->admin_responses[k] +=
			    MX_LOAD(s->admin_responses[k]);
		}
		out->store_errors += MX_LOAD(s->store_errors);
		out->cache_hits += MX_LOAD(s->cache_hits);
		for (k = 0; k < RLG_METRICS_BUCKETS; k++)
			out->buckets[k] += MX_LOAD(s->buckets[k]);
		out->step_ns += MX_LOAD(s->step_ns);
		out->steps += MX_LOAD(s->steps);
		for (k = 0; k < RLG_METRICS_GUARDS; k++)
			out->unguarded[k] += MX_LOAD(s->unguarded[k]);
		for (k = 0; k < RLG_METRICS_TOKENS; k++)
			out->bad_tokens[k] += MX_LOAD(s->bad_tokens[k]);
		out->held += MX_LOAD(s->held);
		out->park_full += MX_LOAD(s->park_full);
	}
}
