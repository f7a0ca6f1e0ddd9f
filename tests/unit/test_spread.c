/*
 * test_spread.c - a connection's messages on its rails in turn
 * (NCCL_FABRIC_SPREAD): the k-th message of a tag is posted, by the sender
 * and by the receiver, on rail home + k; eager messages and those after the
 * CTS arrive whole, with their sizes, whatever rail carried them; two tags
 * count apart; and the handshake settles it: a connection spreads only when
 * the connector offered it and the listener agreed, else every message takes
 * the home rail. The plugin's own code connected to itself, with
 * NCCL_FABRIC_RAILS=3; exit 77 where the device has one rail.
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
		p[i] = (unsigned char)(seed * 131 + i * 7 + (i >> 9));
}

/* One message of size bytes with tag from sc to rc; checks the rail both
 * ends posted it on (want), the bytes and the sizes test() reports. */
static int one_message(void *sc, void *rc, int tag, size_t size, size_t cap, unsigned seed,
		       int want)
{
	struct proto_comm *s = proto_comm_from(sc, PROTO_SEND), *r = proto_comm_from(rc, PROTO_RECV);
	unsigned char *out = malloc(size ? size : 1), *in = malloc(cap);
	CHECK(out && in);
	fill(out, size, seed);
	memset(in, 0xee, cap);
	void *smh = NULL, *rmh = NULL, *rreq = NULL, *sreq = NULL, *data = in;
	CHECK_EQ(net_reg_mr(sc, out, size ? size : 1, NCCL_PTR_HOST, &smh), 0);
	CHECK_EQ(net_reg_mr(rc, in, cap, NCCL_PTR_HOST, &rmh), 0);
	CHECK_EQ(net_irecv(rc, 1, &data, &cap, &tag, &rmh, &rreq), 0);
	CHECK(rreq != NULL);
	struct proto_recv_req *rq = container_of((struct proto_req *)rreq, struct proto_recv_req, h);
	CHECK_EQ(rq->rail[0], want);
	if (!r->dev->plan.writes_only)
		CHECK(rq->ops[0].ep == r->rails[want]);
	/* a message above the eager limit waits for the CTS: test the receive
	 * meanwhile, as NCCL's proxy does */
	int rres = 0, rsize = -1, rdone = 0;
	double end = unit_now_s() + 10;
	while (!sreq && unit_now_s() < end) {
		CHECK_EQ(net_isend(sc, out, size, tag, smh, &sreq), 0);
		if (!sreq && !rdone)
			CHECK_EQ(net_test(rreq, &rdone, &rsize), 0);
	}
	CHECK(sreq != NULL);
	struct proto_send_req *sq = container_of((struct proto_req *)sreq, struct proto_send_req, h);
	CHECK_EQ(sq->rail, want);
	CHECK(sq->op.ep == s->rails[want]);
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
		CHECK_EQ(in[i], 0xee); /* nothing past the message */
	CHECK_EQ(net_dereg_mr(sc, smh), 0);
	CHECK_EQ(net_dereg_mr(rc, rmh), 0);
	free(out);
	free(in);
	return 0;
}

static int test_in_turn(void)
{
	struct proto_comm *s = proto_comm_from(P.sc, PROTO_SEND), *r = proto_comm_from(P.rc, PROTO_RECV);
	CHECK(s && r);
	CHECK(s->spread && r->spread);
	CHECK_EQ(s->nrails, r->nrails);
	CHECK_EQ(s->home, r->home);
	size_t eager = r->dev->plan.eager_max, cap = 256 << 10;
	/* eager, after the CTS, empty: each tag's k-th message on home + k */
	size_t sizes[] = { eager ? eager / 2 : 0, 200 << 10, 0, eager, eager + 1, 7, cap };
	int n = (int)(sizeof(sizes) / sizeof(sizes[0]));
	for (int k = 0; k < 2 * n; k++) {
		int tag = 3 + (k & 1); /* two tags, interleaved: each counts its own */
		int seq = k / 2;
		int want = (s->home + seq) % s->nrails;
		CHECK_EQ(one_message(P.sc, P.rc, tag, sizes[k % n], cap, (unsigned)k, want), 0);
	}
	return 0;
}

/* A new pair on the same listener, with the device's spread setting as given
 * when the connector asks and when the listener answers. */
static int pair_with(bool offer, bool agree, void **sc, void **rc)
{
	struct proto_comm *l = proto_comm_from(P.lcomm, PROTO_LISTEN);
	CHECK(l != NULL);
	struct proto_device *dev = l->dev;
	bool was = dev->plan.spread;
	*sc = *rc = NULL;
	dev->plan.spread = offer;
	CHECK_EQ(net_connect(0, P.handle, sc), 0); /* the CONNECT, with its offer */
	dev->plan.spread = agree;
	CHECK_EQ(unit_pair_connect(P.lcomm, P.handle, sc, rc, 30), 0);
	dev->plan.spread = was;
	return 0;
}

static int test_handshake(void)
{
	static const bool cases[][2] = { { true, false }, { false, true }, { false, false } };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		void *sc = NULL, *rc = NULL;
		CHECK_EQ(pair_with(cases[i][0], cases[i][1], &sc, &rc), 0);
		struct proto_comm *s = proto_comm_from(sc, PROTO_SEND), *r = proto_comm_from(rc, PROTO_RECV);
		CHECK(s && r);
		CHECK(!s->spread && !r->spread);
		CHECK_EQ(s->home, r->home);
		/* every message on the home rail, both ends */
		for (int k = 0; k < 4; k++)
			CHECK_EQ(one_message(sc, rc, 9, k & 1 ? 100 << 10 : 64, 128 << 10,
					     (unsigned)k, s->home), 0);
		CHECK_EQ(net_close_send(sc), 0);
		CHECK_EQ(net_close_recv(rc), 0);
	}
	/* offered and agreed: spread again */
	void *sc = NULL, *rc = NULL;
	CHECK_EQ(pair_with(true, true, &sc, &rc), 0);
	struct proto_comm *s = proto_comm_from(sc, PROTO_SEND);
	CHECK(s && s->spread);
	for (int k = 0; k < 4; k++)
		CHECK_EQ(one_message(sc, rc, 9, 64, 1024, (unsigned)k, (s->home + k) % s->nrails), 0);
	CHECK_EQ(net_close_send(sc), 0);
	CHECK_EQ(net_close_recv(rc), 0);
	return 0;
}

static const struct unit_test tests[] = {
	TEST_ENTRY(test_in_turn, "each tag's k-th message on rail home + k at both ends; eager, "
				 "after the CTS and empty messages arrive whole with their sizes"),
	TEST_ENTRY(test_handshake, "spread only when offered and agreed; otherwise every message "
				   "on the home rail"),
};

int main(int argc, char **argv)
{
	int ret = unit_pair_open(&P);
	if (ret)
		return ret;
	struct proto_comm *c = proto_comm_from(P.rc, PROTO_RECV);
	if (!c || c->nrails < 2) {
		printf("SKIP: the connection has one rail (NCCL_FABRIC_RAILS=3 is needed; provider "
		       "%s)\n", c ? c->dev->provider : "?");
		unit_pair_close(&P);
		return 77;
	}
	ret = unit_run(tests, (int)(sizeof(tests) / sizeof(tests[0])), argc, argv);
	unit_pair_close(&P);
	return ret;
}
