/*
 * test_pieces.c - the receiver's checks on a striped RMA write's notices
 * (proto_rma_landed): each piece's CQ data comes from the wire, so a notice
 * with more pieces than the connection has rails, one whose pieces disagree
 * on the size or the count, one larger than the buffer, or one for no such
 * connection or buffer is dropped, counted and WARNed, and never completes
 * a buffer; the buffer completes when the last of its agreeing pieces lands.
 * The notices are handed to the handler as the endpoint's CQ reader would.
 * Runs the plugin's own code connected to itself with NCCL_FABRIC_RMA=1 and
 * 2 rails; exit 77 where the provider has no RMA writes or one rail.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "log/log.h"
#include "proto/proto.h"
#include "unit.h"
#include "unit_pair.h"

static void *lcomm, *sc, *rc;

#define MAXW 64
static char warns[MAXW][512];
static int nwarns;

static void capture_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
			   const char *fmt, ...)
{
	(void)flags, (void)file, (void)line;
	if (level != NCCL_LOG_WARN || nwarns >= MAXW)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(warns[nwarns++], sizeof(warns[0]), fmt, ap);
	va_end(ap);
}

static int warned(const char *text)
{
	for (int i = 0; i < nwarns; i++)
		if (strstr(warns[i], text))
			return 1;
	return 0;
}

/* Hands ep the notice imm as its CQ reader would; true when it was dropped,
 * counted, and WARNed with why (the WARN is limited to one a second per
 * place: each case waits that out first). */
static int expect_drop(struct ofi_ep *ep, uint64_t imm, const char *why)
{
	struct timespec ts = { 1, 50000000 };
	nanosleep(&ts, NULL);
	unsigned before = atomic_load(&ep->dropped);
	nwarns = 0;
	log_set_logger(capture_logger);
	proto_rma_landed(ep, ep->rw_arg, imm, 0);
	log_set_logger(NULL);
	for (int i = 0; i < nwarns; i++)
		fprintf(stderr, "  WARN: %s\n", warns[i]);
	return atomic_load(&ep->dropped) == before + 1 && warned(why);
}

static int test_forged_pieces(void)
{
	struct proto_comm *c = proto_comm_from(rc, PROTO_RECV);
	CHECK(c != NULL);
	struct proto_recv *r = container_of(c, struct proto_recv, c);
	struct proto_device *dev = c->dev;
	struct ofi_ep *home = c->rails[c->home], *other = c->rails[(c->home + 1) % c->nrails];
	size_t cap = 256 << 10;
	char *in = malloc(cap);
	CHECK(in != NULL);
	void *mh = NULL, *req = NULL, *data = in;
	int tag = 5;
	CHECK_EQ(net_reg_mr(rc, in, cap, NCCL_PTR_HOST, &mh), 0);
	CHECK_EQ(net_irecv(rc, 1, &data, &cap, &tag, &mh, &req), 0);
	CHECK(req != NULL);
	struct proto_recv_req *q = container_of((struct proto_req *)req, struct proto_recv_req, h);
	CHECK_EQ(atomic_load(&q->rma_expect), 1u); /* announced for an RMA write */
	uint32_t slot = (uint32_t)(q - r->reqs) << 3, id = r->id;
	unsigned dropped0 = atomic_load(&home->dropped) + atomic_load(&other->dropped);

	/* a first agreeing piece, before the forgeries that must not disturb it */
	proto_rma_landed(other, dev, proto_imm(id, slot, 1000, 2), 0);
	CHECK(expect_drop(other, proto_imm(id, slot, 1000, (uint32_t)c->nrails + 1),
			  "more pieces than the connection has rails"));
	CHECK(expect_drop(other, proto_imm(id ^ 0x1000, slot, 1000, 2), "no such connection"));
	CHECK(expect_drop(other, proto_imm(id, slot | 5, 1000, 2), "no buffer waits for it"));
	CHECK(expect_drop(other, proto_imm(id, slot, (uint32_t)cap + 1, 2), "larger than the buffer"));
	CHECK(expect_drop(home, proto_imm(id, slot, 2000, 2), "its pieces disagree on the message"));
	CHECK(expect_drop(home, proto_imm(id, slot, 1000, 1), "its pieces disagree on the message"));
	unsigned dropped = atomic_load(&home->dropped) + atomic_load(&other->dropped) - dropped0;
	CHECK_EQ(dropped, 6u);
	/* one agreeing piece of two: the buffer still waits */
	int res = 0, size = -1;
	CHECK(!unit_pair_test_until(req, 0.2, &res, &size));
	CHECK_EQ(res, 0);
	CHECK_EQ(atomic_load(&q->rma_done), 0u);

	/* the second agreeing piece, on the other rail: complete, with its size */
	proto_rma_landed(other, dev, proto_imm(id, slot, 1000, 2), 0);
	CHECK(unit_pair_test_until(req, 10, &res, &size));
	CHECK_EQ(res, 0);
	CHECK_EQ(size, 1000);
	/* a late copy of a piece names a buffer that no longer waits */
	CHECK(expect_drop(other, proto_imm(id, slot, 1000, 2), "no buffer waits for it"));
	CHECK_EQ(net_dereg_mr(rc, mh), 0);
	free(in);
	return 0;
}

static const struct unit_test tests[] = {
	TEST_ENTRY(test_forged_pieces, "striped-write notices: too many pieces, disagreeing, "
				       "oversized, unknown: dropped; agreeing pieces complete"),
};

int main(int argc, char **argv)
{
	struct unit_pair p;
	int ret = unit_pair_open(&p);
	if (ret)
		return ret;
	struct proto_comm *c = proto_comm_from(p.rc, PROTO_RECV);
	if (!c || !c->dev->dom->rma_write || c->nrails < 2) {
		printf("SKIP: %s (provider %s)\n",
		       c && !c->dev->dom->rma_write ?
			       "no RMA writes: they need NCCL_FABRIC_RMA=1 and a provider with "
			       "RMA writes and CQ data" :
			       "the connection has one rail (NCCL_FABRIC_RAILS=2 is needed)",
		       c ? c->dev->provider : "?");
		unit_pair_close(&p);
		return 77;
	}
	lcomm = p.lcomm;
	sc = p.sc;
	rc = p.rc;
	ret = unit_run(tests, (int)(sizeof(tests) / sizeof(tests[0])), argc, argv);
	unit_pair_close(&p);
	return ret;
}
