/*
 * cases_traffic.c - grouped receives, requests in flight, both directions,
 * many connections, a ring, threads, and listen-comm reuse.
 */
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

static int ck_link_0to1(ck_t *ck, void **sc, void **rc)
{
	int me = ck->r->rank;
	return fh_link(ck->r, ck->net, ck->dev, me == 0 ? 1 : -1, me == 1 ? 0 : -1, sc, rc);
}

/* ------------------------------------------------------------ grouped receives */

/* Turn a receive side's n one-buffer ops into grouped receives of `group`
 * buffers each, with the given tags. */
static void ck_group_ops(ck_side_t *s, int group, const int *tags)
{
	int nops = s->n / group;
	fh_op_t *ops = s->ops;
	fh_op_t grouped[64];
	for (int j = 0; j < nops; j++) {
		memset(&grouped[j], 0, sizeof(grouped[j]));
		grouped[j].kind = FH_OP_RECV;
		grouped[j].comm = s->comm;
		for (int k = 0; k < group; k++) {
			fh_op_t *one = &ops[j * group + k];
			fh_op_recv_add(&grouped[j], one->data[0], one->size[0], tags[j * group + k],
				       one->mh[0], one->expect[0]);
		}
	}
	memset(ops, 0, sizeof(fh_op_t) * (size_t)s->n);
	memcpy(ops, grouped, sizeof(fh_op_t) * (size_t)nops);
}

/* Receiver: `nrecv` grouped receives of `group` buffers (tags rtags, message
 * slice i gets seeds[i]). Sender: messages in send order `order` (indices into
 * the receiver's slices) with their tags. */
static int ck_grouped_run(ck_t *ck, void *sc, void *rc, int nrecv, int group,
			  const size_t *posted, const size_t *sizes, const uint64_t *seeds,
			  const int *tags, const int *order, int window)
{
	int total = nrecv * group;
	ck_side_t s;
	ck_side_t *sides[1] = {&s};
	if (ck->r->rank == 1) {
		/* Slices laid out (and posted) at posted[]; sizes[] must arrive. */
		if (ck_side_recv(ck, &s, rc, total, posted, 0, seeds, CK_TAG))
			return FH_FAIL;
		for (int i = 0; i < total; i++) {
			s.len[i] = sizes[i];
			s.ops[i].expect[0] = sizes[i];
		}
		ck_group_ops(&s, group, tags);
		s.n = nrecv; /* ops only; slices are restored before verifying */
		int ret = ck_sides_run(ck, sides, 1, window);
		s.n = total;
		if (ret || ck_side_verify(ck, &s, "grouped receive"))
			return FH_FAIL;
		return ck_side_release(ck, &s);
	}
	size_t *ssz = calloc((size_t)total, sizeof(size_t));
	uint64_t *sseed = calloc((size_t)total, sizeof(uint64_t));
	if (!ssz || !sseed) {
		free(ssz);
		free(sseed);
		return fh_fail(ck->r, "out of memory");
	}
	for (int i = 0; i < total; i++) {
		ssz[i] = sizes[order[i]];
		sseed[i] = seeds[order[i]];
	}
	int ret = ck_side_send(ck, &s, sc, total, ssz, sseed, CK_TAG);
	free(ssz);
	free(sseed);
	if (ret)
		return FH_FAIL;
	for (int i = 0; i < total; i++)
		s.ops[i].tag[0] = tags[order[i]];
	if (ck_sides_run(ck, sides, 1, window) || ck_side_verify(ck, &s, "send"))
		return FH_FAIL;
	return ck_side_release(ck, &s);
}

static int ck_grouped(ck_t *ck)
{
	int n = ck_max_group(ck);
	if (n < 2)
		return fh_skip(ck->r, "maxRecvs is %d: NCCL never posts grouped receives",
			       ck->props.maxRecvs);
	void *sc = NULL, *rc = NULL;
	if (ck_link_0to1(ck, &sc, &rc))
		return FH_FAIL;
	size_t posted[FH_MAX_GROUP], sizes[FH_MAX_GROUP];
	uint64_t seeds[FH_MAX_GROUP];
	int tags[FH_MAX_GROUP], order[FH_MAX_GROUP];
	for (int i = 0; i < n; i++) {
		posted[i] = ck_cap(ck, 4096 * (size_t)(i + 1) + 512);
		/* per-buffer sizes differ, and differ from the posted sizes */
		sizes[i] = posted[i] > (size_t)(100 * i) ? posted[i] - (size_t)(100 * i) : posted[i];
		seeds[i] = ck_seed(ck, 0, 1, 20, i);
		tags[i] = 1000 + 17 * i;
		order[i] = n - 1 - i; /* the sender goes in reverse tag order */
	}
	if (ck_grouped_run(ck, sc, rc, 1, n, posted, sizes, seeds, tags, order, 1))
		return FH_FAIL;
	fh_note(ck->r, "n=%d", n);
	return ck_close_pair(ck, sc, rc);
}

static int ck_grouped_fifo(ck_t *ck)
{
	if (ck_max_group(ck) < 2)
		return fh_skip(ck->r, "maxRecvs is %d: NCCL never posts grouped receives",
			       ck->props.maxRecvs);
	void *sc = NULL, *rc = NULL;
	if (ck_link_0to1(ck, &sc, &rc))
		return FH_FAIL;
	/* Receiver slices: recv1{A,B}, recv2{A,B}. Sender: A1 A2 B1 B2 - it runs
	 * ahead on tag A; per tag the order must hold (A1 -> recv1, A2 -> recv2). */
	enum { TAG_A = 7, TAG_B = 9 };
	size_t posted[4], sizes[4] = {3000, 7000, 5000, 9000};
	uint64_t seeds[4];
	int tags[4] = {TAG_A, TAG_B, TAG_A, TAG_B};
	int order[4] = {0, 2, 1, 3};
	for (int i = 0; i < 4; i++) {
		posted[i] = ck_cap(ck, 16 * KiB);
		sizes[i] = ck_cap(ck, sizes[i]);
		seeds[i] = ck_seed(ck, 0, 1, 21, i);
	}
	if (ck_grouped_run(ck, sc, rc, 2, 2, posted, sizes, seeds, tags, order, 4))
		return FH_FAIL;
	return ck_close_pair(ck, sc, rc);
}

/* ------------------------------------------------------------ in flight */

static int ck_inflight(ck_t *ck)
{
	int w = fh_net_max_requests(ck->net);
	void *sc = NULL, *rc = NULL;
	if (ck_link_0to1(ck, &sc, &rc))
		return FH_FAIL;
	fh_stage(ck->r, "%d single receives in flight", w);
	if (ck_oneway(ck, sc, rc, 0, 1, 30, w, ck_cap(ck, 64 * KiB), w))
		return FH_FAIL;

	/* A send comm must take max requests x maxRecvs sends. */
	int g = ck_max_group(ck);
	if (g > 1) {
		int total = w * g;
		size_t *posted = calloc((size_t)total, sizeof(size_t));
		size_t *sizes = calloc((size_t)total, sizeof(size_t));
		uint64_t *seeds = calloc((size_t)total, sizeof(uint64_t));
		int *tags = calloc((size_t)total, sizeof(int));
		int *order = calloc((size_t)total, sizeof(int));
		if (!posted || !sizes || !seeds || !tags || !order)
			return fh_fail(ck->r, "out of memory");
		for (int i = 0; i < total; i++) {
			posted[i] = sizes[i] = ck_cap(ck, 4096 + (size_t)(i % g) * 8);
			seeds[i] = ck_seed(ck, 0, 1, 31, i);
			tags[i] = 100 + i % g;
			order[i] = i;
		}
		fh_stage(ck->r, "%d grouped receives of %d in flight", w, g);
		int ret = ck_grouped_run(ck, sc, rc, w, g, posted, sizes, seeds, tags, order,
					 ck->r->rank == 0 ? total : w);
		free(posted);
		free(sizes);
		free(seeds);
		free(tags);
		free(order);
		if (ret)
			return FH_FAIL;
		if (ck->r->rank == 0)
			fh_note(ck->r, "%d single + %dx%d grouped", w, w, g);
	} else if (ck->r->rank == 0) {
		fh_note(ck->r, "%d in flight (maxRecvs 1)", w);
	}
	return ck_close_pair(ck, sc, rc);
}

/* ------------------------------------------------------------ both directions */

static int ck_bidir(ck_t *ck)
{
	int me = ck->r->rank, peer = 1 - me;
	void *sc, *rc;
	if (fh_link(ck->r, ck->net, ck->dev, peer, peer, &sc, &rc))
		return FH_FAIL;
	int n = ck->o->quick ? 8 : 16;
	size_t sizes[16];
	uint64_t tx[16], rx[16];
	for (int i = 0; i < n; i++) {
		sizes[i] = ck_cap(ck, i % 2 ? 1 * MiB : 8 * KiB);
		tx[i] = ck_seed(ck, me, peer, 40, i);
		rx[i] = ck_seed(ck, peer, me, 40, i);
	}
	if (ck_exchange(ck, sc, rc, n, sizes, tx, rx, 8))
		return FH_FAIL;
	return ck_close_pair(ck, sc, rc);
}

/* ------------------------------------------------------------ soak */

/* Both directions at full speed for arg seconds (a quarter with --quick), or
 * until --soak-messages messages went each way:
 * rounds of SOAK_MSGS messages each way, sizes cycling 8 B .. 1 MiB, 16 in
 * flight per comm; every size test() reports is checked, and the bytes of 4
 * messages a round. Both processes are alive and busy all along: a "peer is
 * gone" (liveness that lied) or any other error fails it. */
#define SOAK_MSGS 64
#define SOAK_BUFS 16

static int ck_soak(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	int me = r->rank, peer = 1 - me;
	void *sc, *rc;
	if (fh_link(r, ck->net, ck->dev, peer, peer, &sc, &rc))
		return FH_FAIL;
	static const size_t cycle[] = {8, 4 * KiB, 64 * KiB, 1 * MiB, 300, 256 * KiB, 16 * KiB, 1 * MiB};
	enum { NCYCLE = sizeof(cycle) / sizeof(cycle[0]) };
	size_t max = ck_cap(ck, 1 * MiB);
	fh_buf_t tx[SOAK_BUFS], rx[SOAK_BUFS];
	for (int i = 0; i < SOAK_BUFS; i++) {
		if (fh_buf_alloc(&tx[i], max, 0) || fh_buf_alloc(&rx[i], max, 0))
			return fh_fail(r, "cannot map the buffers");
		if (ck_ok(ck, fh_buf_reg(ck->net, &tx[i], sc, 0), "regMr()") ||
		    ck_ok(ck, fh_buf_reg(ck->net, &rx[i], rc, 0), "regMr()"))
			return FH_FAIL;
	}
	double secs = (double)ck->c->arg / (ck->o->quick ? 4 : 1);
	/* both ranks run the same number of rounds: rank 0 decides when to stop */
	double t0 = fh_now();
	unsigned long msgs = 0;
	double bytes = 0;
	fh_op_t ops[2 * SOAK_MSGS];
	for (int round = 0;; round++) {
		char more = 0;
		if (me == 0)
			more = ck->o->soak_msgs ? msgs < ck->o->soak_msgs : fh_now() - t0 < secs;
		if (me == 0 ? fh_oob_send(r, 1, &more, 1) : fh_oob_recv(r, 0, &more, 1))
			return FH_FAIL;
		if (!more)
			break;
		for (int i = 0; i < SOAK_MSGS; i++) {
			size_t len = ck_cap(ck, cycle[(round + i) % NCYCLE]);
			/* the last message through a buffer keeps its bytes there */
			int b = i % SOAK_BUFS, checked = i >= SOAK_MSGS - SOAK_BUFS && i % 4 == 0;
			uint64_t sseed = ck_seed(ck, me, peer, 300 + round, i);
			if (checked)
				fh_pattern_fill(tx[b].ptr, len, sseed);
			fh_op_send(&ops[i], sc, tx[b].ptr, len, CK_TAG, tx[b].mh);
			fh_op_recv(&ops[SOAK_MSGS + i], rc, rx[b].ptr, max, CK_TAG, rx[b].mh);
			ops[SOAK_MSGS + i].expect[0] = len;
			bytes += (double)len;
		}
		/* a buffer is reused only once its earlier message is done: the
		 * window equals the buffer count, and fh_ops_run posts in order */
		if (fh_ops_run(r, ck->net, ops, 2 * SOAK_MSGS, SOAK_BUFS))
			return fh_fail(r, "round %d of the soak failed (%lu messages each way before it, "
					  "%.1f s in)", round, msgs, fh_now() - t0);
		for (int i = SOAK_MSGS - SOAK_BUFS; i < SOAK_MSGS; i += 4) {
			size_t len = ck_cap(ck, cycle[(round + i) % NCYCLE]), bad;
			if (fh_pattern_check(rx[i % SOAK_BUFS].ptr, len,
					     ck_seed(ck, peer, me, 300 + round, i), &bad))
				return fh_fail(r, "round %d: message %d (%zu bytes) is wrong at byte %zu",
					       round, i, len, bad);
		}
		msgs += SOAK_MSGS;
		/* a long soak says where it is, in case it is stopped */
		if (me == 0 && ck->o->soak_msgs >= 2000000 && msgs % 1000000 < SOAK_MSGS)
			fprintf(stderr, "soak: %lu messages each way, %.0f s\n", msgs, fh_now() - t0);
	}
	double dt = fh_now() - t0;
	for (int i = 0; i < SOAK_BUFS; i++)
		if (ck_ok(ck, fh_buf_dereg(ck->net, &tx[i]), "deregMr()") ||
		    ck_ok(ck, fh_buf_dereg(ck->net, &rx[i]), "deregMr()"))
			return FH_FAIL;
	for (int i = 0; i < SOAK_BUFS; i++) {
		fh_buf_free(&tx[i]);
		fh_buf_free(&rx[i]);
	}
	fh_note(r, "%lu messages each way in %.1f s (%.0f/s, %.2f GB/s each way)", msgs, dt,
		(double)msgs / dt, bytes / dt / 1e9);
	return ck_close_pair(ck, sc, rc);
}

/* ------------------------------------------------------------ many connections */

static int ck_many_comms(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	fh_net_t *net = ck->net;
	int me = r->rank;
	/* arg: the many-comms/N variants; 0: 64 (16 with --quick) */
	int k = ck->c->arg ? (int)ck->c->arg : ck->o->quick ? 16 : 64;
	if (ck->props.maxComms < k) {
		k = ck->props.maxComms;
		fh_note(r, "limited to maxComms=%d", k);
	}
	void **comm = calloc((size_t)k, sizeof(void *));
	void **lc = calloc((size_t)k, sizeof(void *));
	char(*h)[NCCL_NET_HANDLE_MAXSIZE] = calloc((size_t)k, NCCL_NET_HANDLE_MAXSIZE);
	if (!comm || !lc || !h)
		return fh_fail(r, "out of memory");
	/* All k connections are set up at once, as NCCL does for its channels. */
	if (me == 1) {
		for (int i = 0; i < k; i++) {
			if (ck_ok(ck, fh_net_listen(net, net->ctx, ck->dev, h[i], &lc[i]), "listen()"))
				return FH_FAIL;
			if (!lc[i])
				return fh_fail(r, "listen() returned no listen comm");
		}
		if (fh_oob_send(r, 0, h, (size_t)k * NCCL_NET_HANDLE_MAXSIZE))
			return FH_FAIL;
	} else if (fh_oob_recv(r, 1, h, (size_t)k * NCCL_NET_HANDLE_MAXSIZE)) {
		return FH_FAIL;
	}
	fh_stage(r, "setting up %d connections at once", k);
	int ready = 0;
	unsigned idle = 0;
	while (ready < k) {
		int before = ready;
		for (int i = 0; i < k; i++) {
			if (comm[i])
				continue;
			ncclResult_t rc = me == 0
						  ? fh_net_connect(net, net->ctx, ck->dev, h[i], &comm[i])
						  : fh_net_accept(net, lc[i], &comm[i]);
			if (rc != ncclSuccess)
				return fh_fail(r, "%s() #%d returned %s", me == 0 ? "connect" : "accept",
					       i, fh_result_str(rc));
			if (comm[i])
				ready++;
		}
		if (ready == before)
			fh_relax(&idle);
		else
			idle = 0;
	}
	if (me == 1)
		for (int i = 0; i < k; i++)
			if (ck_ok(ck, fh_net_close_listen(net, lc[i]), "closeListen()"))
				return FH_FAIL;

	/* Two messages per connection, each connection its own pattern and size. */
	ck_side_t *sides = calloc((size_t)k, sizeof(ck_side_t));
	ck_side_t **sp = calloc((size_t)k, sizeof(ck_side_t *));
	if (!sides || !sp)
		return fh_fail(r, "out of memory");
	for (int i = 0; i < k; i++) {
		size_t sizes[2] = {ck_cap(ck, 4096 + 64 * (size_t)i), ck_cap(ck, 100 + (size_t)i)};
		uint64_t seeds[2] = {ck_seed(ck, 0, 1, 100 + i, 0), ck_seed(ck, 0, 1, 100 + i, 1)};
		sp[i] = &sides[i];
		if (me == 0 ? ck_side_send(ck, &sides[i], comm[i], 2, sizes, seeds, CK_TAG)
			    : ck_side_recv(ck, &sides[i], comm[i], 2, sizes, 0, seeds, CK_TAG))
			return FH_FAIL;
	}
	if (ck_sides_run(ck, sp, k, 2))
		return FH_FAIL;
	for (int i = 0; i < k; i++) {
		char what[32];
		snprintf(what, sizeof(what), "connection %d", i);
		if (ck_side_verify(ck, &sides[i], what) || ck_side_release(ck, &sides[i]))
			return FH_FAIL;
	}
	for (int i = 0; i < k; i++)
		if (ck_close_pair(ck, me == 0 ? comm[i] : NULL, me == 1 ? comm[i] : NULL))
			return FH_FAIL;
	free(sides);
	free(sp);
	free(comm);
	free(lc);
	free(h);
	if (me == 0)
		fh_note(r, "%d connections", k);
	return FH_OK;
}

/* ------------------------------------------------------------ ring */

static int ck_ring4(ck_t *ck)
{
	int me = ck->r->rank, n = ck->r->nranks;
	int next = (me + 1) % n, prev = (me + n - 1) % n;
	void *sc, *rc;
	if (fh_link(ck->r, ck->net, ck->dev, next, prev, &sc, &rc))
		return FH_FAIL;
	int rounds = ck->o->quick ? 2 : 5;
	for (int round = 0; round < rounds; round++) {
		size_t sizes[4];
		uint64_t tx[4], rx[4];
		for (int i = 0; i < 4; i++) {
			sizes[i] = ck_cap(ck, 256 * KiB + (size_t)round * 1000 + (size_t)i);
			tx[i] = ck_seed(ck, me, next, 50 + round, i);
			rx[i] = ck_seed(ck, prev, me, 50 + round, i);
		}
		fh_stage(ck->r, "ring round %d", round);
		if (ck_exchange(ck, sc, rc, 4, sizes, tx, rx, 4))
			return FH_FAIL;
	}
	return ck_close_pair(ck, sc, rc);
}

/* ------------------------------------------------------------ threads */

struct ck_worker {
	ck_t *ck;
	void *sc, *rc;
	int idx;
	int ret;
};

struct ck_reg_loop {
	ck_t *ck;
	void *comms[2];
	atomic_int stop;
	unsigned long iters;
	int ret;
};

static void *ck_worker_main(void *arg)
{
	struct ck_worker *w = arg;
	ck_t *ck = w->ck;
	int me = ck->r->rank, peer = 1 - me;
	int n = ck->o->quick ? 10 : 30;
	size_t sizes[30];
	uint64_t tx[30], rx[30];
	for (int i = 0; i < n; i++) {
		sizes[i] = ck_cap(ck, 128 * KiB + (size_t)i * 3);
		tx[i] = ck_seed(ck, me, peer, 60 + w->idx, i);
		rx[i] = ck_seed(ck, peer, me, 60 + w->idx, i);
	}
	w->ret = ck_exchange(ck, w->sc, w->rc, n, sizes, tx, rx, 4);
	return NULL;
}

/* NCCL's service thread registers buffers while the proxy thread moves data
 * on the same comms. */
static void *ck_reg_main(void *arg)
{
	struct ck_reg_loop *g = arg;
	ck_t *ck = g->ck;
	fh_buf_t b;
	if (fh_buf_alloc(&b, 1 * MiB, 0)) {
		g->ret = fh_fail(ck->r, "cannot map a buffer");
		return NULL;
	}
	while (!atomic_load(&g->stop) || g->iters < 2) {
		void *comm = g->comms[g->iters % 2];
		void *mh = NULL;
		size_t len = 4096 + (g->iters % 64) * 4096;
		ncclResult_t rc = fh_net_reg_mr(ck->net, comm, b.ptr, len, NCCL_PTR_HOST, &mh);
		if (rc != ncclSuccess) {
			g->ret = fh_fail(ck->r, "regMr() on a comm busy in another thread returned %s",
					 fh_result_str(rc));
			break;
		}
		rc = fh_net_dereg_mr(ck->net, comm, mh);
		if (rc != ncclSuccess) {
			g->ret = fh_fail(ck->r, "deregMr() on a comm busy in another thread returned %s",
					 fh_result_str(rc));
			break;
		}
		g->iters++;
	}
	fh_buf_free(&b);
	return NULL;
}

static int ck_threads(ck_t *ck)
{
	int me = ck->r->rank, peer = 1 - me;
	struct ck_worker w[2];
	for (int t = 0; t < 2; t++) {
		memset(&w[t], 0, sizeof(w[t]));
		w[t].ck = ck;
		w[t].idx = t;
		if (fh_link(ck->r, ck->net, ck->dev, peer, peer, &w[t].sc, &w[t].rc))
			return FH_FAIL;
	}
	struct ck_reg_loop g;
	memset(&g, 0, sizeof(g));
	g.ck = ck;
	g.comms[0] = w[0].sc;
	g.comms[1] = w[1].rc;
	pthread_t th[3];
	for (int t = 0; t < 2; t++)
		if (pthread_create(&th[t], NULL, ck_worker_main, &w[t]))
			return fh_fail(ck->r, "pthread_create failed");
	if (pthread_create(&th[2], NULL, ck_reg_main, &g))
		return fh_fail(ck->r, "pthread_create failed");
	pthread_join(th[0], NULL);
	pthread_join(th[1], NULL);
	atomic_store(&g.stop, 1);
	pthread_join(th[2], NULL);
	if (w[0].ret || w[1].ret || g.ret || fh_failed(ck->r))
		return FH_FAIL;
	for (int t = 0; t < 2; t++)
		if (ck_close_pair(ck, w[t].sc, w[t].rc))
			return FH_FAIL;
	if (me == 0)
		fh_note(ck->r, "%lu regMr/deregMr meanwhile", g.iters);
	return FH_OK;
}

/* ------------------------------------------------------------ listen reuse */

static int ck_listen_reuse(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	fh_net_t *net = ck->net;
	int me = r->rank;
	enum { N = 3 };
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	void *lc = NULL;
	void *comm[2 * N] = {0};
	if (me == 1) {
		if (ck_ok(ck, fh_net_listen(net, net->ctx, ck->dev, handle, &lc), "listen()"))
			return FH_FAIL;
		if (!lc)
			return fh_fail(r, "listen() returned no listen comm");
		if (fh_oob_send(r, 0, handle, sizeof(handle)))
			return FH_FAIL;
	} else if (fh_oob_recv(r, 1, handle, sizeof(handle))) {
		return FH_FAIL;
	}

	/* Phase 1: three connections one after the other, each completed on both
	 * sides before the next starts, so connection i is accept i. */
	for (int i = 0; i < N; i++) {
		char h[NCCL_NET_HANDLE_MAXSIZE];
		memcpy(h, handle, sizeof(h)); /* NCCL ships a fresh copy per connection */
		fh_stage(r, "sequential connection %d through one listen comm", i);
		unsigned idle = 0;
		while (!comm[i]) {
			ncclResult_t rc = me == 0 ? fh_net_connect(net, net->ctx, ck->dev, h, &comm[i])
						  : fh_net_accept(net, lc, &comm[i]);
			if (rc != ncclSuccess)
				return fh_fail(r, "%s() #%d returned %s", me == 0 ? "connect" : "accept",
					       i, fh_result_str(rc));
			fh_relax(&idle);
		}
		if (fh_oob_barrier(r))
			return FH_FAIL;
	}
	for (int i = 0; i < N; i++)
		if (ck_oneway(ck, me == 0 ? comm[i] : NULL, me == 1 ? comm[i] : NULL, 0, 1, 70 + i, 1,
			      ck_cap(ck, 8 * KiB), 1))
			return FH_FAIL;

	/* Phase 2: three connections at once through the same handle; which accept
	 * gets which connect is open, so the data says which is which. */
	char h2[N][NCCL_NET_HANDLE_MAXSIZE];
	for (int i = 0; i < N; i++)
		memcpy(h2[i], handle, sizeof(handle));
	fh_stage(r, "three concurrent connections through one listen comm");
	int ready = 0;
	unsigned idle = 0;
	while (ready < N) {
		int before = ready;
		for (int i = 0; i < N; i++) {
			void **c = &comm[N + i];
			if (*c)
				continue;
			ncclResult_t rc = me == 0 ? fh_net_connect(net, net->ctx, ck->dev, h2[i], c)
						  : fh_net_accept(net, lc, c);
			if (rc != ncclSuccess)
				return fh_fail(r, "concurrent %s() #%d returned %s",
					       me == 0 ? "connect" : "accept", i, fh_result_str(rc));
			if (*c)
				ready++;
		}
		if (ready == before)
			fh_relax(&idle);
		else
			idle = 0;
	}
	size_t len = ck_cap(ck, 4 * KiB);
	fh_buf_t b[N];
	fh_op_t ops[N];
	uint64_t seeds[N];
	for (int i = 0; i < N; i++) {
		seeds[i] = ck_seed(ck, 0, 1, 80, i);
		if (fh_buf_alloc(&b[i], len, 64))
			return fh_fail(r, "cannot map buffers");
		if (me == 0)
			fh_pattern_fill(b[i].ptr, len, seeds[i]);
		if (ck_ok(ck, fh_buf_reg(net, &b[i], comm[N + i], 0), "regMr()"))
			return FH_FAIL;
		if (me == 0)
			fh_op_send(&ops[i], comm[N + i], b[i].ptr, len, CK_TAG, b[i].mh);
		else
			fh_op_recv(&ops[i], comm[N + i], b[i].ptr, len, CK_TAG, b[i].mh);
	}
	if (fh_ops_run(r, net, ops, N, 1))
		return FH_FAIL;
	if (me == 1) {
		int seen[N] = {0};
		for (int j = 0; j < N; j++) {
			int match = -1;
			for (int i = 0; i < N && match < 0; i++)
				if (!fh_pattern_check(b[j].ptr, len, seeds[i], NULL))
					match = i;
			if (match < 0)
				return fh_fail(r, "accepted connection %d received data that matches "
						  "none of the three senders",
					       j);
			if (seen[match]++)
				return fh_fail(r, "two accepted connections received sender %d's data",
					       match);
		}
	}
	for (int i = 0; i < N; i++) {
		if (ck_ok(ck, fh_buf_dereg(net, &b[i]), "deregMr()"))
			return FH_FAIL;
		fh_buf_free(&b[i]);
	}
	for (int i = 0; i < 2 * N; i++)
		if (ck_close_pair(ck, me == 0 ? comm[i] : NULL, me == 1 ? comm[i] : NULL))
			return FH_FAIL;
	if (lc && ck_ok(ck, fh_net_close_listen(net, lc), "closeListen()"))
		return FH_FAIL;
	return FH_OK;
}

/* ------------------------------------------------------------ table */

#define ALLV FH_VERSION_MIN, FH_VERSION_MAX

static const ck_case_t ck_traffic[] = {
	{"grouped-recv", "irecv of maxRecvs buffers, sends in reverse tag order", 2, ALLV, 0, 0,
	 ck_grouped, 0},
	{"grouped-recv/fifo", "two grouped receives, sender runs ahead on one tag: FIFO per tag",
	 2, ALLV, 0, 0, ck_grouped_fifo, 0},
	{"inflight", "NCCL_NET_MAX_REQUESTS receives in flight; sends x maxRecvs", 2, ALLV, 0, 0,
	 ck_inflight, 0},
	{"bidir", "both directions at once", 2, ALLV, 0, 0, ck_bidir, 0},
	{"soak", "both directions at full speed for 20 s, 8 B..1 MiB, 16 in flight: no error, "
		 "no peer declared gone", 2, ALLV, 0, 120, ck_soak, 20},
	{"many-comms", "64 connections set up at once, each its own pattern", 2, ALLV, 0, 0,
	 ck_many_comms, 0},
	{"many-comms/320", "320 connections between one pair at once (control resources grow with "
	 "them)", 2, ALLV, 0, 180, ck_many_comms, 320},
	{"ring4", "four ranks in a ring, several rounds", 4, ALLV, 0, 90, ck_ring4, 0},
	{"threads", "two threads with their own comms, a third does regMr/deregMr", 2, ALLV, 0, 0,
	 ck_threads, 0},
	{"listen-reuse", "one listen comm accepts 3 sequential and 3 concurrent connections", 2,
	 ALLV, 0, 0, ck_listen_reuse, 0},
};

const ck_case_t *ck_cases_traffic(int *n)
{
	*n = (int)(sizeof(ck_traffic) / sizeof(ck_traffic[0]));
	return ck_traffic;
}
