/* Unit tests: the sender's table of sizes announced by CTS messages. */
#include <stdlib.h>

#include "proto/proto_cts.h"
#include "unit.h"

/* The table keeps whole entries; these check that size and slot come back. */
static int put(struct proto_cts_table *t, uint64_t key, uint64_t size, uint32_t slot)
{
	struct proto_cts_entry e = { .size = size, .addr = size ^ 0x5a5a, .key = ~size, .slot = slot };
	return proto_cts_put(t, key, &e);
}

static bool take(struct proto_cts_table *t, uint64_t key, uint64_t *size, uint32_t *slot)
{
	struct proto_cts_entry e;
	if (!proto_cts_take(t, key, &e))
		return false;
	if (e.addr != (e.size ^ 0x5a5a) || e.key != ~e.size)
		return false; /* the entry came back damaged */
	*size = e.size;
	*slot = e.slot;
	return true;
}

static int test_put_take(void)
{
	static struct proto_cts_table t;
	uint64_t size = 0;
	uint32_t meta = 0;
	CHECK_EQ(put(&t, proto_cts_key(5, 0), 4096, 0), 0);
	CHECK_EQ(put(&t, proto_cts_key(5, 1), 8192, 0), 0);
	CHECK_EQ(put(&t, proto_cts_key(6, 0), 1, 0), 0);
	CHECK_EQ(t.used, 3);
	CHECK(take(&t, proto_cts_key(5, 1), &size, &meta));
	CHECK_EQ(size, 8192);
	CHECK(!take(&t, proto_cts_key(5, 1), &size, &meta)); /* taken once */
	CHECK(take(&t, proto_cts_key(5, 0), &size, &meta));
	CHECK_EQ(size, 4096);
	CHECK(take(&t, proto_cts_key(6, 0), &size, &meta));
	CHECK_EQ(size, 1);
	CHECK_EQ(t.used, 0);
	return 0;
}

static int test_key_zero_tag(void)
{
	/* tag 0, seq 0 must not collide with "empty" */
	static struct proto_cts_table t;
	uint64_t size = 7;
	uint32_t meta = 0;
	CHECK(proto_cts_key(0, 0) != 0);
	CHECK(!take(&t, proto_cts_key(0, 0), &size, &meta));
	CHECK_EQ(put(&t, proto_cts_key(0, 0), 0, 0), 0);
	CHECK(take(&t, proto_cts_key(0, 0), &size, &meta));
	CHECK_EQ(size, 0);
	return 0;
}

static int test_duplicate_and_full(void)
{
	static struct proto_cts_table t;
	CHECK_EQ(put(&t, proto_cts_key(1, 1), 10, 0), 0);
	CHECK_EQ(put(&t, proto_cts_key(1, 1), 11, 0), -1);
	int stored = 1;
	for (uint32_t i = 2; i < 2 * PROTO_CTS_SLOTS; i++)
		if (put(&t, proto_cts_key(1, i), i, 0) == 0)
			stored++;
	CHECK_EQ(stored, PROTO_CTS_SLOTS - 1); /* one slot always stays empty */
	CHECK_EQ(t.used, PROTO_CTS_SLOTS - 1);
	uint64_t size = 0;
	uint32_t meta = 0;
	CHECK(take(&t, proto_cts_key(1, 1), &size, &meta));
	CHECK_EQ(size, 10);
	return 0;
}

/* Random puts and takes against a plain array model: deletion must never
 * break a probe chain (every live key stays findable). */
static int test_against_model(void)
{
	static struct proto_cts_table t;
	enum { N = 4096 };
	static uint64_t model[N]; /* size+1 for live keys, 0 for absent */
	unsigned seed = 12345;
	for (int step = 0; step < 200000; step++) {
		seed = seed * 1103515245u + 12345u;
		uint32_t k = (seed >> 8) % N;
		uint64_t key = proto_cts_key(k >> 6, k & 63), size;
		uint32_t meta;
		if (model[k]) {
			if (!take(&t, key, &size, &meta) || size + 1 != model[k] ||
			    meta != (uint32_t)(model[k] * 7)) {
				CHECK(!"live key lost or wrong size");
				return 1;
			}
			model[k] = 0;
		} else if (t.used < 300) {
			if (put(&t, key, seed, (uint32_t)(((uint64_t)seed + 1) * 7)) != 0) {
				CHECK(!"put failed below capacity");
				return 1;
			}
			model[k] = (uint64_t)seed + 1;
		}
	}
	int live = 0;
	for (int k = 0; k < N; k++) {
		uint64_t size;
		uint32_t meta;
		if (model[k]) {
			live++;
			CHECK(take(&t, proto_cts_key((uint32_t)k >> 6, (uint32_t)k & 63), &size, &meta));
		}
	}
	CHECK_EQ(t.used, 0);
	CHECK(live > 0);
	return 0;
}

static const struct unit_test tests[] = {
	TEST_ENTRY(test_put_take, "announced sizes are found once, by (tag, seq)"),
	TEST_ENTRY(test_key_zero_tag, "tag 0 / seq 0 is a valid key, distinct from empty"),
	TEST_ENTRY(test_duplicate_and_full, "duplicates refused, capacity is slots-1"),
	TEST_ENTRY(test_against_model, "200k random puts/takes agree with a model (size and meta)"),
};

int main(int argc, char **argv)
{
	return unit_main(tests, argc, argv);
}
