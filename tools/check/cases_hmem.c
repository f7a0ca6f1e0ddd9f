/*
 * cases_hmem.c - data through the plugin's FI_HMEM path, on a machine without a
 * GPU: buffers registered as NCCL_PTR_CUDA are host memory that the stub CUDA
 * driver (tests/stubcuda, found as libcuda.so.1 on LD_LIBRARY_PATH) reports as
 * device memory. The plugin then hands them to the provider with
 * iface=FI_HMEM_CUDA; the test provider testhmem (host mode) moves them like
 * GPUDirect would, and its TESTHMEM_LOG shows what reached it.
 *
 * Every case SKIPs unless device 0 advertises NCCL_PTR_CUDA and the process's
 * libcuda.so.1 is the stub (it exports stubcuda_mark_device). Like NCCL's proxy
 * thread, each rank makes the GPU's primary context current before it moves
 * data, so that the plugin's CUDA calls (cuFlushGPUDirectRDMAWrites) have one.
 */
#include "check.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stubcuda.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

/* The few driver entry points used, with cuda.h's signatures (ints and
 * pointers: nothing CUDA is needed at build time). */
typedef int (*hm_cu_init_fn)(unsigned int flags);
typedef int (*hm_cu_device_get_fn)(int *dev, int ordinal);
typedef int (*hm_cu_primary_retain_fn)(void **ctx, int dev);
typedef int (*hm_cu_ctx_set_fn)(void *ctx);

struct hm_stub {
	void *dl;
	stubcuda_mark_device_fn mark;
	stubcuda_unmark_fn unmark;
	stubcuda_flush_count_fn flush_count;
	stubcuda_host_view_fn view;
};

/* FH_OK with the stub found, its "device memory" wired into ck->mem and a
 * current context; FH_SKIP (with the reason) when the preconditions are not
 * met; FH_FAIL when the stub misbehaves. */
static int hm_setup(ck_t *ck, struct hm_stub *st)
{
	fh_rank_t *r = ck->r;
	memset(st, 0, sizeof(*st));
	if (!(ck->props.ptrSupport & NCCL_PTR_CUDA))
		return fh_skip(r, "device %d does not advertise NCCL_PTR_CUDA (ptrSupport 0x%x): the "
				  "plugin does not use GPU memory with this provider and settings "
				  "(nccl-fabric-info says why)",
			       ck->dev, ck->props.ptrSupport);
	st->dl = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_NOW);
	if (!st->dl)
		return fh_skip(r, "no libcuda.so.1 is loaded in the rank (the plugin advertises "
				  "NCCL_PTR_CUDA, yet has not opened the CUDA driver?)");
	*(void **)&st->mark = dlsym(st->dl, STUBCUDA_SYM_MARK_DEVICE);
	*(void **)&st->unmark = dlsym(st->dl, STUBCUDA_SYM_UNMARK);
	*(void **)&st->flush_count = dlsym(st->dl, STUBCUDA_SYM_FLUSH_COUNT);
	*(void **)&st->view = dlsym(st->dl, STUBCUDA_SYM_HOST_VIEW);
	if (!st->mark || !st->unmark || !st->flush_count || !st->view) {
		dlclose(st->dl);
		st->dl = NULL;
		return fh_skip(r, "the loaded libcuda.so.1 is not the stub CUDA driver (no %s): these "
				  "cases need tests/stubcuda first on LD_LIBRARY_PATH",
			       STUBCUDA_SYM_MARK_DEVICE);
	}
	/* NCCL's proxy thread runs with the GPU's context current (cudaSetDevice). */
	hm_cu_init_fn cu_init;
	hm_cu_device_get_fn cu_device_get;
	hm_cu_primary_retain_fn cu_retain;
	hm_cu_ctx_set_fn cu_set;
	*(void **)&cu_init = dlsym(st->dl, "cuInit");
	*(void **)&cu_device_get = dlsym(st->dl, "cuDeviceGet");
	*(void **)&cu_retain = dlsym(st->dl, "cuDevicePrimaryCtxRetain");
	*(void **)&cu_set = dlsym(st->dl, "cuCtxSetCurrent");
	int dev = -1, cr;
	void *ctx = NULL;
	if (!cu_init || !cu_device_get || !cu_retain || !cu_set)
		return fh_fail(r, "the stub CUDA driver lacks cuInit/cuDeviceGet/"
				  "cuDevicePrimaryCtxRetain/cuCtxSetCurrent");
	if ((cr = cu_init(0)) || (cr = cu_device_get(&dev, 0)) || (cr = cu_retain(&ctx, dev)) ||
	    (cr = cu_set(ctx)))
		return fh_fail(r, "cannot make device 0's primary context current: CUresult %d", cr);
	ck->mem.type = NCCL_PTR_CUDA;
	ck->mem.mark = st->mark;
	ck->mem.unmark = st->unmark;
	ck->mem.view = st->view;
	return FH_OK;
}

static void hm_teardown(ck_t *ck, struct hm_stub *st)
{
	memset(&ck->mem, 0, sizeof(ck->mem));
	if (st->dl)
		dlclose(st->dl);
	st->dl = NULL;
}

/* What the iflush calls of a case did, for its note. */
struct hm_flushes {
	int calls;          /* iflush calls */
	int with_data;      /* ... of which at least one buffer received bytes */
	int requests;       /* ... that returned a request (NULL: nothing to flush, done) */
	unsigned long cuda; /* cuFlushGPUDirectRDMAWrites calls the stub counted */
};

/* iflush of n received buffers of one region, as NCCL flushes a (grouped)
 * receive before reading it; then the data must still be intact. */
static int hm_flush(ck_t *ck, struct hm_stub *st, ck_side_t *s, int first, int n,
		    struct hm_flushes *f)
{
	fh_op_t fl;
	memset(&fl, 0, sizeof(fl));
	fl.kind = FH_OP_FLUSH;
	fl.comm = s->comm;
	fl.n = n;
	for (int i = 0; i < n; i++) {
		fl.data[i] = s->buf.ptr + s->off[first + i];
		fl.size[i] = s->len[first + i];
		fl.mh[i] = s->buf.mh;
		fl.expect[i] = FH_NO_CHECK;
	}
	unsigned long before = st->flush_count();
	fh_stage(ck->r, "iflush of %d GPU buffer(s)", n);
	if (fh_ops_run(ck->r, ck->net, &fl, 1, 1))
		return FH_FAIL;
	int data = 0;
	for (int i = 0; i < n; i++)
		data |= fl.size[i] > 0;
	f->calls++;
	f->with_data += data;
	f->requests += fl.req != NULL;
	f->cuda += st->flush_count() - before;
	return FH_OK;
}

/* Notes what the flushes did. Whether a plugin flushes GPU receives through a
 * request (an RDMA read), synchronously (cuFlushGPUDirectRDMAWrites) or not at
 * all is its choice; but NCCL takes a NULL request as "flushed", so a plugin
 * that answers some flushes of received data with a request and others with
 * NULL has skipped the latter. */
static int hm_flush_check(ck_t *ck, const char *what, const struct hm_flushes *f)
{
	fh_note(ck->r, "%s: %d iflush call(s) (%d with data), %d returned a request, stub counted "
		       "%lu cuFlushGPUDirectRDMAWrites",
		what, f->calls, f->with_data, f->requests, f->cuda);
	if (f->requests > 0 && f->requests < f->with_data)
		return fh_fail(ck->r, "%s: only %d of %d iflush calls on received GPU data returned a "
				      "request, the others NULL, which NCCL takes as \"flush complete\": "
				      "those flushes were skipped (%d iflush calls, stub counted %lu "
				      "cuFlushGPUDirectRDMAWrites)",
			       what, f->requests, f->with_data, f->calls, f->cuda);
	return FH_OK;
}

/* ------------------------------------------------------------ sizes */

/* Both directions between two ranks, GPU buffers on both sides (or, for
 * hmem/mixed, GPU memory on rank 1 and host memory on rank 0), several sizes
 * with every byte checked, then an iflush of each received message. */
static int hm_sizes_run(ck_t *ck, int mixed)
{
	fh_rank_t *r = ck->r;
	struct hm_stub st;
	int ret = hm_setup(ck, &st);
	if (ret)
		return ret;
	int me = r->rank, peer = 1 - me;
	if (mixed && me == 0)
		ck->mem.type = NCCL_PTR_HOST; /* host -> GPU one way, GPU -> host the other */
	void *sc = NULL, *rc = NULL;
	if (fh_link(r, ck->net, ck->dev, peer, peer, &sc, &rc))
		return FH_FAIL;
	static const size_t base[] = {0, 1, 4095, 64 * KiB, 1 * MiB, 4 * MiB + 3};
	enum { N = sizeof(base) / sizeof(base[0]) };
	size_t sizes[N];
	uint64_t tx_seed[N], rx_seed[N];
	for (int i = 0; i < N; i++) {
		sizes[i] = ck_cap(ck, base[i]);
		tx_seed[i] = ck_seed(ck, me, peer, 40 + mixed, i);
		rx_seed[i] = ck_seed(ck, peer, me, 40 + mixed, i);
	}
	ck_side_t tx, rx;
	ck_side_t *sides[2] = {&tx, &rx};
	fh_stage(r, "%d messages each way, %s memory", N,
		 ck->mem.type == NCCL_PTR_CUDA ? "GPU" : "host");
	if (ck_side_send(ck, &tx, sc, N, sizes, tx_seed, CK_TAG) ||
	    ck_side_recv(ck, &rx, rc, N, sizes, 0, rx_seed, CK_TAG) || ck_sides_run(ck, sides, 2, 4) ||
	    ck_side_verify(ck, &rx, "receive") || ck_side_verify(ck, &tx, "send"))
		return FH_FAIL;
	struct hm_flushes f = {0, 0, 0, 0};
	if (rx.type == NCCL_PTR_CUDA) {
		for (int i = 0; i < N; i++)
			if (hm_flush(ck, &st, &rx, i, 1, &f))
				return FH_FAIL;
		if (ck_side_verify(ck, &rx, "after iflush"))
			return FH_FAIL;
	}
	int rx_type = rx.type, tx_type = tx.type;
	if (ck_side_release(ck, &tx) || ck_side_release(ck, &rx))
		return FH_FAIL;
	if (ck_close_pair(ck, sc, rc))
		return FH_FAIL;
	char what[96];
	snprintf(what, sizeof(what), "rank %d (sends from %s, receives into %s memory)", me,
		 tx_type == NCCL_PTR_CUDA ? "GPU" : "host", rx_type == NCCL_PTR_CUDA ? "GPU" : "host");
	if (f.calls) {
		if (hm_flush_check(ck, what, &f))
			return FH_FAIL;
	} else {
		fh_note(r, "%s", what);
	}
	hm_teardown(ck, &st);
	return FH_OK;
}

static int hm_sizes(ck_t *ck) { return hm_sizes_run(ck, 0); }
static int hm_mixed(ck_t *ck) { return hm_sizes_run(ck, 1); }

/* ------------------------------------------------------------ grouped */

/* Two rounds of one grouped receive of maxRecvs GPU buffers (one of them gets
 * 0 bytes), filled by tag in reverse order; each group flushed with one iflush
 * as NCCL does. */
#define HM_ROUNDS 2
static int hm_grouped(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	struct hm_stub st;
	int ret = hm_setup(ck, &st);
	if (ret)
		return ret;
	int n = ck_max_group(ck);
	if (n < 2)
		return fh_skip(r, "maxRecvs is %d: NCCL never posts grouped receives",
			       ck->props.maxRecvs);
	int me = r->rank;
	void *sc = NULL, *rc = NULL;
	if (fh_link(r, ck->net, ck->dev, me == 0 ? 1 : -1, me == 1 ? 0 : -1, &sc, &rc))
		return FH_FAIL;
	size_t posted[HM_ROUNDS][FH_MAX_GROUP], sizes[HM_ROUNDS][FH_MAX_GROUP];
	uint64_t seeds[HM_ROUNDS][FH_MAX_GROUP];
	int tags[FH_MAX_GROUP];
	for (int k = 0; k < HM_ROUNDS; k++) {
		for (int i = 0; i < n; i++) {
			posted[k][i] = ck_cap(ck, 16 * KiB * (size_t)(i + 1 + k) + 512);
			sizes[k][i] = i == 1 + k ? 0 : posted[k][i] - (size_t)(100 * i) % posted[k][i];
			seeds[k][i] = ck_seed(ck, 0, 1, 42 + k, i);
			tags[i] = 1000 + 17 * i;
		}
	}
	ck_side_t s;
	struct hm_flushes f = {0, 0, 0, 0};
	if (me == 1) {
		for (int k = 0; k < HM_ROUNDS; k++) {
			if (ck_side_recv(ck, &s, rc, n, posted[k], 0, seeds[k], CK_TAG))
				return FH_FAIL;
			fh_op_t g;
			memset(&g, 0, sizeof(g));
			g.kind = FH_OP_RECV;
			g.comm = rc;
			for (int i = 0; i < n; i++) {
				s.len[i] = sizes[k][i];
				fh_op_recv_add(&g, s.buf.ptr + s.off[i], posted[k][i], tags[i], s.buf.mh,
					       sizes[k][i]);
			}
			fh_stage(r, "round %d: grouped receive of %d GPU buffers", k + 1, n);
			if (fh_ops_run(r, ck->net, &g, 1, 1) ||
			    ck_side_verify(ck, &s, "grouped receive into GPU memory") ||
			    hm_flush(ck, &st, &s, 0, n, &f) ||
			    ck_side_verify(ck, &s, "grouped receive after iflush") ||
			    ck_side_release(ck, &s))
				return FH_FAIL;
		}
		char what[96];
		snprintf(what, sizeof(what), "n=%d (one 0-byte) x %d rounds, a group per iflush", n,
			 HM_ROUNDS);
		if (hm_flush_check(ck, what, &f))
			return FH_FAIL;
	} else {
		size_t ssz[HM_ROUNDS * FH_MAX_GROUP];
		uint64_t sseed[HM_ROUNDS * FH_MAX_GROUP];
		int stag[HM_ROUNDS * FH_MAX_GROUP];
		for (int k = 0; k < HM_ROUNDS; k++) {
			for (int i = 0; i < n; i++) { /* each round in reverse tag order */
				ssz[k * n + i] = sizes[k][n - 1 - i];
				sseed[k * n + i] = seeds[k][n - 1 - i];
				stag[k * n + i] = tags[n - 1 - i];
			}
		}
		ck_side_t *sides[1] = {&s};
		if (ck_side_send(ck, &s, sc, HM_ROUNDS * n, ssz, sseed, CK_TAG))
			return FH_FAIL;
		for (int i = 0; i < HM_ROUNDS * n; i++)
			s.ops[i].tag[0] = stag[i];
		if (ck_sides_run(ck, sides, 1, n) || ck_side_verify(ck, &s, "send") ||
		    ck_side_release(ck, &s))
			return FH_FAIL;
	}
	if (ck_close_pair(ck, sc, rc))
		return FH_FAIL;
	hm_teardown(ck, &st);
	return FH_OK;
}

/* ------------------------------------------------------------ registration */

/* regMr(NCCL_PTR_CUDA) of memory the CUDA driver does not know as device
 * memory must fail; the same buffer once marked registers, on both comm kinds. */
static int hm_reg(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	fh_net_t *net = ck->net;
	struct hm_stub st;
	int ret = hm_setup(ck, &st);
	if (ret)
		return ret;
	void *sc = NULL, *rc = NULL;
	if (fh_link_self(r, net, ck->dev, &sc, &rc))
		return FH_FAIL;
	fh_buf_t b;
	size_t len = 256 * KiB;
	if (fh_buf_alloc(&b, len, 4096))
		return fh_fail(r, "cannot map %zu bytes", len);
	void *comms[2] = {sc, rc};
	const char *names[2] = {"send", "recv"};
	unsigned long warns = fh_log_warn_count();
	for (int k = 0; k < 2; k++) {
		void *mh = NULL;
		fh_stage(r, "regMr(host memory, NCCL_PTR_CUDA) on the %s comm", names[k]);
		ncclResult_t res = fh_net_reg_mr(net, comms[k], b.ptr, len, NCCL_PTR_CUDA, &mh);
		if (res == ncclSuccess) {
			fh_net_dereg_mr(net, comms[k], mh);
			return fh_fail(r, "regMr(%p, %zu bytes, NCCL_PTR_CUDA) on a %s comm returned "
					  "ncclSuccess for host memory the CUDA driver does not know as "
					  "device memory",
				       (void *)b.ptr, len, names[k]);
		}
		fh_note(r, "host memory as NCCL_PTR_CUDA on the %s comm: %s", names[k],
			fh_result_str(res));
	}
	if (st.mark(b.ptr, len))
		return fh_fail(r, "stubcuda_mark_device(%p, %zu) failed", (void *)b.ptr, len);
	for (int k = 0; k < 2; k++) {
		void *mh = NULL;
		fh_stage(r, "regMr(device memory, NCCL_PTR_CUDA) on the %s comm", names[k]);
		if (ck_ok(ck, fh_net_reg_mr(net, comms[k], b.ptr, len, NCCL_PTR_CUDA, &mh),
			  "regMr(marked device memory, NCCL_PTR_CUDA)") ||
		    ck_ok(ck, fh_net_dereg_mr(net, comms[k], mh), "deregMr(device memory)"))
			return FH_FAIL;
	}
	st.unmark(b.ptr);
	fh_buf_free(&b);
	fh_note(r, "WARN lines for the refusals: %lu", fh_log_warn_count() - warns);
	if (ck_close_pair(ck, sc, rc))
		return FH_FAIL;
	hm_teardown(ck, &st);
	return FH_OK;
}

/* ------------------------------------------------------------ dmabuf */

/* NCCL's regMrDmaBuf: the buffer starts offset bytes into the DMA-BUF. Rank 0
 * sends from such a GPU buffer, rank 1 receives into one, sizes up to 1 MiB
 * (the larger ones as RMA writes where the provider takes them), every byte
 * checked: a registration taken at the wrong address moves the wrong bytes. */
static int hm_dmabuf(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	struct hm_stub st;
	int ret = hm_setup(ck, &st);
	if (ret)
		return ret;
	if (!(ck->props.ptrSupport & NCCL_PTR_DMABUF)) {
		hm_teardown(ck, &st);
		return fh_skip(r, "device %d does not advertise NCCL_PTR_DMABUF (ptrSupport 0x%x)",
			       ck->dev, ck->props.ptrSupport);
	}
	int me = r->rank;
	void *sc = NULL, *rc = NULL;
	if (fh_link(r, ck->net, ck->dev, me == 0 ? 1 : -1, me == 1 ? 0 : -1, &sc, &rc))
		return FH_FAIL;
	static const size_t base[] = {1, 4095, 64 * KiB, 1 * MiB};
	enum { N = sizeof(base) / sizeof(base[0]), OFF = 3 * 4096 };
	size_t max = ck_cap(ck, 1 * MiB);
	fh_buf_t b;
	if (fh_buf_alloc(&b, OFF + max, 0))
		return fh_fail(r, "cannot map %zu bytes", OFF + max);
	if (st.mark(b.ptr, OFF + max))
		return fh_fail(r, "stubcuda_mark_device(%p, %zu) failed", (void *)b.ptr, OFF + max);
	unsigned char *data = b.ptr + OFF, *cpu = (unsigned char *)st.view(b.ptr) + OFF;
	/* any open fd: the provider under test needs none to reach the memory */
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	void *comm = me == 0 ? sc : rc, *mh = NULL;
	fh_stage(r, "regMrDmaBuf(%zu bytes, %d bytes into the DMA-BUF)", max, (int)OFF);
	if (ck_ok(ck, fh_net_reg_mr_dmabuf(ck->net, comm, data, max, NCCL_PTR_CUDA, OFF, fd, &mh),
		  "regMrDmaBuf()")) {
		close(fd);
		return FH_FAIL;
	}
	close(fd);
	for (int i = 0; i < N; i++) {
		size_t len = ck_cap(ck, base[i]);
		uint64_t seed = ck_seed(ck, 0, 1, 60, i);
		fh_op_t op;
		if (me == 0) {
			fh_pattern_fill(cpu, len, seed);
			fh_op_send(&op, sc, data, len, CK_TAG, mh);
		} else {
			memset(cpu, 0xee, max);
			fh_op_recv(&op, rc, data, max, CK_TAG, mh);
			op.expect[0] = len;
		}
		fh_stage(r, "message %d: %zu bytes %s a DMA-BUF GPU buffer", i, len,
			 me == 0 ? "from" : "into");
		if (fh_ops_run(r, ck->net, &op, 1, 1))
			return FH_FAIL;
		size_t bad;
		if (me == 1 && fh_pattern_check(cpu, len, seed, &bad))
			return fh_fail(r, "message %d (%zu bytes) into the DMA-BUF buffer: byte %zu is wrong "
					  "(0x%02x, expected 0x%02x): the registration reached other memory",
				       i, len, bad, cpu[bad], fh_pattern_byte(seed, bad));
		if (fh_oob_barrier(r))
			return FH_FAIL;
	}
	if (ck_ok(ck, fh_net_dereg_mr(ck->net, comm, mh), "deregMr(DMA-BUF)"))
		return FH_FAIL;
	st.unmark(b.ptr);
	fh_buf_free(&b);
	if (ck_close_pair(ck, sc, rc))
		return FH_FAIL;
	hm_teardown(ck, &st);
	return FH_OK;
}

/* ------------------------------------------------------------ table */

#define ALLV FH_VERSION_MIN, FH_VERSION_MAX

static const ck_case_t ck_hmem[] = {
	{"hmem/sizes", "GPU buffers (stub CUDA) both ways, 0 B..4 MiB, every byte; iflush each", 2,
	 ALLV, 0, 0, hm_sizes, 0},
	{"hmem/mixed", "host -> GPU and GPU -> host buffers, 0 B..4 MiB; iflush the GPU side", 2,
	 ALLV, 0, 0, hm_mixed, 0},
	{"hmem/grouped", "2 grouped receives into GPU buffers (one 0-byte each), reverse tag order; "
	 "iflush each", 2, ALLV, 0, 0, hm_grouped, 0},
	{"hmem/reg", "regMr(NCCL_PTR_CUDA) of host memory fails; of device memory succeeds", 1,
	 ALLV, 0, 0, hm_reg, 0},
	{"hmem/dmabuf", "regMrDmaBuf of GPU buffers 12 KiB into their DMA-BUF, 1 B..1 MiB from one "
			"and into the other, every byte", 2, ALLV, 0, 0, hm_dmabuf, 0},
};

const ck_case_t *ck_cases_hmem(int *n)
{
	*n = (int)(sizeof(ck_hmem) / sizeof(ck_hmem[0]));
	return ck_hmem;
}
