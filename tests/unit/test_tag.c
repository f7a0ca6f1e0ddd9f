/*
 * test_tag.c - the tag layout (wide 64-bit and narrow 48..63-bit) and the
 * per-(connection, NCCL tag) sequence table.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto_tag.h"
#include "unit.h"

static uint64_t field_mask(unsigned shift, unsigned bits)
{
	uint64_t m = bits >= 64 ? ~0ULL : ((1ULL << bits) - 1);
	return m << shift;
}

static uint64_t all_bits(unsigned bits)
{
	return bits >= 64 ? ~0ULL : ((1ULL << bits) - 1);
}

/* ---- layout ---- */

static int test_layout_init_bounds(void)
{
	struct proto_tag_layout l;
	static const unsigned rejected[] = { 0, 1, 32, 47 };
	for (size_t i = 0; i < sizeof(rejected) / sizeof(rejected[0]); i++) {
		memset(&l, 0x77, sizeof(l));
		CHECK_EQ(proto_tag_layout_init(&l, rejected[i]), -1);
	}
	for (unsigned b = 48; b <= 64; b++) {
		CHECK_EQ(proto_tag_layout_init(&l, b), 0);
		CHECK_EQ(l.bits, b);
	}
	/* more than 64 is clamped */
	CHECK_EQ(proto_tag_layout_init(&l, 70), 0);
	CHECK_EQ(l.bits, 64);
	CHECK_EQ(l.ctrl_bit, 1ULL << 63);
	return 0;
}

static int test_layout_documented(void)
{
	struct proto_tag_layout l;
	/* wide: ctrl, abort, conn 22, seq 16, NCCL tag 24 */
	proto_tag_layout_init(&l, 64);
	CHECK_EQ(l.conn_bits, 22);
	CHECK_EQ(l.seq_bits, 16);
	CHECK_EQ(l.user_bits, 24);
	CHECK_EQ(proto_tag_conn_mask(&l), 0x3fffff);
	/* narrow: conn = bits - 30, seq 12, NCCL tag 16 */
	for (unsigned b = 48; b < 64; b++) {
		proto_tag_layout_init(&l, b);
		CHECK_EQ(l.conn_bits, b - 30);
		CHECK_EQ(l.seq_bits, 12);
		CHECK_EQ(l.user_bits, 16);
	}
	proto_tag_layout_init(&l, 48);
	CHECK_EQ(proto_tag_conn_mask(&l), 0x3ffff);
	/* a conn field wider than 32 bits is masked to the 32-bit ids */
	proto_tag_layout_init(&l, 63);
	CHECK_EQ(l.conn_bits, 33);
	CHECK(proto_tag_conn_mask(&l) == 0xffffffffu);
	return 0;
}

static int test_fields_disjoint(void)
{
	struct proto_tag_layout l;
	for (unsigned b = 48; b <= 64; b++) {
		proto_tag_layout_init(&l, b);
		uint64_t user = field_mask(0, l.user_bits);
		uint64_t seq = field_mask(l.seq_shift, l.seq_bits);
		uint64_t conn = field_mask(l.conn_shift, l.conn_bits);
		uint64_t ctrl = l.ctrl_bit, abrt = l.abort_bit;
		CHECK_EQ(user & seq, 0);
		CHECK_EQ(user & conn, 0);
		CHECK_EQ(seq & conn, 0);
		CHECK_EQ((user | seq | conn) & (ctrl | abrt), 0);
		CHECK_EQ(ctrl & abrt, 0);
		/* together they cover exactly the provider's bits */
		CHECK((user | seq | conn | ctrl | abrt) == all_bits(b));
		/* the ctrl bit is the top bit, abort just below it */
		CHECK(ctrl == 1ULL << (b - 1));
		CHECK(abrt == 1ULL << (b - 2));
		/* the two kind bits sit below ctrl and clear of a 32-bit control id */
		uint64_t kinds = 3ULL << l.kind_shift;
		CHECK_EQ(kinds & ctrl, 0);
		CHECK_EQ(kinds & 0xffffffffULL, 0);
	}
	return 0;
}

static int test_data_never_ctrl(void)
{
	struct proto_tag_layout l;
	static const uint32_t conns[] = { 0, 1, 0x7ffff, 0x7fffff, 0xffffffffu };
	static const uint32_t seqs[] = { 0, 1, 0xfff, 0xffff, 0xffffffffu };
	static const int tags[] = { 0, 1, -1, INT_MIN, INT_MAX, 0xffff, 0xffffff };
	for (unsigned b = 48; b <= 64; b++) {
		proto_tag_layout_init(&l, b);
		for (size_t c = 0; c < 5; c++)
			for (size_t s = 0; s < 5; s++)
				for (size_t t = 0; t < 7; t++) {
					uint64_t tag = proto_tag_data(&l, conns[c], seqs[s], tags[t]);
					CHECK(!proto_tag_is_ctrl(&l, tag));
					CHECK_EQ(tag & l.abort_bit, 0);
					CHECK_EQ(tag & ~all_bits(b), 0); /* within the provider's bits */
				}
	}
	return 0;
}

static int test_ctrl_tags(void)
{
	struct proto_tag_layout l;
	static const uint32_t ids[] = { 1, 2, 0x12345678, 0xffffffffu };
	for (unsigned b = 48; b <= 64; b++) {
		proto_tag_layout_init(&l, b);
		for (size_t i = 0; i < 4; i++) {
			uint64_t t[3] = { proto_tag_ctrl(&l, PROTO_CTRL_CONNECT, ids[i]),
					  proto_tag_ctrl(&l, PROTO_CTRL_ACCEPT, ids[i]),
					  proto_tag_ctrl(&l, PROTO_CTRL_CTS, ids[i]) };
			for (int k = 0; k < 3; k++) {
				CHECK(proto_tag_is_ctrl(&l, t[k]));
				CHECK_EQ(t[k] & 0xffffffffULL, ids[i]);
				CHECK_EQ(t[k] & ~all_bits(b), 0);
				CHECK_EQ((t[k] >> l.kind_shift) & 3, k);
				/* nothing but ctrl, the kind and the id */
				CHECK((t[k] & ~(l.ctrl_bit | (3ULL << l.kind_shift) | 0xffffffffULL)) == 0);
				for (int j = 0; j < k; j++)
					CHECK(t[j] != t[k]);
			}
		}
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int test_distinct_and_decode(void)
{
	struct proto_tag_layout l;
	enum { NC = 6, NS = 5, NT = 6 };
	uint64_t tags[NC * NS * NT];
	for (unsigned b = 48; b <= 64; b++) {
		proto_tag_layout_init(&l, b);
		uint32_t cmax = proto_tag_conn_mask(&l);
		uint32_t smax = (uint32_t)((1ULL << l.seq_bits) - 1);
		int umax = (int)((1ULL << l.user_bits) - 1);
		const uint32_t conns[NC] = { 0, 1, 2, cmax / 2, cmax - 1, cmax };
		const uint32_t seqs[NS] = { 0, 1, 2, smax - 1, smax };
		const int utags[NT] = { 0, 1, 2, 255, umax - 1, umax };
		int n = 0;
		for (int c = 0; c < NC; c++)
			for (int s = 0; s < NS; s++)
				for (int t = 0; t < NT; t++) {
					uint64_t tag = proto_tag_data(&l, conns[c], seqs[s], utags[t]);
					tags[n++] = tag;
					/* decode back through the layout's shifts */
					uint64_t dc = (tag >> l.conn_shift) & cmax;
					uint64_t ds = (tag >> l.seq_shift) & smax;
					uint64_t dt = tag & (uint64_t)umax;
					CHECK_EQ(dc, conns[c]);
					CHECK_EQ(ds, seqs[s]);
					CHECK_EQ(dt, (uint64_t)utags[t]);
				}
		qsort(tags, (size_t)n, sizeof(tags[0]), cmp_u64);
		int dups = 0;
		for (int i = 1; i < n; i++)
			dups += tags[i] == tags[i - 1];
		if (dups)
			fprintf(stderr, "  %u bits: %d duplicate tags\n", b, dups);
		CHECK_EQ(dups, 0);
	}
	return 0;
}

static int test_fold(void)
{
	struct proto_tag_layout w, nrw;
	proto_tag_layout_init(&w, 64);
	proto_tag_layout_init(&nrw, 48);
	/* in range: unchanged */
	CHECK_EQ(proto_tag_fold(&w, 0), 0);
	CHECK_EQ(proto_tag_fold(&w, 12345), 12345);
	CHECK_EQ(proto_tag_fold(&w, 0xffffff), 0xffffff);
	CHECK_EQ(proto_tag_fold(&nrw, 0xffff), 0xffff);
	/* large: folded to the field's width */
	CHECK_EQ(proto_tag_fold(&w, (1 << 24) + 5), 5);
	CHECK_EQ(proto_tag_fold(&nrw, (1 << 16) + 5), 5);
	CHECK_EQ(proto_tag_fold(&w, INT_MAX), 0xffffff);
	CHECK_EQ(proto_tag_fold(&nrw, INT_MAX), 0xffff);
	/* negative: two's complement bits, folded */
	CHECK_EQ(proto_tag_fold(&w, -1), 0xffffff);
	CHECK_EQ(proto_tag_fold(&nrw, -1), 0xffff);
	CHECK_EQ(proto_tag_fold(&w, -2), 0xfffffe);
	CHECK_EQ(proto_tag_fold(&w, INT_MIN), 0);
	/* the data tag carries the folded tag, so a folded twin matches */
	CHECK(proto_tag_data(&w, 3, 4, -1) == proto_tag_data(&w, 3, 4, 0xffffff));
	CHECK(proto_tag_data(&nrw, 3, 4, 0x10007) == proto_tag_data(&nrw, 3, 4, 7));
	/* sequence numbers wrap within their field instead of spilling into conn */
	CHECK(proto_tag_data(&w, 3, 0x10000, 7) == proto_tag_data(&w, 3, 0, 7));
	CHECK(proto_tag_data(&nrw, 3, 0x1000, 7) == proto_tag_data(&nrw, 3, 0, 7));
	/* conn ids beyond the mask wrap too (the endpoint allocates within the mask) */
	CHECK(proto_tag_data(&w, 0x800001, 0, 0) == proto_tag_data(&w, 1, 0, 0));
	return 0;
}

/* ---- sequence table ---- */

static int test_seq_basic(void)
{
	struct proto_seq_table t = { 0 };
	struct proto_seq_entry *e = proto_seq_get(&t, 5);
	CHECK(e != NULL);
	if (!e)
		return 1;
	CHECK_EQ(e->tag, 5);
	CHECK_EQ(e->seq, 0);
	CHECK_EQ(t.n, 1);
	e->seq++;
	e->seq++;
	e = proto_seq_get(&t, 7);
	CHECK_EQ(e->tag, 7);
	CHECK_EQ(e->seq, 0); /* independent of tag 5 */
	e->seq++;
	CHECK_EQ(t.n, 2);
	e = proto_seq_get(&t, 5);
	CHECK_EQ(e->tag, 5);
	CHECK_EQ(e->seq, 2);
	CHECK_EQ(t.n, 2); /* found, not added again */
	e = proto_seq_get(&t, 7);
	CHECK_EQ(e->seq, 1);
	/* undo of a failed post: decrement brings the next get back */
	e->seq++;
	e->seq--;
	CHECK_EQ(proto_seq_get(&t, 7)->seq, 1);
	proto_seq_free(&t);
	CHECK(t.e == NULL);
	CHECK_EQ(t.n, 0);
	CHECK_EQ(t.cap, 0);
	proto_seq_free(&t); /* twice is harmless */
	/* usable again after free */
	CHECK_EQ(proto_seq_get(&t, 9)->seq, 0);
	proto_seq_free(&t);
	return 0;
}

static int test_seq_many(void)
{
	enum { N = 1000 };
	struct proto_seq_table t = { 0 };
	/* tag k gets k % 13 increments, interleaved in rounds so entries move around */
	for (int round = 0; round < 13; round++) {
		for (uint32_t k = 0; k < N; k++) {
			uint32_t tag = (k * 2654435761u) & 0xffffff; /* scattered tags */
			struct proto_seq_entry *e = proto_seq_get(&t, tag);
			CHECK(e != NULL);
			if (!e)
				return 1;
			CHECK_EQ(e->tag, tag);
			if ((int)(k % 13) > round)
				e->seq++;
		}
	}
	CHECK_EQ(t.n, N);
	CHECK(t.cap >= N);
	int bad = 0;
	for (uint32_t k = 0; k < N; k++) {
		uint32_t tag = (k * 2654435761u) & 0xffffff;
		struct proto_seq_entry *e = proto_seq_get(&t, tag);
		bad += e->seq != k % 13;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(t.n, N);
	/* every tag present exactly once */
	int dups = 0;
	for (int i = 0; i < t.n; i++)
		for (int j = 0; j < i; j++)
			dups += t.e[i].tag == t.e[j].tag;
	CHECK_EQ(dups, 0);
	proto_seq_free(&t);
	return 0;
}

static int test_seq_move_to_front(void)
{
	struct proto_seq_table t = { 0 };
	for (uint32_t tag = 1; tag <= 6; tag++) {
		struct proto_seq_entry *e = proto_seq_get(&t, tag);
		e->seq = tag * 10;
		CHECK(e == &t.e[0]); /* a new entry is at the front */
	}
	/* a lookup brings the entry to the front and keeps every count */
	static const uint32_t order[] = { 3, 1, 6, 3, 3, 2, 5, 4, 1 };
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		struct proto_seq_entry *e = proto_seq_get(&t, order[i]);
		CHECK(e == &t.e[0]);
		CHECK_EQ(e->tag, order[i]);
		CHECK_EQ(e->seq, order[i] * 10);
		for (int k = 0; k < t.n; k++)
			CHECK_EQ(t.e[k].seq, t.e[k].tag * 10);
	}
	CHECK_EQ(t.n, 6);
	/* a new tag after moves: the old front entry is kept, not overwritten */
	struct proto_seq_entry *e = proto_seq_get(&t, 99);
	CHECK_EQ(e->seq, 0);
	CHECK_EQ(t.n, 7);
	for (uint32_t tag = 1; tag <= 6; tag++)
		CHECK_EQ(proto_seq_get(&t, tag)->seq, tag * 10);
	proto_seq_free(&t);
	return 0;
}

/* Stale CTS detection: behind is exactly the half window before next,
 * across the wrap of the seq field. */
static int test_seq_behind(void)
{
	const uint32_t mask = 0xffff;
	CHECK(!proto_seq_behind(0, 0, mask));      /* nothing sent yet */
	CHECK(proto_seq_behind(1, 0, mask));       /* seq 0 was sent */
	CHECK(!proto_seq_behind(1, 1, mask));      /* the next one */
	CHECK(!proto_seq_behind(1, 2, mask));      /* ahead: announced early */
	CHECK(proto_seq_behind(0x10000, 0xffff, mask)); /* across the wrap */
	CHECK(proto_seq_behind(0x10002, 0x0001, mask));
	CHECK(!proto_seq_behind(0x10002, 0x0002, mask));
	int behind = 0;
	for (uint32_t seq = 0; seq <= mask; seq++)
		behind += proto_seq_behind(70000, seq, mask);
	CHECK_EQ(behind, 32768);
	return 0;
}

static const struct unit_test tests[] = {
	TEST_ENTRY(test_seq_behind, "stale CTS window across the seq wrap"),
	TEST_ENTRY(test_layout_init_bounds, "layout init rejects < 48 bits, accepts 48..64, clamps > 64"),
	TEST_ENTRY(test_layout_documented, "field widths are the documented wide and narrow ones"),
	TEST_ENTRY(test_fields_disjoint, "fields do not overlap, cover the bits, ctrl is the top bit"),
	TEST_ENTRY(test_data_never_ctrl, "data tags never have the ctrl bit and fit the provider's bits"),
	TEST_ENTRY(test_ctrl_tags, "control tags: ctrl bit, direction bit, id in the low 32 bits"),
	TEST_ENTRY(test_distinct_and_decode, "distinct (conn, seq, tag) give distinct, decodable tags"),
	TEST_ENTRY(test_fold, "NCCL tags fold (negative, large); seq and conn wrap in their fields"),
	TEST_ENTRY(test_seq_basic, "per-tag counters are independent; undo by decrement; free"),
	TEST_ENTRY(test_seq_many, "1000 tags: the table grows and every count survives"),
	TEST_ENTRY(test_seq_move_to_front, "move-to-front keeps every count right"),
};

int main(int argc, char **argv)
{
	return unit_main(tests, argc, argv);
}
