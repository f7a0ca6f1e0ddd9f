/*
 * test_pool.c - the fixed-capacity freelist: exhaustion, LIFO order, the
 * available count, and concurrent push/pop.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "util/freelist.h"
#include "util/list.h"

struct item {
	int id;
	atomic_int taken; /* 1 while a thread holds it: a double hand-out shows here */
	struct util_free_node node;
};

#define N 16

static struct item *item_of(struct util_free_node *n)
{
	return n ? container_of(n, struct item, node) : NULL;
}

static void fill(struct util_freelist *fl, struct item *items, int n)
{
	util_freelist_init(fl);
	for (int i = 0; i < n; i++) {
		items[i].id = i;
		atomic_init(&items[i].taken, 0);
		util_freelist_push(fl, &items[i].node);
	}
}

static int test_empty(void)
{
	struct util_freelist fl;
	util_freelist_init(&fl);
	CHECK_EQ(fl.available, 0);
	CHECK(util_freelist_pop(&fl) == NULL);
	CHECK(util_freelist_pop(&fl) == NULL);
	CHECK_EQ(fl.available, 0); /* a failed pop does not go negative */
	util_freelist_destroy(&fl);
	return 0;
}

static int test_exhaust(void)
{
	struct util_freelist fl;
	struct item items[N];
	fill(&fl, items, N);
	CHECK_EQ(fl.available, N);
	int seen[N] = { 0 };
	for (int i = 0; i < N; i++) {
		struct item *it = item_of(util_freelist_pop(&fl));
		CHECK(it != NULL);
		if (!it)
			return 1;
		CHECK(it >= items && it < items + N);
		seen[it->id]++;
		CHECK_EQ(fl.available, N - 1 - i);
	}
	for (int i = 0; i < N; i++)
		CHECK_EQ(seen[i], 1);
	CHECK(util_freelist_pop(&fl) == NULL); /* the N+1th */
	CHECK_EQ(fl.available, 0);
	/* push back one: exactly that one comes out, then empty again */
	util_freelist_push(&fl, &items[5].node);
	CHECK_EQ(fl.available, 1);
	CHECK(item_of(util_freelist_pop(&fl)) == &items[5]);
	CHECK(util_freelist_pop(&fl) == NULL);
	util_freelist_destroy(&fl);
	return 0;
}

static int test_lifo(void)
{
	struct util_freelist fl;
	struct item items[N];
	fill(&fl, items, N);
	/* pushed 0..N-1: popped N-1..0 */
	for (int i = N - 1; i >= 0; i--)
		CHECK_EQ(item_of(util_freelist_pop(&fl))->id, i);
	/* last pushed is first popped, interleaved */
	util_freelist_push(&fl, &items[3].node);
	util_freelist_push(&fl, &items[9].node);
	CHECK_EQ(item_of(util_freelist_pop(&fl))->id, 9);
	util_freelist_push(&fl, &items[1].node);
	CHECK_EQ(fl.available, 2);
	CHECK_EQ(item_of(util_freelist_pop(&fl))->id, 1);
	CHECK_EQ(item_of(util_freelist_pop(&fl))->id, 3);
	CHECK(util_freelist_pop(&fl) == NULL);
	util_freelist_destroy(&fl);
	return 0;
}

struct worker {
	struct util_freelist *fl;
	int iterations;
	unsigned seed;
	int double_handouts;
	int pops, empties;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct util_free_node *held[N];
	for (int it = 0; it < w->iterations; it++) {
		/* take a few, then give them back, in varying amounts */
		int want = 1 + (int)(rand_r(&w->seed) % 6);
		int got = 0;
		for (int k = 0; k < want; k++) {
			struct util_free_node *n = util_freelist_pop(w->fl);
			if (!n) {
				w->empties++;
				break;
			}
			if (atomic_exchange(&item_of(n)->taken, 1) != 0)
				w->double_handouts++;
			held[got++] = n;
			w->pops++;
		}
		while (got > 0) {
			struct util_free_node *n = held[--got];
			atomic_store(&item_of(n)->taken, 0);
			util_freelist_push(w->fl, n);
		}
	}
	return NULL;
}

static int test_concurrent(void)
{
	enum { THREADS = 4 };
	struct util_freelist fl;
	struct item items[N];
	fill(&fl, items, N);
	pthread_t th[THREADS];
	struct worker w[THREADS];
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ &fl, 50000, (unsigned)(i + 1) * 7919u, 0, 0, 0 };
		CHECK_EQ(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
	}
	int doubles = 0, pops = 0, empties = 0;
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		doubles += w[i].double_handouts;
		pops += w[i].pops;
		empties += w[i].empties;
	}
	CHECK_EQ(doubles, 0);
	/* every iteration popped at least once or found the pool empty */
	CHECK(pops + empties >= THREADS * 50000);
	CHECK(pops > empties);
	CHECK_EQ(fl.available, N);
	/* and every item is in the pool exactly once */
	int seen[N] = { 0 };
	for (int i = 0; i < N; i++) {
		struct item *it = item_of(util_freelist_pop(&fl));
		CHECK(it != NULL);
		if (it)
			seen[it->id]++;
	}
	CHECK(util_freelist_pop(&fl) == NULL);
	for (int i = 0; i < N; i++)
		CHECK_EQ(seen[i], 1);
	util_freelist_destroy(&fl);
	return 0;
}

static const struct unit_test tests[] = {
	TEST_ENTRY(test_empty, "an empty pool pops NULL and keeps count 0"),
	TEST_ENTRY(test_exhaust, "pool of N: N distinct pops, the N+1th is NULL, push back"),
	TEST_ENTRY(test_lifo, "last pushed is first popped"),
	TEST_ENTRY(test_concurrent, "4 threads push/pop: no double hand-out, count and items intact"),
};

int main(int argc, char **argv)
{
	return unit_main(tests, argc, argv);
}
