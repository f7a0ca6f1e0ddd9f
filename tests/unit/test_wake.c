/*
 * test_wake.c - when a posted receive wakes its rail's progress thread. NCCL
 * posts every receive with its whole slot, so the posted size says nothing
 * about the message: a receive counts as bulk (ofi_op.bulk, its endpoint's
 * bulk count) only when it may take a message above the eager limit and the
 * connection's last message was above it. Checked over a sequence of small
 * and large messages (bytes and sizes too), and every endpoint's bulk count
 * back at 0 once nothing is in flight. The plugin's own code connected to
 * itself, with 2 rails (their threads on).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "proto/proto.h"
#include "unit.h"
#include "unit_pair.h"

static struct unit_pair P;

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(seed * 37 + i * 11 + (i >> 10));
}

/* One message of size bytes into a cap-byte receive; checks whether the
 * receive was posted as bulk (want_bulk), the bytes and both sizes. */
static int one_message(size_t size, size_t cap, unsigned seed, bool want_bulk)
{
	unsigned char *out = malloc(size ? size : 1), *in = malloc(cap);
	CHECK(out && in);
	fill(out, size, seed);
	memset(in, 0xee, cap);
	void *smh = NULL, *rmh = NULL, *rreq = NULL, *sreq = NULL, *data = in;
	int tag = 5;
	CHECK_EQ(net_reg_mr(P.sc, out, size ? size : 1, NCCL_PTR_HOST, &smh), 0);
	CHECK_EQ(net_reg_mr(P.rc, in, cap, NCCL_PTR_HOST, &rmh), 0);
	CHECK_EQ(net_irecv(P.rc, 1, &data, &cap, &tag, &rmh, &rreq), 0);
	CHECK(rreq != NULL);
	struct proto_recv_req *rq = container_of((struct proto_req *)rreq, struct proto_recv_req, h);
	struct proto_comm *r = rq->h.comm;
	if (!r->dev->plan.writes_only) {
		CHECK_EQ(rq->h.nposted, 1);
		if (rq->ops[0].bulk != want_bulk) {
			printf("  receive of %zu for a message of %zu (seed %u): bulk %d, expected %d\n",
			       cap, size, seed, rq->ops[0].bulk, want_bulk);
			CHECK_EQ(rq->ops[0].bulk, want_bulk);
		}
		CHECK(atomic_load(&rq->ops[0].ep->bulk) >= (want_bulk ? 1 : 0));
	}
	int rres = 0, rsize = -1, rdone = 0;
	double end = unit_now_s() + 10;
	while (!sreq && unit_now_s() < end) {
		CHECK_EQ(net_isend(P.sc, out, size, tag, smh, &sreq), 0);
		if (!sreq && !rdone)
			CHECK_EQ(net_test(rreq, &rdone, &rsize), 0);
	}
	CHECK(sreq != NULL);
	int sres = 0, ssize = -1;
	CHECK(unit_pair_test_until(sreq, 10, &sres, &ssize));
	CHECK_EQ(sres, 0);
	CHECK_EQ((size_t)ssize, size);
	if (!rdone)
		CHECK(unit_pair_test_until(rreq, 10, &rres, &rsize));
	CHECK_EQ(rres, 0);
	CHECK_EQ((size_t)rsize, size);
	CHECK(memcmp(in, out, size) == 0);
	for (size_t i = size; i < cap; i++)
		CHECK_EQ(in[i], 0xee);
	CHECK_EQ(net_dereg_mr(P.sc, smh), 0);
	CHECK_EQ(net_dereg_mr(P.rc, rmh), 0);
	free(out);
	free(in);
	return 0;
}

/* Every rail's bulk count at 0: nothing in flight keeps a thread awake. */
static int rails_idle(void)
{
	struct proto_comm *cs[] = { proto_comm_from(P.sc, PROTO_SEND),
				    proto_comm_from(P.rc, PROTO_RECV) };
	for (int j = 0; j < 2; j++)
		for (int k = 0; k < cs[j]->nrails; k++)
			CHECK_EQ(atomic_load(&cs[j]->rails[k]->bulk), 0);
	return 0;
}

static int test_wake_follows_sizes(void)
{
	struct proto_comm *r = proto_comm_from(P.rc, PROTO_RECV);
	CHECK(r != NULL);
	size_t eager = r->dev->plan.eager_max;
	size_t big = eager * 4 > (256u << 10) ? eager * 4 : 256u << 10, cap = 2 * big;
	size_t small = eager > 64 ? eager / 2 : 0;
	/* a new connection has had no large message: the first receive sleeps */
	struct {
		size_t size;
		bool bulk;
	} seq[] = { { small, false }, { big, false },   { big, true },  { eager, true },
		    { small, false }, { eager + 1, false }, { 1, true }, { big, false },
		    { big, true },    { 0, true },       { big, false } };
	for (size_t k = 0; k < sizeof(seq) / sizeof(seq[0]); k++) {
		CHECK_EQ(one_message(seq[k].size, cap, (unsigned)k, seq[k].bulk), 0);
		CHECK_EQ(rails_idle(), 0);
	}
	/* a receive no larger than the eager limit never wakes the thread,
	 * whatever came before */
	CHECK_EQ(one_message(big, cap, 50, true), 0);
	CHECK_EQ(one_message(eager, eager ? eager : 1, 51, false), 0);
	CHECK_EQ(rails_idle(), 0);
	return 0;
}

static const struct unit_test tests[] = {
	TEST_ENTRY(test_wake_follows_sizes,
		   "a receive wakes its rail's thread only after a message above the eager "
		   "limit; bytes, sizes, and no bulk count left behind"),
};

int main(int argc, char **argv)
{
	int ret = unit_pair_open(&P);
	if (ret)
		return ret;
	ret = unit_run(tests, (int)(sizeof(tests) / sizeof(tests[0])), argc, argv);
	unit_pair_close(&P);
	return ret;
}
