/*
 * check_park.c: the park of held answers (app/server_park.c), in process:
 * answers in the order of their turns (ties in the order they came),
 * none before its time, the slots' bound, a stop that answers every one
 * at once, and the lingering close of what an answer returns (a
 * socketpair's end: closed once the peer closes, or at the bound).
 * The park is one per process: each case starts it (once: Check runs a
 * case in a process of its own unless CK_FORK=no), and the stop comes
 * last.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check_rlgate.h"
#include "server_park.h"
#include "util.h"

#define MS 1000000LL

/* What the answers saw: their order and times. */
static struct {
	pthread_mutex_t mu;
	int order[64];
	int64_t at[64];
	int n;
} seen = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* One held answer: its number, and the descriptor to hand the park. */
struct held {
	int id;
	int fd;
};

static int
answer(void *arg)
{
	struct held *h = arg;

	pthread_mutex_lock(&seen.mu);
	if (seen.n < 64) {
		seen.order[seen.n] = h->id;
		seen.at[seen.n] = rlg_mono_ns();
		seen.n++;
	}
	pthread_mutex_unlock(&seen.mu);
	return h->fd;
}

static int
seen_n(void)
{
	int n;

	pthread_mutex_lock(&seen.mu);
	n = seen.n;
	pthread_mutex_unlock(&seen.mu);
	return n;
}

/* Waits up to ms for n answers. */
static bool
wait_seen(int n, int ms)
{
	int i;

	for (i = 0; i < ms && seen_n() < n; i++)
		usleep(1000);
	return seen_n() >= n;
}

static void
seen_reset(void)
{
	pthread_mutex_lock(&seen.mu);
	seen.n = 0;
	pthread_mutex_unlock(&seen.mu);
}

/* The park answers by due time, ties in the order they came, never early. */
START_TEST(test_park_order)
{
	static struct held h[6];
	static const int64_t due_ms[6] = { 60, 20, 40, 20, 0, 40 };
	static const int want[6] = { 4, 1, 3, 2, 5, 0 };
	int64_t t0;
	int i;

	ck_assert_int_eq(rlg_park_start(500), 0);
	seen_reset();
	t0 = rlg_mono_ns();
	for (i = 0; i < 6; i++) {
		h[i].id = i;
		h[i].fd = -1;
		ck_assert(rlg_park_reserve(10));
		rlg_park_add(t0 + due_ms[i] * MS, answer, &h[i]);
	}
	ck_assert(wait_seen(6, 2000));
	for (i = 0; i < 6; i++) {
		ck_assert_int_eq(seen.order[i], want[i]);
		ck_assert(seen.at[i] >= t0 + due_ms[want[i]] * MS);
	}
	/* every slot given back (no descriptor to close) */
	for (i = 0; i < 100 && rlg_park_count() != 0; i++)
		usleep(1000);
	ck_assert_int_eq(rlg_park_count(), 0);
}
END_TEST

/* Slots: at most max taken; a reserved slot given back frees one. */
START_TEST(test_park_bound)
{
	ck_assert_int_eq(rlg_park_count(), 0);
	ck_assert(rlg_park_reserve(2));
	ck_assert(rlg_park_reserve(2));
	ck_assert(!rlg_park_reserve(2));
	ck_assert(!rlg_park_reserve(0));
	rlg_park_unreserve();
	ck_assert(rlg_park_reserve(2));
	rlg_park_unreserve();
	rlg_park_unreserve();
	ck_assert_int_eq(rlg_park_count(), 0);
}
END_TEST

/*
 * The lingering close: the slot stays taken until the peer closes (what
 * it sent before is read and dropped); a peer that never closes is
 * closed at the bound (500 ms here).
 */
START_TEST(test_park_linger)
{
	static struct held h[2];
	int sv[2][2], i;
	char c;

	ck_assert_int_eq(rlg_park_start(500), 0);
	seen_reset();
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i]), 0);
		h[i].id = i;
		h[i].fd = sv[i][0];
		ck_assert(rlg_park_reserve(10));
		rlg_park_add(rlg_mono_ns(), answer, &h[i]);
	}
	(void)!write(sv[0][1], "rest", 4);
	ck_assert(wait_seen(2, 2000));
	/* both answered and shut for writing: each peer reads EOF */
	ck_assert_int_eq(read(sv[0][1], &c, 1), 0);
	ck_assert_int_eq(read(sv[1][1], &c, 1), 0);
	ck_assert_int_eq(rlg_park_count(), 2);
	close(sv[0][1]);
	for (i = 0; i < 200 && rlg_park_count() != 1; i++)
		usleep(1000);
	ck_assert_int_eq(rlg_park_count(), 1);
	/* the other peer never closes: its end is closed at the bound */
	for (i = 0; i < 2000 && rlg_park_count() != 0; i++)
		usleep(1000);
	ck_assert_int_eq(rlg_park_count(), 0);
	ck_assert_int_eq(send(sv[1][1], "x", 1, MSG_NOSIGNAL), -1);
	ck_assert_int_eq(errno, EPIPE);
	close(sv[1][1]);
}
END_TEST

/* A stop answers every held answer at once; after it, at once too. */
START_TEST(test_park_stop)
{
	static struct held h[4];
	int64_t t0;
	int i;

	ck_assert_int_eq(rlg_park_start(500), 0);
	seen_reset();
	t0 = rlg_mono_ns();
	for (i = 0; i < 3; i++) {
		h[i].id = i;
		h[i].fd = -1;
		ck_assert(rlg_park_reserve(10));
		rlg_park_add(t0 + (10000 + i) * MS, answer, &h[i]);
	}
	rlg_park_stop();
	ck_assert_int_eq(seen_n(), 3);
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(seen.order[i], i);
	ck_assert(rlg_mono_ns() - t0 < 5000 * MS);
	/* stopped: an answer parked now is given on the caller's thread */
	h[3].id = 3;
	h[3].fd = -1;
	ck_assert(rlg_park_reserve(10));
	rlg_park_add(t0 + 10000 * MS, answer, &h[3]);
	ck_assert_int_eq(seen_n(), 4);
	ck_assert_int_eq(rlg_park_count(), 0);
}
END_TEST

Suite *
rlg_park_suite(void)
{
	Suite *s = suite_create("park");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_park_order);
	tcase_add_test(tc, test_park_bound);
	tcase_add_test(tc, test_park_linger);
	tcase_add_test(tc, test_park_stop);
	suite_add_tcase(s, tc);
	return s;
}
