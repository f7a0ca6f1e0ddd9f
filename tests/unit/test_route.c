/*
 * test_route.c - control messages travel untagged and the endpoint hands
 * each to the pool its route (first 8 bytes) names. A domain of its own over
 * the provider NCCL_FABRIC_PROVIDER names (the plugin's fab layer, no proto),
 * one endpoint sending to itself: two pools with small buffers, more
 * messages than buffers, so messages land in either pool's buffers and must
 * still reach the right handler whole; a message with no known route, or too
 * short to have one, is dropped and counted. Exit 77 without the provider.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "unit.h"

#define ROUTE_A (0x8000000000000000ULL | 1ULL << 40)
#define ROUTE_B (0x8000000000000000ULL | 2ULL << 40)
#define ROUTE_NONE (0x8000000000000000ULL | 3ULL << 40)
#define PER_POOL 3
#define MSGS 24

struct msg {
	uint64_t route;
	uint32_t seq;
	uint32_t check; /* seq * 2654435761 + route's id */
	char fill[40];
};

struct seen {
	int n;
	int bad;
	unsigned char got[MSGS];
};

static struct ofi_domain *dom;
static struct ofi_ep *ep;
static fi_addr_t self;
static struct seen seen_a, seen_b;
static int sends_done;

static void handler(struct ofi_ep *e, void *arg, const void *buf, size_t len, uint64_t tag)
{
	struct seen *s = arg;
	struct msg m;
	(void)e;
	if (len != sizeof(m)) {
		s->bad++;
		return;
	}
	memcpy(&m, buf, sizeof(m));
	uint32_t id = (uint32_t)tag;
	if (m.route != tag || m.seq >= MSGS || m.check != m.seq * 2654435761u + id ||
	    m.fill[0] != (char)m.seq || m.fill[39] != (char)~m.seq)
		s->bad++;
	else
		s->got[m.seq]++;
	s->n++;
}

static void send_done(struct ofi_op *op, const struct fi_cq_tagged_entry *e,
		      const struct fi_cq_err_entry *err)
{
	(void)op;
	(void)e;
	if (!err)
		sends_done++;
}

/* Posts buf to ourselves and progresses until the provider took it. */
static int post(struct ofi_op *op, const void *buf, size_t len)
{
	memset(op, 0, sizeof(*op));
	op->complete = send_done;
	op->ep = ep;
	double end = unit_now_s() + 10;
	for (;;) {
		ssize_t rc = ofi_ep_send(ep, buf, len, NULL, self, &op->ctx);
		if (rc == 0)
			return 0;
		if (rc != -FI_EAGAIN || unit_now_s() > end)
			return (int)rc;
		(void)ofi_ep_progress(ep);
	}
}

static void progress_until(int *counter, int want)
{
	double end = unit_now_s() + 10;
	while (*counter < want && unit_now_s() < end)
		(void)ofi_ep_progress(ep);
}

static int test_routes(void)
{
	static struct msg out[MSGS];
	static struct ofi_op ops[MSGS];
	unsigned dropped0 = atomic_load(&ep->dropped);
	for (int i = 0; i < MSGS; i++) {
		uint32_t id = 100 + (uint32_t)i;
		out[i].route = (i % 2 ? ROUTE_B : ROUTE_A) | id;
		out[i].seq = (uint32_t)i;
		out[i].check = (uint32_t)i * 2654435761u + id;
		memset(out[i].fill, 0x5a, sizeof(out[i].fill));
		out[i].fill[0] = (char)i;
		out[i].fill[39] = (char)~i;
		CHECK_EQ(post(&ops[i], &out[i], sizeof(out[i])), 0);
		(void)ofi_ep_progress(ep);
	}
	progress_until(&sends_done, MSGS);
	CHECK_EQ(sends_done, MSGS);
	double end = unit_now_s() + 10;
	while (seen_a.n + seen_b.n < MSGS && unit_now_s() < end)
		(void)ofi_ep_progress(ep);
	/* 24 messages through 6 buffers: each reached its own pool's handler,
	 * whole, once */
	CHECK_EQ(seen_a.n, MSGS / 2);
	CHECK_EQ(seen_b.n, MSGS / 2);
	CHECK_EQ(seen_a.bad + seen_b.bad, 0);
	for (int i = 0; i < MSGS; i++)
		CHECK_EQ(i % 2 ? seen_b.got[i] : seen_a.got[i], 1);
	CHECK_EQ(atomic_load(&ep->dropped), dropped0);
	return 0;
}

static int test_unknown_and_short(void)
{
	static struct msg stray;
	static uint32_t tiny = 0xdeadbeef;
	static struct ofi_op ops[2];
	memset(&stray, 0, sizeof(stray));
	stray.route = ROUTE_NONE | 7;
	unsigned dropped0 = atomic_load(&ep->dropped);
	int before = seen_a.n + seen_b.n, sent0 = sends_done;
	CHECK_EQ(post(&ops[0], &stray, sizeof(stray)), 0);
	CHECK_EQ(post(&ops[1], &tiny, sizeof(tiny)), 0);
	progress_until(&sends_done, sent0 + 2);
	double end = unit_now_s() + 10;
	while (atomic_load(&ep->dropped) < dropped0 + 2 && unit_now_s() < end)
		(void)ofi_ep_progress(ep);
	CHECK_EQ(atomic_load(&ep->dropped), dropped0 + 2);
	CHECK_EQ(seen_a.n + seen_b.n, before); /* no handler saw them */
	/* the pools still take messages afterwards */
	static struct msg again;
	static struct ofi_op op;
	memset(&again, 0, sizeof(again));
	again.route = ROUTE_A | 5;
	again.seq = 3;
	again.check = 3 * 2654435761u + 5;
	again.fill[0] = 3;
	again.fill[39] = (char)~3;
	seen_a.got[3] = 0;
	CHECK_EQ(post(&op, &again, sizeof(again)), 0);
	int want = seen_a.n + 1;
	progress_until(&seen_a.n, want);
	CHECK_EQ(seen_a.n, want);
	CHECK_EQ(seen_a.got[3], 1);
	return 0;
}

static const struct unit_test tests[] = {
	TEST_ENTRY(test_routes, "24 messages, two pools of 3 buffers: each reaches its route's handler whole"),
	TEST_ENTRY(test_unknown_and_short, "no known route, or under 8 bytes: dropped and counted; pools go on"),
};

int main(int argc, char **argv)
{
	void *ctx = NULL;
	if (net_init(&ctx, NULL) != 0 || core_plugin_get()->ndevs < 1) {
		printf("SKIP: no usable provider (NCCL_FABRIC_PROVIDER=%s)\n",
		       getenv("NCCL_FABRIC_PROVIDER") ? getenv("NCCL_FABRIC_PROVIDER") : "");
		return 77;
	}
	struct ofi_domain_attr attr = {
		.info = core_plugin_get()->devs[0].info,
		.nep = 1,
		.cq_batch = 16,
		.name = "route-test",
	};
	if (ofi_domain_open(&attr, &dom))
		return 1;
	ep = dom->eps[0];
	if (ofi_ep_resolve(ep, ep->name, ep->namelen, &self))
		return 1;
	if (ofi_ep_rx_pool_start(ep, ROUTE_A, 0xffffffffULL, PER_POOL, sizeof(struct msg), handler,
				 &seen_a) ||
	    ofi_ep_rx_pool_start(ep, ROUTE_B, 0xffffffffULL, PER_POOL, sizeof(struct msg), handler,
				 &seen_b))
		return 1;
	int ret = unit_main(tests, argc, argv);
	ofi_domain_close(dom);
	net_finalize(ctx);
	return ret;
}
