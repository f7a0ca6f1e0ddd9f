/*
 * test_revoke.c - a receive comm that closes revokes the buffers it announced
 * for RMA writes: close returns only once no write of its sender can still
 * land there. NCCL may free (or, where it never deregistered the buffer,
 * reuse) that memory as soon as close returns; here the buffer is replaced
 * by a canary mapping at the same address, still registered, and the canary
 * must survive whatever the sender does next.
 *   - close with a write on its way: close waits for it; the send completes;
 *   - close before the sender wrote (the CTS reached it): the sender's isend
 *     then completes without writing (the message is dropped, as a tagged
 *     send to a closed receive comm is), and nothing is written;
 *   - close with nothing announced: returns at once.
 * Runs the plugin connected to itself with NCCL_FABRIC_RMA=1 (CMakeLists sets
 * rails too); exit 77 where the provider has no RMA writes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "core/core.h"
#include "proto/proto.h"
#include "unit.h"
#include "unit_pair.h"

static struct unit_pair pair;

#define BIG ((size_t)64 << 20)
#define CANARY 0xa5

static void *map(size_t len, void *at)
{
	void *p = mmap(at, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED : 0), -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* Replaces [p, p+len) with a fresh mapping full of the canary, as memory
 * NCCL freed and something else took would be. */
static int recycle(void *p, size_t len)
{
	if (map(len, p) != p)
		return 0;
	memset(p, CANARY, len);
	return 1;
}

static size_t canary_broken(const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != CANARY)
			return i + 1;
	return 0;
}

/* Runs the sender (and the endpoints the pair shares) for a while. */
static void drive(void *sreq, double seconds, int *done, int *res, int *size)
{
	double end = unit_now_s() + seconds;
	while (unit_now_s() < end) {
		if (sreq && !*done && !*res)
			*res = net_test(sreq, done, size);
		else {
			struct timespec ts = { 0, 1000000 };
			nanosleep(&ts, NULL);
		}
	}
}

/* A fresh pair whose receiver announced one BIG buffer (the CTS is out). */
struct setup {
	void *sc, *rc, *in, *out, *rmh, *smh, *rreq;
};

static int setup_open(struct setup *t)
{
	memset(t, 0, sizeof(*t));
	if (unit_pair_connect(pair.lcomm, pair.handle, &t->sc, &t->rc, 10))
		return 0;
	struct proto_comm *c = proto_comm_from(t->rc, PROTO_RECV);
	if (!c || !c->dev->dom->rma_write)
		return 0;
	t->in = map(BIG, NULL);
	t->out = map(BIG, NULL);
	if (!t->in || !t->out)
		return 0;
	memset(t->out, 0x3c, BIG);
	if (net_reg_mr(t->rc, t->in, BIG, NCCL_PTR_HOST, &t->rmh) ||
	    net_reg_mr(t->sc, t->out, BIG, NCCL_PTR_HOST, &t->smh))
		return 0;
	size_t size = BIG;
	int tag = 9;
	if (net_irecv(t->rc, 1, &t->in, &size, &tag, &t->rmh, &t->rreq) || !t->rreq)
		return 0;
	struct proto_recv_req *q = container_of((struct proto_req *)t->rreq, struct proto_recv_req, h);
	return atomic_load(&q->rma_expect) == 1u;
}

/* isend until the CTS let it go (or it failed); the request or NULL. */
static void *send_big(struct setup *t, int *rc)
{
	void *req = NULL;
	double end = unit_now_s() + 10;
	int done = 0, size = 0;
	do {
		*rc = net_isend(t->sc, t->out, BIG, 9, t->smh, &req);
		/* the receive's test() posts what the provider did not take at once (its CTS) */
		if (!*rc && !req && t->rreq)
			(void)net_test(t->rreq, &done, &size);
	} while (!*rc && !req && unit_now_s() < end);
	return req;
}

static void setup_close(struct setup *t)
{
	if (t->sc)
		net_close_send(t->sc);
	if (t->smh)
		net_dereg_mr(NULL, t->smh);
	if (t->rmh)
		net_dereg_mr(NULL, t->rmh);
	if (t->in)
		munmap(t->in, BIG);
	if (t->out)
		munmap(t->out, BIG);
}

static int test_close_with_write_in_flight(void)
{
	struct setup t;
	CHECK(setup_open(&t));
	int rc = 0;
	void *sreq = send_big(&t, &rc);
	CHECK_EQ(rc, 0);
	CHECK(sreq != NULL);
	/* the write is on its way: close now, then reuse the memory */
	double t0 = unit_now_s();
	CHECK_EQ(net_close_recv(t.rc), 0);
	double took = unit_now_s() - t0;
	t.rc = NULL;
	CHECK(recycle(t.in, BIG));
	int done = 0, res = 0, size = -1;
	drive(sreq, 0.5, &done, &res, &size);
	printf("  close took %.3f s; send done %d, result %d, size %d\n", took, done, res, size);
	size_t at = canary_broken(t.in, BIG);
	if (at)
		fprintf(stderr, "  byte %zu of the recycled buffer was written after close\n", at - 1);
	CHECK_EQ(at, 0);
	CHECK(done);
	CHECK_EQ(res, 0);
	CHECK_EQ(size, (int)BIG);
	CHECK(took < 5.5);
	setup_close(&t);
	return 0;
}

static int test_close_before_the_write(void)
{
	struct setup t;
	CHECK(setup_open(&t));
	/* let the CTS reach the sender's table first */
	int done = 0, res = 0, size = -1;
	for (int i = 0; i < 200; i++) {
		(void)net_test(t.rreq, &done, &size);
		drive(NULL, 0.001, &done, &res, &size);
	}
	(void)proto_comm_progress(proto_comm_from(t.sc, PROTO_SEND));
	double t0 = unit_now_s();
	CHECK_EQ(net_close_recv(t.rc), 0);
	double took = unit_now_s() - t0;
	t.rc = NULL;
	CHECK(recycle(t.in, BIG));
	/* the goodbye reaches the sender before its isend: nothing is written */
	drive(NULL, 0.2, &done, &res, &size);
	(void)proto_comm_progress(proto_comm_from(t.sc, PROTO_SEND));
	int rc = 0;
	void *sreq = send_big(&t, &rc);
	if (sreq)
		drive(sreq, 0.5, &done, &res, &size);
	printf("  close took %.3f s; isend %d, request %p, done %d, result %d\n", took, rc, sreq,
	       done, res);
	CHECK_EQ(canary_broken(t.in, BIG), 0);
	CHECK_EQ(rc, 0);
	CHECK(sreq != NULL);
	CHECK(done);
	CHECK_EQ(res, 0);
	CHECK_EQ(atomic_load(&container_of(proto_comm_from(t.sc, PROTO_SEND), struct proto_send, c)->written), 0u);
	CHECK(took < 1.0);
	setup_close(&t);
	return 0;
}

static int test_close_with_nothing_announced(void)
{
	void *sc = NULL, *rc = NULL;
	CHECK_EQ(unit_pair_connect(pair.lcomm, pair.handle, &sc, &rc, 10), 0);
	double t0 = unit_now_s();
	CHECK_EQ(net_close_recv(rc), 0);
	double took = unit_now_s() - t0;
	CHECK_EQ(net_close_send(sc), 0);
	printf("  close took %.3f s\n", took);
	CHECK(took < 0.5);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct unit_test tests[] = {
		TEST_ENTRY(test_close_with_write_in_flight,
			   "close with a write on its way: waits for it; a canary in the buffer's "
			   "place survives; the send completes"),
		TEST_ENTRY(test_close_before_the_write,
			   "close before the sender wrote: its isend completes, nothing is written"),
		TEST_ENTRY(test_close_with_nothing_announced, "close with nothing announced: at once"),
	};
	int ret = unit_pair_open(&pair);
	if (ret)
		return ret;
	struct proto_comm *c = proto_comm_from(pair.rc, PROTO_RECV);
	if (!c || !c->dev->dom->rma_write) {
		printf("SKIP: the provider offers no RMA writes with CQ data here\n");
		unit_pair_close(&pair);
		return 77;
	}
	ret = unit_run(tests, (int)(sizeof(tests) / sizeof(tests[0])), argc, argv);
	unit_pair_close(&pair);
	return ret;
}
