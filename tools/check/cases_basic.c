/*
 * cases_basic.c - properties, connection setup, message sizes, registration,
 * flush, and the "NULL request means retry" rule.
 */
#include "check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

/* ------------------------------------------------------------ init/properties */

static int ck_props_one(ck_t *ck, int dev, fh_props_t *p)
{
	fh_rank_t *r = ck->r;
	int v = ck->version;
	ncclResult_t rc = fh_net_get_properties(ck->net, dev, p);
	if (rc != ncclSuccess)
		return fh_fail(r, "getProperties(%d) returned %s", dev, fh_result_str(rc));
	if (!p->name || !p->name[0])
		return fh_fail(r, "dev %d: name is NULL or empty", dev);
	if (!(p->ptrSupport & NCCL_PTR_HOST))
		return fh_fail(r, "dev %d: ptrSupport 0x%x lacks NCCL_PTR_HOST", dev, p->ptrSupport);
	if (p->ptrSupport & ~(NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF))
		return fh_fail(r, "dev %d: ptrSupport 0x%x has unknown bits", dev, p->ptrSupport);
	if (p->maxRecvs < 1)
		return fh_fail(r, "dev %d: maxRecvs is %d (must be >= 1)", dev, p->maxRecvs);
	if (p->maxComms < 1)
		return fh_fail(r, "dev %d: maxComms is %d (must be >= 1)", dev, p->maxComms);
	if (p->speed <= 0)
		return fh_fail(r, "dev %d: speed is %d Mbps (must be > 0)", dev, p->speed);
	if (!isfinite(p->latency) || p->latency < 0)
		return fh_fail(r, "dev %d: latency %g is not a plausible number of us", dev,
			       (double)p->latency);
	if (p->port < 0)
		return fh_fail(r, "dev %d: port is %d", dev, p->port);
	if ((p->have & FH_HAVE_NETDEVICE) &&
	    (p->netDeviceType < NCCL_NET_DEVICE_HOST || p->netDeviceType > 4))
		return fh_fail(r, "dev %d: netDeviceType %d is not a known ncclNetDeviceType", dev,
			       p->netDeviceType);
	if ((p->have & FH_HAVE_REGISGLOBAL) && p->regIsGlobal != 0 && p->regIsGlobal != 1)
		return fh_fail(r, "dev %d: regIsGlobal is %d (0 or 1)", dev, p->regIsGlobal);
	if (p->have & FH_HAVE_V9) {
		if (p->forceFlush != 0 && p->forceFlush != 1)
			return fh_fail(r, "dev %d: forceFlush is %d (0 or 1)", dev, p->forceFlush);
		if (p->vndevs != 1 || p->vdevs[0] != dev)
			return fh_fail(r, "dev %d: vProps is {%d, {%d, ...}}, a plugin without NIC "
					  "fusion reports {1, {%d}}",
				       dev, p->vndevs, p->vdevs[0], dev);
		if (p->maxP2pBytes == 0 || p->maxP2pBytes > NCCL_MAX_NET_SIZE_BYTES)
			return fh_fail(r, "dev %d: maxP2pBytes %zu not in (0, 1 TiB]", dev,
				       p->maxP2pBytes);
		if (p->maxCollBytes == 0 || p->maxCollBytes > NCCL_MAX_NET_SIZE_BYTES)
			return fh_fail(r, "dev %d: maxCollBytes %zu not in (0, 1 TiB]", dev,
				       p->maxCollBytes);
	}
	/* v12 (NCCL 2.30): NCCL groups NICs by railId and planeId and takes 0 as a
	 * real rail, so a plugin that knows neither must say NCCL_NET_ID_UNDEF. */
	if ((p->have & FH_HAVE_RAIL) && (p->railId != -1 || p->planeId != -1))
		return fh_fail(r, "dev %d: railId %d, planeId %d: a plugin that does not know the "
				  "host's rails reports -1 (NCCL_NET_ID_UNDEF) for both",
			       dev, p->railId, p->planeId);
	if ((p->have & FH_HAVE_MULTIREQ) && p->maxMultiRequestSize != 1)
		return fh_fail(r, "dev %d: maxMultiRequestSize is %d (1 unless the plugin supports "
				  "multi-requests)",
			       dev, p->maxMultiRequestSize);
	(void)v;
	return FH_OK;
}

static int ck_init_properties(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	const char *name = fh_net_name(ck->net);
	if (!name || !name[0])
		return fh_fail(r, "the table's name is NULL or empty");
	int ndev2 = -1;
	if (ck_ok(ck, fh_net_devices(ck->net, &ndev2), "devices() (second call)"))
		return FH_FAIL;
	if (ndev2 != ck->ndev)
		return fh_fail(r, "devices() returned %d, then %d", ck->ndev, ndev2);
	if (ck->ndev > 64)
		return fh_fail(r, "devices() returned %d: implausible", ck->ndev);

	char *names[64];
	for (int d = 0; d < ck->ndev; d++) {
		fh_props_t p, q;
		if (ck_props_one(ck, d, &p))
			return FH_FAIL;
		/* getProperties must be repeatable (NCCL calls it many times). */
		if (ck_props_one(ck, d, &q))
			return FH_FAIL;
		if (strcmp(p.name, q.name) || p.speed != q.speed || p.maxRecvs != q.maxRecvs)
			return fh_fail(r, "dev %d: getProperties returned different values on a "
					  "second call",
				       d);
		names[d] = p.name;
		for (int e = 0; e < d; e++)
			if (!strcmp(names[e], p.name))
				return fh_fail(r, "devs %d and %d share the name \"%s\" (NCCL keys NICs "
						  "by name)",
					       e, d, p.name);
	}

	/* v11+: setNetAttr is optional; if present it must take plausible input. */
	if (fh_net_has_optional(ck->net, "setNetAttr")) {
		ncclNetAttr_t attr;
		memset(&attr, 0, sizeof(attr));
		attr.sendCommAttr.maxConcurrentPeers = attr.recvCommAttr.maxConcurrentPeers = 1;
		attr.sendCommAttr.minConcurrentPeers = attr.recvCommAttr.minConcurrentPeers = 1;
		attr.sendCommAttr.maxFlowsPerPeer = attr.recvCommAttr.maxFlowsPerPeer = 1;
		attr.sendCommAttr.minFlowsPerPeer = attr.recvCommAttr.minFlowsPerPeer = 1;
		if (ck_ok(ck, fh_net_set_net_attr(ck->net, ck->net->ctx, &attr), "setNetAttr()"))
			return FH_FAIL;
	}

	const fh_props_t *p = &ck->props;
	fh_note(r, "name=%s ndev=%d dev%d=%s speed=%d maxRecvs=%d maxComms=%d", name, ck->ndev,
		ck->dev, p->name, p->speed, p->maxRecvs, p->maxComms);
	if (ck->version >= 9 && fh_net_has_optional(ck->net, "makeVDevice"))
		fh_note(r, "makeVDevice set");
	const ncclFabricTools_v1_t *tools = fh_net_tools(ck->net);
	if (tools && tools->provider) {
		const char *prov = tools->provider();
		fh_note(r, "provider=%s", prov ? prov : "(none)");
	}
	return FH_OK;
}

/* ------------------------------------------------------------ connect */

static int ck_devcomm_check(ck_t *ck)
{
	if (atomic_load(&ck->net->devcomm_bad_type))
		return fh_fail(ck->r, "connect/accept returned a device handle whose netDeviceType "
				      "differs from getProperties' netDeviceType %d",
			       ck->props.netDeviceType);
	return FH_OK;
}

static int ck_connect_self(ck_t *ck)
{
	void *sc, *rc;
	/* NCCL's GDR probe calls with a NULL device-handle argument. */
	ck->net->devcomm_mode = FH_DEVCOMM_NULL;
	if (fh_link_self(ck->r, ck->net, ck->dev, &sc, &rc))
		return FH_FAIL;
	if (ck_oneway(ck, sc, rc, 0, 0, 0, 4, ck_cap(ck, 4096), 4))
		return FH_FAIL;
	return ck_close_pair(ck, sc, rc);
}

static int ck_connect_2proc(ck_t *ck)
{
	int peer = 1 - ck->r->rank, me = ck->r->rank;
	void *sc, *rc;
	if (fh_link(ck->r, ck->net, ck->dev, peer, peer, &sc, &rc))
		return FH_FAIL;
	if (ck_devcomm_check(ck))
		return FH_FAIL;
	size_t sizes[4];
	uint64_t tx[4], rx[4];
	for (int i = 0; i < 4; i++) {
		sizes[i] = ck_cap(ck, 64 * KiB);
		tx[i] = ck_seed(ck, me, peer, 0, i);
		rx[i] = ck_seed(ck, peer, me, 0, i);
	}
	if (ck_exchange(ck, sc, rc, 4, sizes, tx, rx, 4))
		return FH_FAIL;
	return ck_close_pair(ck, sc, rc);
}

/* ------------------------------------------------------------ sizes */

static int ck_sizes_fixed(ck_t *ck)
{
	size_t size = ck->c->arg;
	if (size > ck->o->max_size)
		return fh_skip(ck->r, "%zu bytes is above --max-size %zu", size, ck->o->max_size);
	if (ck->o->quick && size > 16 * MiB)
		return fh_skip(ck->r, "--quick leaves out sizes above 16 MiB");
	void *sc = NULL, *rc = NULL;
	int me = ck->r->rank;
	if (fh_link(ck->r, ck->net, ck->dev, me == 0 ? 1 : -1, me == 1 ? 0 : -1, &sc, &rc))
		return FH_FAIL;
	int n = size >= 16 * MiB ? 1 : 2;
	if (ck_oneway(ck, sc, rc, 0, 1, 0, n, size, 2))
		return FH_FAIL;
	return ck_close_pair(ck, sc, rc);
}

/* Log-uniform sizes in [0, cap] so that small, eager and rendezvous sizes all
 * show up; the same on both ranks (same seed). */
static void ck_random_sizes(const ck_t *ck, size_t *sizes, int n, size_t cap)
{
	uint64_t s = fh_mix64(ck->o->seed ^ 0x51ee5ULL ^ (uint64_t)ck->version);
	int bits = 0;
	while (bits < 62 && ((size_t)1 << bits) <= cap)
		bits++;
	for (int i = 0; i < n; i++) {
		s = fh_mix64(s);
		int e = (int)(s % (uint64_t)(bits + 1));
		size_t v;
		if (e == 0) {
			v = 0;
		} else {
			size_t lo = (size_t)1 << (e - 1);
			v = lo + (size_t)(fh_mix64(s + 1) % lo);
		}
		sizes[i] = v > cap ? cap : v;
	}
}

static int ck_sizes_random(ck_t *ck)
{
	int n = ck->o->quick ? 5 : 20;
	size_t sizes[20];
	uint64_t seeds[20];
	ck_random_sizes(ck, sizes, n, ck_cap(ck, 8 * MiB));
	for (int i = 0; i < n; i++)
		seeds[i] = ck_seed(ck, 0, 1, 7, i);
	void *sc = NULL, *rc = NULL;
	int me = ck->r->rank;
	if (fh_link(ck->r, ck->net, ck->dev, me == 0 ? 1 : -1, me == 1 ? 0 : -1, &sc, &rc))
		return FH_FAIL;
	fh_stage(ck->r, "random sizes, seed 0x%llx", (unsigned long long)ck->o->seed);
	if (ck_exchange(ck, sc, rc, n, sizes, seeds, seeds, 4)) {
		/* Say which seed reproduces it. */
		fh_note(ck->r, "seed=0x%llx", (unsigned long long)ck->o->seed);
		pthread_mutex_lock(&ck->r->lock);
		size_t used = strlen(ck->r->reason);
		snprintf(ck->r->reason + used, sizeof(ck->r->reason) - used, " [--seed 0x%llx]",
			 (unsigned long long)ck->o->seed);
		pthread_mutex_unlock(&ck->r->lock);
		return FH_FAIL;
	}
	if (me == 0) {
		size_t mx = 0;
		for (int i = 0; i < n; i++)
			mx = sizes[i] > mx ? sizes[i] : mx;
		fh_note(ck->r, "seed=0x%llx n=%d max=%zu", (unsigned long long)ck->o->seed, n, mx);
	}
	return ck_close_pair(ck, sc, rc);
}

/* ------------------------------------------------------------ recv-smaller */

static int ck_recv_smaller(ck_t *ck)
{
	void *sc = NULL, *rc = NULL;
	int me = ck->r->rank;
	if (fh_link(ck->r, ck->net, ck->dev, me == 0 ? 1 : -1, me == 1 ? 0 : -1, &sc, &rc))
		return FH_FAIL;
	size_t sizes[3] = {1000, 1, 0};
	uint64_t seeds[3];
	for (int i = 0; i < 3; i++)
		seeds[i] = ck_seed(ck, 0, 1, 3, i);
	ck_side_t s;
	ck_side_t *sides[1] = {&s};
	int rcode = me == 0 ? ck_side_send(ck, &s, sc, 3, sizes, seeds, CK_TAG)
			    : ck_side_recv(ck, &s, rc, 3, sizes, 1 * MiB, seeds, CK_TAG);
	if (rcode || ck_sides_run(ck, sides, 1, 3) || ck_side_verify(ck, &s, "1 MiB posted") ||
	    ck_side_release(ck, &s))
		return FH_FAIL;
	return ck_close_pair(ck, sc, rc);
}

/* ------------------------------------------------------------ mr */

static int ck_mr(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	fh_net_t *net = ck->net;
	void *sc, *rc;
	if (fh_link_self(r, net, ck->dev, &sc, &rc))
		return FH_FAIL;
	fh_buf_t a, b;
	size_t len = 1 * MiB;
	if (fh_buf_alloc(&a, len, 4096) || fh_buf_alloc(&b, len, 4096))
		return fh_fail(r, "cannot map buffers");
	void *mh_a1 = NULL, *mh_a2 = NULL, *mh_sub = NULL, *mh_b = NULL;
	fh_stage(r, "regMr");
	if (ck_ok(ck, fh_net_reg_mr(net, sc, a.ptr, len, NCCL_PTR_HOST, &mh_a1), "regMr(buffer)") ||
	    ck_ok(ck, fh_net_reg_mr(net, sc, a.ptr, len, NCCL_PTR_HOST, &mh_a2),
		  "regMr(same buffer again)") ||
	    ck_ok(ck, fh_net_reg_mr(net, sc, a.ptr + 4096 + 13, 1000, NCCL_PTR_HOST, &mh_sub),
		  "regMr(unaligned sub-range)") ||
	    ck_ok(ck, fh_net_reg_mr(net, rc, b.ptr, len, NCCL_PTR_HOST, &mh_b),
		  "regMr(recv buffer)"))
		return FH_FAIL;

	/* Send from the sub-range with its own handle. */
	size_t msg = ck_cap(ck, 1000);
	uint64_t s1 = ck_seed(ck, 0, 0, 1, 0), s2 = ck_seed(ck, 0, 0, 1, 1);
	fh_pattern_fill(a.ptr + 4096 + 13, msg, s1);
	fh_op_t ops[2];
	fh_op_send(&ops[0], sc, a.ptr + 4096 + 13, msg, CK_TAG, mh_sub);
	fh_op_recv(&ops[1], rc, b.ptr, len, CK_TAG, mh_b);
	ops[1].expect[0] = msg;
	if (fh_ops_run(r, net, ops, 2, 1))
		return FH_FAIL;
	size_t bad;
	if (fh_pattern_check(b.ptr, msg, s1, &bad))
		return fh_fail(r, "data sent from a sub-range registration: byte %zu wrong", bad);

	/* Deregistering one of two registrations of a buffer leaves the other usable. */
	if (ck_ok(ck, fh_net_dereg_mr(net, sc, mh_a1), "deregMr(first of two registrations)"))
		return FH_FAIL;
	size_t big = ck_cap(ck, len);
	fh_pattern_fill(a.ptr, big, s2);
	fh_op_send(&ops[0], sc, a.ptr, big, CK_TAG, mh_a2);
	fh_op_recv(&ops[1], rc, b.ptr, len, CK_TAG, mh_b);
	ops[1].expect[0] = big;
	if (fh_ops_run(r, net, ops, 2, 1))
		return FH_FAIL;
	if (fh_pattern_check(b.ptr, big, s2, &bad))
		return fh_fail(r, "data sent with the second registration after deregistering the "
				  "first: byte %zu wrong",
			       bad);
	if (ck_ok(ck, fh_net_dereg_mr(net, sc, mh_sub), "deregMr(sub-range)") ||
	    ck_ok(ck, fh_net_dereg_mr(net, sc, mh_a2), "deregMr(second registration)") ||
	    ck_ok(ck, fh_net_dereg_mr(net, rc, mh_b), "deregMr(recv buffer)"))
		return FH_FAIL;

	/* A large registration on each comm kind (NCCL registers whole pools). */
	fh_buf_t c;
	size_t clen = 64 * MiB;
	if (fh_buf_alloc(&c, clen, 0))
		return fh_fail(r, "cannot map 64 MiB");
	void *mh_c = NULL;
	if (ck_ok(ck, fh_net_reg_mr(net, rc, c.ptr, clen, NCCL_PTR_HOST, &mh_c),
		  "regMr(64 MiB on a recv comm)") ||
	    ck_ok(ck, fh_net_dereg_mr(net, rc, mh_c), "deregMr(64 MiB)"))
		return FH_FAIL;
	fh_buf_free(&c);
	fh_buf_free(&a);
	fh_buf_free(&b);
	return ck_close_pair(ck, sc, rc);
}

/* ------------------------------------------------------------ flush */

static int ck_flush(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	void *sc, *rc;
	if (fh_link_self(r, ck->net, ck->dev, &sc, &rc))
		return FH_FAIL;
	size_t size = ck_cap(ck, 64 * KiB);
	size_t sizes[1] = {size};
	uint64_t seeds[1] = {ck_seed(ck, 0, 0, 2, 0)};
	ck_side_t tx, rx;
	ck_side_t *sides[2] = {&tx, &rx};
	if (ck_side_send(ck, &tx, sc, 1, sizes, seeds, CK_TAG) ||
	    ck_side_recv(ck, &rx, rc, 1, sizes, 0, seeds, CK_TAG) || ck_sides_run(ck, sides, 2, 1))
		return FH_FAIL;
	/* NCCL flushes a completed receive before reading it. */
	fh_op_t fl;
	fh_op_flush(&fl, rc, rx.buf.ptr, size, rx.buf.mh);
	if (fh_ops_run(r, ck->net, &fl, 1, 1))
		return FH_FAIL;
	if (ck_side_verify(ck, &rx, "after iflush") || ck_side_release(ck, &tx) ||
	    ck_side_release(ck, &rx))
		return FH_FAIL;
	return ck_close_pair(ck, sc, rc);
}

/* ------------------------------------------------------------ retry-null */

static int ck_retry_null(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	int me = r->rank;
	void *sc = NULL, *rc = NULL;
	if (fh_link(r, ck->net, ck->dev, me == 0 ? 1 : -1, me == 1 ? 0 : -1, &sc, &rc))
		return FH_FAIL;
	/* The sender posts before the receiver: a plugin may answer NULL until the
	 * receive exists, and the harness must keep retrying. */
	size_t sizes[4];
	uint64_t seeds[4];
	for (int i = 0; i < 4; i++) {
		sizes[i] = ck_cap(ck, i < 2 ? 4 * MiB : 512);
		seeds[i] = ck_seed(ck, 0, 1, 4, i);
	}
	ck_side_t s;
	ck_side_t *sides[1] = {&s};
	if (me == 0 ? ck_side_send(ck, &s, sc, 4, sizes, seeds, CK_TAG)
		    : ck_side_recv(ck, &s, rc, 4, sizes, 0, seeds, CK_TAG))
		return FH_FAIL;
	if (fh_oob_barrier(r))
		return FH_FAIL;
	if (me == 1) {
		struct timespec ts = {0, 300 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	if (ck_sides_run(ck, sides, 1, 4) || ck_side_verify(ck, &s, "late receiver") ||
	    ck_side_release(ck, &s))
		return FH_FAIL;
	fh_note(r, "rank %d retries: isend %lu, irecv %lu", me, atomic_load(&ck->net->send_retries),
		atomic_load(&ck->net->recv_retries));
	return ck_close_pair(ck, sc, rc);
}

/* ------------------------------------------------------------ early-sends */

/* Drives the posted sends or receives of ops (in order, the rest posted as
 * the plugin takes them) until each is done, for at most limit seconds. */
static int ck_drive(ck_t *ck, fh_op_t *ops, int n, double limit)
{
	fh_rank_t *r = ck->r;
	double until = fh_now() + limit;
	unsigned idle = 0;
	for (;;) {
		int done = 0;
		for (int i = 0; i < n; i++) {
			if (ops[i].state == FH_OP_PENDING) {
				if (i > 0 && ops[i - 1].state == FH_OP_PENDING)
					break; /* in order, as NCCL posts */
				if (fh_op_post(r, ck->net, &ops[i]))
					return FH_FAIL;
			}
			if (ops[i].state == FH_OP_POSTED && fh_op_test(r, ck->net, &ops[i]))
				return FH_FAIL;
			done += ops[i].state == FH_OP_DONE;
		}
		if (done == n)
			return FH_OK;
		if (fh_now() > until)
			return fh_fail(r, "%d of %d operations done after %.0fs", done, n, limit);
		fh_relax(&idle);
	}
}

/* The sender posts messages above tcp's eager limit (and at most
 * NCCL_FABRIC_EARLY_MAX) before the receiver posts anything. isend may give
 * a request at once for the first NCCL_FABRIC_EARLY_SENDS of them (early
 * sends, where the provider takes them) and NULL after; the check counts
 * those and, where NCCL_FABRIC_CHECK_EARLY names a count, fails on another.
 * Then the receiver posts, late, and every byte and size arrives. */
static int ck_early_sends(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	int me = r->rank;
	void *sc = NULL, *rc = NULL;
	if (fh_link(r, ck->net, ck->dev, me == 0 ? 1 : -1, me == 1 ? 0 : -1, &sc, &rc))
		return FH_FAIL;
	enum { N = 10 };
	fh_op_t ops[N];
	fh_buf_t b[N];
	for (int i = 0; i < N; i++) {
		/* 8 of 128 KiB (NCCL's p2p chunk), then 256 KiB and 1 MiB */
		size_t size = ck_cap(ck, i < 8 ? 128 * KiB : i == 8 ? 256 * KiB : 1 * MiB);
		if (fh_buf_alloc(&b[i], size, 4096))
			return fh_fail(r, "cannot map a buffer");
		if (ck_ok(ck, fh_buf_reg(ck->net, &b[i], me == 0 ? sc : rc, 0), "regMr()"))
			return FH_FAIL;
		if (me == 0) {
			fh_pattern_fill(b[i].ptr, size, ck_seed(ck, 0, 1, 91, i));
			fh_op_send(&ops[i], sc, b[i].ptr, size, CK_TAG, b[i].mh);
		} else {
			memset(b[i].ptr, 0xa5, size);
			fh_op_recv(&ops[i], rc, b[i].ptr, size, CK_TAG, b[i].mh);
		}
	}
	if (me == 0) {
		/* each in order, for 300 ms each, while the receiver posts nothing */
		int early = 0;
		unsigned idle = 0;
		for (; early < N; early++) {
			double until = fh_now() + 0.3;
			while (ops[early].state == FH_OP_PENDING && fh_now() < until) {
				if (fh_op_post(r, ck->net, &ops[early]))
					return FH_FAIL;
				fh_relax(&idle);
			}
			if (ops[early].state == FH_OP_PENDING)
				break;
		}
		fh_note(r, "isend gave %d requests before the receiver posted", early);
		const char *want = getenv("NCCL_FABRIC_CHECK_EARLY");
		if (want && *want && atoi(want) != early)
			return fh_fail(r, "isend gave %d requests before the receiver posted a receive; "
					  "NCCL_FABRIC_CHECK_EARLY expects %s",
				       early, want);
	}
	if (fh_oob_barrier(r)) /* the receiver posts now */
		return FH_FAIL;
	if (ck_drive(ck, ops, N, 30.0 * r->timeout_mult))
		return FH_FAIL;
	for (int i = 0; i < N && me == 1; i++) {
		size_t bad;
		if (fh_pattern_check(b[i].ptr, ops[i].size[0], ck_seed(ck, 0, 1, 91, i), &bad))
			return fh_fail(r, "message %d (%zu bytes), posted late: byte %zu wrong", i,
				       ops[i].size[0], bad);
	}
	for (int i = 0; i < N; i++) {
		if (ck_ok(ck, fh_buf_dereg(ck->net, &b[i]), "deregMr()"))
			return FH_FAIL;
		fh_buf_free(&b[i]);
	}
	return ck_close_pair(ck, sc, rc);
}

/* ------------------------------------------------------------ table */

#define ALLV FH_VERSION_MIN, FH_VERSION_MAX

static const ck_case_t ck_basic[] = {
	{"init/properties", "devices/getProperties plausible, unique names, v9+ vProps, v12 rail/plane", 1, ALLV,
	 0, 0, ck_init_properties, 0},
	{"connect/self", "connect+accept alternately on one thread through one listen handle", 1,
	 ALLV, 0, 0, ck_connect_self, 0},
	{"connect/2proc", "connect/accept across two processes, traffic both ways", 2, ALLV, 0, 0,
	 ck_connect_2proc, 0},
	{"sizes/0", "zero-byte message", 2, ALLV, 0, 0, ck_sizes_fixed, 0},
	{"sizes/1", "1-byte message", 2, ALLV, 0, 0, ck_sizes_fixed, 1},
	{"sizes/4095", "4095-byte message", 2, ALLV, 0, 0, ck_sizes_fixed, 4095},
	{"sizes/64KiB", "64 KiB message", 2, ALLV, 0, 0, ck_sizes_fixed, 64 * KiB},
	{"sizes/1MiB", "1 MiB message", 2, ALLV, 0, 0, ck_sizes_fixed, 1 * MiB},
	{"sizes/64MiB", "64 MiB message", 2, ALLV, 0, 120, ck_sizes_fixed, 64 * MiB},
	{"sizes/random", "20 seeded random sizes up to 8 MiB (--seed)", 2, ALLV, 0, 0,
	 ck_sizes_random, 0},
	{"recv-smaller", "1 MiB posted, 1000/1/0 bytes sent: test() reports the real size", 2, ALLV,
	 0, 0, ck_recv_smaller, 0},
	{"mr", "regMr twice, sub-range, dereg one of two, 64 MiB", 1, ALLV, 0, 0, ck_mr, 0},
	{"flush", "iflush on host memory succeeds (NULL request allowed)", 1, ALLV, 0, 0, ck_flush,
	 0},
	{"retry-null", "isend before the receive exists: NULL requests are retried", 2, ALLV, 0, 0,
	 ck_retry_null, 0},
	{"early-sends", "128 KiB-1 MiB sends posted before the receiver posts: early sends get a "
			"request at once (NCCL_FABRIC_CHECK_EARLY=N checks how many), every byte arrives",
	 2, ALLV, 0, 0, ck_early_sends, 0},
};

const ck_case_t *ck_cases_basic(int *n)
{
	*n = (int)(sizeof(ck_basic) / sizeof(ck_basic[0]));
	return ck_basic;
}
