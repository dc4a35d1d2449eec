/*
 * overrides.c: the store's override rows, read once per process by a
 * thread of their own (overrides.h).
 *
 * Who owns what. The process keeps a list of readers, one per [store]
 * (a server has one; the tests may open several), each counted by the
 * gates attached to it. A reader owns its store handle, the rows of its
 * last read (at most max_overrides), and per config a gate decides with
 * (struct rlg_overrides_cfg, counted by those gates) the set built for
 * it, and lists the gates' views. A set replaced (or whose config went)
 * goes on the retired list; the reader frees it once no view's hazard
 * pointer (held) names it. A gate sets held to the config's current set
 * and then checks that the set is still current (both sequentially
 * consistent): either the reader's scan, which comes after its swap,
 * sees the hazard, or the gate sees the swap and tries again. The
 * configs, the views and the retired list are under the reader's mutex,
 * which no request takes; the current sets, seq and held are also read
 * without it, atomically; the rows and the store handle are the reader
 * thread's alone.
 *
 * Why no set outlives its config: a set borrows its config's policies.
 * A gate leaves a config (rlg_overrides_switch, _detach) before the
 * server may free it, and the config's entry goes with its last gate,
 * retiring its set; the reader builds for a config only while it
 * counts as building, and the last gate leaving waits for that build.
 * A retired set is freed without its config (tier.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "overrides.h"
#include "store.h"
#include "util.h"

/* The reader thread's nice value (ovr_main). */
#define OVR_NICE 10

/* Why a row is refused before the set sees it (beside RLG_TIER_*). */
#define OVR_TOO_LONG (-100)

/* Bad rows logged per build (then only counted). */
#define OVR_BAD_LOGGED 10

struct rlg_overrides_snap {
	struct rlg_tier_set *set;          /* sealed, owned */
	struct rlg_overrides_snap *next;   /* on the retired list */
};

/* A config some gates decide with, and its current set. */
struct rlg_overrides_cfg {
	const struct rlg_config *cfg;      /* borrowed: alive while users */
	int users;
	bool building;                     /* the reader builds for it */
	bool stale;                        /* rows changed since snap */
	struct rlg_overrides_snap *snap;   /* NULL before the first build;
	                                      written under mu, atomically */
	struct rlg_overrides_cfg *next;
};

/*
 * The longest text of a row's field that the reader keeps: one byte more
 * than any good one, so that a row that long is still refused (a row is
 * anybody's who may write the store: 100,000 rows of megabytes must not
 * become the process's memory).
 */
#define OVR_FIELD_MAX (RLG_TIER_SPEC_MAX + 1)

/* One row as read: policy, client and spec in one allocation. */
struct ovr_row {
	char *policy;                      /* owns the three strings */
	const char *client, *spec;
	bool too_long;                     /* a field was cut */
};

struct rlg_overrides {
	struct rlg_overrides *next;        /* the process's list */
	int users;                         /* gates (under readers_mu) */
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t wake_cv;            /* the reader waits on it */
	pthread_cond_t done_cv;            /* gates wait for builds, passes */
	bool stop, wake;
	uint64_t passes;                   /* passes finished */
	struct rlg_overrides_cfg *cfgs;
	struct rlg_overrides_view *views;
	struct rlg_overrides_snap *retired;
	uint64_t seq;                      /* publishes (atomic) */
	int64_t max;                       /* [store] max_overrides, the
	                                      latest config's (under mu) */
	bool reread;                       /* max changed: read them all */
	/* the reader thread's alone */
	struct rlg_store *store;
	uint64_t version;                  /* of rows; 0: never read */
	struct ovr_row *rows;
	size_t nrows;
};

/* What a read collects. */
struct ovr_load {
	struct ovr_row *rows;
	size_t n, cap;
	int64_t max;
	bool over;                         /* a row past max was offered */
};

static pthread_mutex_t readers_mu = PTHREAD_MUTEX_INITIALIZER;
static struct rlg_overrides *readers;

static void *ovr_main(void *arg);

static void
rows_free(struct ovr_row *rows, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(rows[i].policy);
	free(rows);
}

/* One row of the store into the load; stops past max. */
static int
ovr_collect(void *ctx, const struct rlg_override_row *row)
{
	struct ovr_load *l = ctx;
	size_t lp, lc, ls;
	struct ovr_row *r;

	if ((int64_t)l->n >= l->max) {
		l->over = true;
		return 1;
	}
	if (l->n == l->cap) {
		l->cap = l->cap == 0 ? 64 : l->cap * 2;
		l->rows = realloc(l->rows, l->cap * sizeof *l->rows);
		if (l->rows == NULL)
			abort();
	}
	lp = strnlen(row->policy, OVR_FIELD_MAX) + 1;
	lc = strnlen(row->client, OVR_FIELD_MAX) + 1;
	ls = strnlen(row->spec, OVR_FIELD_MAX) + 1;
	r = &l->rows[l->n++];
	r->too_long = lp > OVR_FIELD_MAX || lc > OVR_FIELD_MAX ||
	    ls > OVR_FIELD_MAX;
	r->policy = rlg_xmalloc(lp + lc + ls);
	memcpy(r->policy, row->policy, lp - 1);
	r->policy[lp - 1] = '\0';
	memcpy(r->policy + lp, row->client, lc - 1);
	r->policy[lp + lc - 1] = '\0';
	memcpy(r->policy + lp + lc, row->spec, ls - 1);
	r->policy[lp + lc + ls - 1] = '\0';
	r->client = r->policy + lp;
	r->spec = r->policy + lp + lc;
	return 0;
}

/*
 * Reads the store when its rows changed: they replace the reader's, and
 * every config's set is stale. A store that fails keeps the rows (the
 * gates' own steps log the store's failures).
 */
static void
ovr_read(struct rlg_overrides *o)
{
	struct ovr_load l = { NULL, 0, 0, 0, false };
	uint64_t v;
	struct rlg_overrides_cfg *c;

	pthread_mutex_lock(&o->mu);
	l.max = o->max;
	if (o->reread)
		o->version = 0;
	o->reread = false;
	pthread_mutex_unlock(&o->mu);
	if (l.max <= 0) {               /* none read: none kept */
		if (o->nrows == 0)
			return;
		v = 0;
	} else {
		v = o->version;
		if (rlg_store_overrides(o->store, &v, ovr_collect, &l) !=
		    RLG_OK || v == o->version) {
			rows_free(l.rows, l.n);
			return;
		}
	}
	if (l.over)
		rlg_log("overrides: more than max_overrides = %lld rows in the"
		    " store: the first %zu read, the others skipped",
		    (long long)l.max, l.n);
	rows_free(o->rows, o->nrows);
	o->rows = l.rows;
	o->nrows = l.n;
	o->version = v;
	pthread_mutex_lock(&o->mu);
	for (c = o->cfgs; c != NULL; c = c->next)
		c->stale = true;
	pthread_mutex_unlock(&o->mu);
}

/* The word a refused row's reason is logged as. */
static const char *
ovr_reason(int rc)
{
	switch (rc) {
	case RLG_TIER_NO_POLICY:
		return "unknown_policy";
	case RLG_TIER_BAD_CLIENT:
		return "bad_client";
	case RLG_TIER_FULL:
		return "too_many";
	case OVR_TOO_LONG:
		return "too_long";
	default:
		return "bad_spec";
	}
}

/*
 * Logs a row the set refused. Everything of the row is anybody's who may
 * write the store, and err repeats it: each value a token (util.h), the
 * reason a fixed word, so the line is one event to a log parser.
 */
static void
ovr_log_bad(const struct ovr_row *r, int rc, const char *err)
{
	char policy[RLG_POLICY_NAME_MAX * 3 + 4];
	char client[RLG_TIER_SPEC_MAX * 3 + 4], spec[RLG_TIER_SPEC_MAX * 3 + 4];
	char detail[512 * 3 + 4];

	(void)rlg_log_token(policy, sizeof policy, r->policy,
	    RLG_POLICY_NAME_MAX);
	(void)rlg_log_token(client, sizeof client, r->client,
	    RLG_TIER_SPEC_MAX);
	(void)rlg_log_token(spec, sizeof spec, r->spec, RLG_TIER_SPEC_MAX);
	(void)rlg_log_token(detail, sizeof detail, err, 512);
	rlg_log("event=bad_override policy=%s client=%s spec=%s reason=%s"
	    " detail=%s", policy[0] != '\0' ? policy : "-",
	    client[0] != '\0' ? client : "-", spec[0] != '\0' ? spec : "-",
	    ovr_reason(rc), detail);
}

/* A sealed set of the rows for cfg; bad rows logged and skipped. */
static struct rlg_tier_set *
ovr_build(const struct rlg_overrides *o, const struct rlg_config *cfg)
{
	struct rlg_tier_set *set = rlg_tier_set_new(cfg);
	size_t i, bad = 0;
	char err[512];
	int rc;

	for (i = 0; i < o->nrows; i++) {
		if (o->rows[i].too_long) {
			rc = OVR_TOO_LONG;
			snprintf(err, sizeof err, "a field longer than %d bytes",
			    RLG_TIER_SPEC_MAX);
		} else {
			rc = rlg_tier_set_add(set, o->rows[i].policy,
			    o->rows[i].client, o->rows[i].spec, "override",
			    err, sizeof err);
		}
		if (rc == 0)
			continue;
		if (bad++ < OVR_BAD_LOGGED && cfg->log_level >= RLG_LOG_WARN)
			ovr_log_bad(&o->rows[i], rc, err);
	}
	rlg_tier_set_seal(set);
	if (cfg->log_level >= RLG_LOG_INFO ||
	    (bad > 0 && cfg->log_level >= RLG_LOG_WARN))
		rlg_log("overrides loaded: %zu (%zu skipped)",
		    rlg_tier_set_size(set), bad);
	return set;
}

/* Under mu: s goes on the retired list (ovr_sweep frees it). */
static void
ovr_retire(struct rlg_overrides *o, struct rlg_overrides_snap *s)
{
	if (s == NULL)
		return;
	s->next = o->retired;
	o->retired = s;
}

/* Under mu: c's set is replaced by s, the old one retired. */
static void
ovr_publish(struct rlg_overrides *o, struct rlg_overrides_cfg *c,
    struct rlg_overrides_snap *s)
{
	struct rlg_overrides_snap *old = c->snap;

	__atomic_store_n(&c->snap, s, __ATOMIC_SEQ_CST);
	ovr_retire(o, old);
	__atomic_add_fetch(&o->seq, 1, __ATOMIC_SEQ_CST);
	pthread_cond_broadcast(&o->done_cv);
}

/* Builds every config's set that is missing or stale; mu held. */
static void
ovr_build_all(struct rlg_overrides *o)
{
	struct rlg_overrides_snap *s;
	struct rlg_overrides_cfg *c;

	for (;;) {
		for (c = o->cfgs; c != NULL; c = c->next)
			if (c->snap == NULL || c->stale)
				break;
		if (c == NULL)
			return;
		c->building = true;
		c->stale = false;
		pthread_mutex_unlock(&o->mu);
		s = rlg_xcalloc(1, sizeof *s);
		s->set = ovr_build(o, c->cfg);
		pthread_mutex_lock(&o->mu);
		c->building = false;
		ovr_publish(o, c, s);
	}
}

/* Under mu: whether a view's hazard pointer names s. */
static bool
ovr_held(const struct rlg_overrides *o, const struct rlg_overrides_snap *s)
{
	const struct rlg_overrides_view *v;

	for (v = o->views; v != NULL; v = v->next)
		if (__atomic_load_n(&v->held, __ATOMIC_SEQ_CST) == s)
			return true;
	return false;
}

/* Frees the retired sets no view holds; mu held (dropped to free). */
static void
ovr_sweep(struct rlg_overrides *o)
{
	struct rlg_overrides_snap **pp = &o->retired, *s, *dead = NULL;

	while ((s = *pp) != NULL) {
		if (!ovr_held(o, s)) {
			*pp = s->next;
			s->next = dead;
			dead = s;
		} else {
			pp = &s->next;
		}
	}
	if (dead == NULL)
		return;
	pthread_mutex_unlock(&o->mu);
	while ((s = dead) != NULL) {
		dead = s->next;
		rlg_tier_set_free(s->set);
		free(s);
	}
	pthread_mutex_lock(&o->mu);
}

/*
 * The reader: a pass (a read of the store, the builds it calls for, the
 * sweep) every RLG_OVERRIDES_INTERVAL_MS, or at once when woken (a new
 * config, rlg_overrides_sync).
 */
static void *
ovr_main(void *arg)
{
	struct rlg_overrides *o = arg;
	struct timespec until;
	int64_t at;

	/*
	 * Linux: a nice value of its own (setpriority(2) on a thread id), so
	 * that on a busy host the workers' requests come before a build; it
	 * still gets its share (CFS weighs, never starves).
	 */
	(void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid),
	    OVR_NICE);
	/* The workers' connections tell the store's state: not this one. */
	rlg_log_set_store_quiet(true);
	pthread_mutex_lock(&o->mu);
	for (;;) {
		at = rlg_now_ms() + RLG_OVERRIDES_INTERVAL_MS;
		until.tv_sec = (time_t)(at / 1000);
		until.tv_nsec = (long)(at % 1000) * 1000000L;
		while (!o->stop && !o->wake)
			if (pthread_cond_timedwait(&o->wake_cv, &o->mu,
			    &until) == ETIMEDOUT)
				break;
		if (o->stop)
			break;
		o->wake = false;
		pthread_mutex_unlock(&o->mu);
		ovr_read(o);
		pthread_mutex_lock(&o->mu);
		ovr_build_all(o);
		ovr_sweep(o);
		o->passes++;
		pthread_cond_broadcast(&o->done_cv);
	}
	pthread_mutex_unlock(&o->mu);
	return NULL;
}

/* Under mu: the entry of cfg, or NULL. */
static struct rlg_overrides_cfg *
ovr_find(struct rlg_overrides *o, const struct rlg_config *cfg)
{
	struct rlg_overrides_cfg *c;

	for (c = o->cfgs; c != NULL; c = c->next)
		if (c->cfg == cfg)
			return c;
	return NULL;
}

/* Under mu: one more gate on cfg (a config the reader has not seen: it
 * builds its set at once). */
static struct rlg_overrides_cfg *
ovr_use(struct rlg_overrides *o, const struct rlg_config *cfg)
{
	struct rlg_overrides_cfg *c = ovr_find(o, cfg);

	if (c == NULL) {
		c = rlg_xcalloc(1, sizeof *c);
		c->cfg = cfg;
		c->next = o->cfgs;
		o->cfgs = c;
		o->wake = true;
		pthread_cond_signal(&o->wake_cv);
	}
	c->users++;
	return c;
}

/* Under mu: waits for c's first set. */
static void
ovr_wait(struct rlg_overrides *o, const struct rlg_overrides_cfg *c)
{
	while (c->snap == NULL)
		pthread_cond_wait(&o->done_cv, &o->mu);
}

/*
 * Under mu: one gate less on cfg; the last takes its config's entry
 * away (after a build for it ends: the config may be freed next).
 */
static void
ovr_unuse(struct rlg_overrides *o, const struct rlg_config *cfg)
{
	struct rlg_overrides_cfg **pp, *c = ovr_find(o, cfg);

	if (c == NULL || --c->users > 0)
		return;
	while (c->building)
		pthread_cond_wait(&o->done_cv, &o->mu);
	if (c->users > 0)       /* taken up again meanwhile */
		return;
	for (pp = &o->cfgs; *pp != c; pp = &(*pp)->next)
		;
	*pp = c->next;
	ovr_retire(o, c->snap);
	free(c);
}

/*
 * v's hazard pointer to its config's current set: stored, then checked
 * to be current still (else the reader may have swapped it and scanned
 * before the store: again).
 */
static void
ovr_take(struct rlg_overrides_view *v)
{
	struct rlg_overrides_snap *s;

	do {
		s = __atomic_load_n(&v->c->snap, __ATOMIC_SEQ_CST);
		__atomic_store_n(&v->held, s, __ATOMIC_SEQ_CST);
	} while (__atomic_load_n(&v->c->snap, __ATOMIC_SEQ_CST) != s);
}

/* Frees a stopped reader. */
static void
ovr_free(struct rlg_overrides *o)
{
	struct rlg_overrides_snap *s;

	while ((s = o->retired) != NULL) {
		o->retired = s->next;
		rlg_tier_set_free(s->set);
		free(s);
	}
	rows_free(o->rows, o->nrows);
	rlg_store_close(o->store);
	pthread_cond_destroy(&o->wake_cv);
	pthread_cond_destroy(&o->done_cv);
	pthread_mutex_destroy(&o->mu);
	free(o);
}

/* Under readers_mu: the reader of cfg's [store], or NULL. */
static struct rlg_overrides *
ovr_reader_of(const struct rlg_config *cfg)
{
	struct rlg_overrides *o;
	char what[64];

	for (o = readers; o != NULL; o = o->next) {
		/* a reader with gates has a config of its store alive */
		pthread_mutex_lock(&o->mu);
		if (o->cfgs != NULL && !rlg_config_store_changed(o->cfgs->cfg,
		    cfg, what, sizeof what)) {
			pthread_mutex_unlock(&o->mu);
			return o;
		}
		pthread_mutex_unlock(&o->mu);
	}
	return NULL;
}

void
rlg_overrides_attach(struct rlg_overrides_view *v,
    const struct rlg_config *cfg)
{
	struct rlg_store_config sc;
	struct rlg_overrides *o;
	struct rlg_overrides_cfg *c;
	int rc;

	memset(v, 0, sizeof *v);
	pthread_mutex_lock(&readers_mu);
	if ((o = ovr_reader_of(cfg)) == NULL) {
		o = rlg_xcalloc(1, sizeof *o);
		pthread_mutex_init(&o->mu, NULL);
		pthread_cond_init(&o->wake_cv, NULL);
		pthread_cond_init(&o->done_cv, NULL);
		o->max = cfg->store.max_overrides;
		/*
		 * It reads override rows only: the backend itself, no
		 * decision table (with commit = behind, a table-backed
		 * handle would map the table, and could build or bind it,
		 * for nothing), no group and no cache. A handle even on
		 * failure: it heals (store.h).
		 */
		sc = cfg->store;
		sc.sqlite.commit = RLG_COMMIT_EACH;
		sc.group_commit = RLG_GROUP_OFF;
		sc.rejection_cache = 0;
		(void)rlg_store_open(&sc, &o->store);
		if ((rc = pthread_create(&o->thread, NULL, ovr_main, o)) !=
		    0) {
			pthread_mutex_unlock(&readers_mu);
			rlg_log("cannot start the overrides reader: %s: the"
			    " store's overrides do not apply", strerror(rc));
			ovr_free(o);
			return;
		}
		o->next = readers;
		readers = o;
	}
	o->users++;
	/* its config's entry before readers_mu goes: ovr_reader_of */
	pthread_mutex_lock(&o->mu);
	c = ovr_use(o, cfg);
	pthread_mutex_unlock(&readers_mu);
	v->o = o;
	v->c = c;
	v->cfg = cfg;
	v->next = o->views;
	o->views = v;
	ovr_wait(o, c);
	v->seq = __atomic_load_n(&o->seq, __ATOMIC_SEQ_CST);
	ovr_take(v);
	pthread_mutex_unlock(&o->mu);
}

void
rlg_overrides_switch(struct rlg_overrides_view *v,
    const struct rlg_config *cfg)
{
	struct rlg_overrides *o = v->o;
	const struct rlg_config *old = v->cfg;
	struct rlg_overrides_cfg *c;

	if (o == NULL || cfg == old) {
		v->cfg = cfg;
		return;
	}
	pthread_mutex_lock(&o->mu);
	if (cfg->store.max_overrides != o->max) {
		/* a reload's new bound: every row again at the next pass */
		o->max = cfg->store.max_overrides;
		o->reread = true;
	}
	c = ovr_use(o, cfg);
	ovr_wait(o, c);
	v->c = c;
	v->cfg = cfg;
	v->seq = __atomic_load_n(&o->seq, __ATOMIC_SEQ_CST);
	ovr_take(v);
	ovr_unuse(o, old);
	pthread_mutex_unlock(&o->mu);
}

void
rlg_overrides_detach(struct rlg_overrides_view *v)
{
	struct rlg_overrides *o = v->o, **pp;
	struct rlg_overrides_view **vp;

	if (o == NULL)
		return;
	pthread_mutex_lock(&readers_mu);
	pthread_mutex_lock(&o->mu);
	for (vp = &o->views; *vp != v; vp = &(*vp)->next)
		;
	*vp = v->next;
	ovr_unuse(o, v->cfg);
	pthread_mutex_unlock(&o->mu);
	memset(v, 0, sizeof *v);
	if (--o->users > 0) {
		pthread_mutex_unlock(&readers_mu);
		return;
	}
	for (pp = &readers; *pp != o; pp = &(*pp)->next)
		;
	*pp = o->next;
	pthread_mutex_unlock(&readers_mu);
	rlg_thread_stop(o->thread, &o->mu, &o->wake_cv, &o->stop);
	ovr_free(o);
}

const struct rlg_tier_set *
rlg_overrides_current(struct rlg_overrides_view *v)
{
	uint64_t seq;

	if (v->o == NULL)
		return NULL;
	seq = __atomic_load_n(&v->o->seq, __ATOMIC_SEQ_CST);
	if (seq != v->seq) {
		ovr_take(v);
		v->seq = seq;
	}
	return v->held != NULL ? v->held->set : NULL;
}

void
rlg_overrides_sync(struct rlg_overrides_view *v)
{
	struct rlg_overrides *o = v->o;
	uint64_t want;

	if (o == NULL)
		return;
	pthread_mutex_lock(&o->mu);
	/* a pass that starts after this call: the one under way may have
	 * read the store before it */
	want = o->passes + 2;
	o->wake = true;
	pthread_cond_signal(&o->wake_cv);
	while (o->passes < want) {
		if (!o->wake) {
			o->wake = true;
			pthread_cond_signal(&o->wake_cv);
		}
		pthread_cond_wait(&o->done_cv, &o->mu);
	}
	v->seq = __atomic_load_n(&o->seq, __ATOMIC_SEQ_CST);
	ovr_take(v);
	pthread_mutex_unlock(&o->mu);
}
