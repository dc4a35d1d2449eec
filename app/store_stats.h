/*
 * store_stats.h: what a store handle has done, for the tests and the
 * benchmarks only: the rejection cache's hits, misses and remembered
 * rejections, and the group commit's batches. Each backend or wrapper
 * fills its own part through its stats operation; nothing in the
 * program reads them.
 */
#ifndef RLG_STORE_STATS_H
#define RLG_STORE_STATS_H

#include <stdbool.h>
#include <stdint.h>

struct rlg_store;

struct rlg_store_stats {
	bool cache;                /* a rejection cache: the three below */
	uint64_t cache_hits;       /* rejections answered from memory */
	uint64_t cache_misses;     /* steps that went to the store */
	uint64_t cache_stored;     /* rejections remembered */
	bool group;                /* SQLite group commit: the two below, for
	                              the process (every handle of the file) */
	uint64_t group_batches;    /* transactions committed by a leader */
	uint64_t group_steps;      /* requests they carried */
	bool table;                /* commit = behind: the table's */
	uint64_t table_entries;    /* entries in use */
	uint64_t table_recoveries; /* steps of dead holders undone */
	int64_t table_flushed_at_ms;  /* the last flush's end; 0: none */
};

/* Fills *out (all zero and false for what s does not do; NULL: zeros). */
void rlg_store_stats(const struct rlg_store *s, struct rlg_store_stats *out);

#endif
