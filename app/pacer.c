/*
 * pacer.c: one log line at once, then at most one per interval (pacer.h).
 *
 * Lock-free for the pacers every thread shares: the thread that moves
 * next_ms on by compare-and-swap writes the line, and takes the count
 * held back; the others (and a thread that loses the swap) add one to
 * it. A count added while the winner takes it goes to the next line, as
 * under a lock it would.
 */
#include <stdbool.h>

#include "pacer.h"

long
rlg_pacer_take(struct rlg_pacer *p, int64_t now_ms, int64_t interval_ms)
{
	int64_t next = __atomic_load_n(&p->next_ms, __ATOMIC_RELAXED);

	if (now_ms < next || !__atomic_compare_exchange_n(&p->next_ms, &next,
	    now_ms + interval_ms, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
		(void)__atomic_add_fetch(&p->suppressed, 1, __ATOMIC_RELAXED);
		return -1;
	}
	return __atomic_exchange_n(&p->suppressed, 0, __ATOMIC_RELAXED);
}

void
rlg_pacer_restart(struct rlg_pacer *p, int64_t now_ms, int64_t interval_ms)
{
	__atomic_store_n(&p->next_ms, now_ms + interval_ms, __ATOMIC_RELAXED);
	__atomic_store_n(&p->suppressed, 0, __ATOMIC_RELAXED);
}
