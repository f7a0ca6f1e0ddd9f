/*
 * test_rma.c - NCCL's RMA plugin (device-initiated networking) on host
 * memory: two ranks of one group, as two threads of this process over the
 * plugin's own code (fabric_static), over the provider NCCL_FABRIC_PROVIDER
 * names, with NCCL_FABRIC_RMA_PLUGIN=force (host memory only). Every put,
 * get and signal is checked at the bytes that arrived; forged keys, stale
 * keys and out-of-window offsets must fail without writing. With the
 * plugin's path as argument, also loads ncclRmaPlugin_v14 and _v13 from the
 * shared library as NCCL does. Exit 77 (skip, with the reason) when the
 * provider is missing or offers no RMA.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "nccl/nccl_rma.h"
#include "rma/rma.h"
#include "unit.h"

#define NR 2
#define BIG (64u << 20)
#define WIN (BIG + 64)
#define SIGW 4096

static void *lcomm[NR], *coll[NR], *ctx[NR];
static char handles[NR][NCCL_NET_HANDLE_MAXSIZE];
static unsigned char *data[NR], *sigmem[NR];
static void *dwin[NR], *swin[NR];

/* ---- both ranks at once, as NCCL's ranks call collectives ---- */

typedef int (*rank_fn)(int rank, void *arg);
struct both_arg {
	rank_fn fn;
	void *arg;
	int rank, rc;
};

static void *both_thread(void *p)
{
	struct both_arg *a = p;
	a->rc = a->fn(a->rank, a->arg);
	return NULL;
}

static int both(rank_fn fn, void *arg)
{
	pthread_t t[NR];
	struct both_arg a[NR];
	for (int r = 0; r < NR; r++) {
		a[r] = (struct both_arg){ fn, arg, r, -1 };
		pthread_create(&t[r], NULL, both_thread, &a[r]);
	}
	int rc = 0;
	for (int r = 0; r < NR; r++) {
		pthread_join(t[r], NULL);
		if (a[r].rc)
			rc = a[r].rc;
	}
	return rc;
}

static int do_connect(int rank, void *arg)
{
	(void)arg;
	void *h[NR];
	for (int r = 0; r < NR; r++)
		h[r] = handles[r];
	int rc = rma_connect(h, NR, rank, lcomm[rank], &coll[rank]);
	if (!rc)
		rc = rma_create_context(coll[rank], 1, &ctx[rank]);
	return rc;
}

struct reg_arg {
	unsigned char **bufs; /* per rank */
	size_t size;
	void **wins;          /* per rank */
};

static int do_reg(int rank, void *arg)
{
	struct reg_arg *a = arg;
	return rma_reg_sym(coll[rank], a->bufs[rank], a->size, NCCL_PTR_HOST, 0, -1, 0,
			   &a->wins[rank]);
}

static int do_dereg(int rank, void *arg)
{
	struct reg_arg *a = arg;
	return rma_dereg_sym(coll[rank], a->wins[rank]);
}

static int reg_both(unsigned char **bufs, size_t size, void **wins)
{
	struct reg_arg a = { bufs, size, wins };
	return both(do_reg, &a);
}

/* Waits for a request, progressing both ranks (the target's provider may
 * need its reads to place what arrives). Returns test()'s result. */
static int wait_req(int rank, void *req)
{
	int done = 0, rc = 0;
	double end = unit_now_s() + 60;
	while (!done && unit_now_s() < end) {
		rc = rma_test(coll[rank], req, &done);
		if (rc)
			return rc;
		for (int r = 0; r < NR; r++)
			rma_progress(ctx[r]);
	}
	if (!done) {
		fprintf(stderr, "  request of rank %d did not complete in 60 s\n", rank);
		return -1;
	}
	return rc;
}

static uint64_t sig_word(int rank, size_t off)
{
	return __atomic_load_n((uint64_t *)(sigmem[rank] + off), __ATOMIC_ACQUIRE);
}

static unsigned char pattern(size_t k, unsigned seed)
{
	return (unsigned char)(k * 131u + seed * 7u + (k >> 12));
}

/* ---- the cases ---- */

/* Puts of 0 B to 64 MiB at odd offsets, each followed by its own strong
 * signal: when the target sees the signal move, every byte of the put is
 * there; nothing outside the put is touched. */
static int test_put_sizes(void)
{
	static const size_t sizes[] = { 0, 1, 7, 63, 4095, 4096, 65537, (1u << 20) + 3, BIG };
	const uint64_t src_off = 3, dst_off = 5;
	unsigned seed = 1;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++, seed++) {
		size_t n = sizes[i];
		for (size_t k = 0; k < n; k++)
			data[0][src_off + k] = pattern(k, seed);
		memset(data[1], 0xEE, WIN);
		uint64_t before = sig_word(1, 8);
		void *req = NULL;
		CHECK_EQ(rma_iput_signal(ctx[0], 0, src_off, dwin[0], n, dst_off, dwin[0], 1, 8,
					 swin[0], 0, NCCL_NET_SIGNAL_OP_INC, true, &req),
			 0);
		CHECK(req != NULL);
		if (!req)
			return 1;
		/* the target's view: poll its signal word, then read its memory */
		double end = unit_now_s() + 60;
		while (sig_word(1, 8) == before && unit_now_s() < end)
			for (int r = 0; r < NR; r++)
				rma_progress(ctx[r]);
		CHECK_EQ(sig_word(1, 8), before + 1);
		size_t bad = 0;
		for (size_t k = 0; k < n; k++)
			bad += data[1][dst_off + k] != pattern(k, seed);
		CHECK_EQ(bad, 0);
		CHECK_EQ(data[1][dst_off - 1], 0xEE);
		CHECK_EQ(data[1][dst_off + n], 0xEE);
		CHECK_EQ(wait_req(0, req), 0);
		/* the same size as a plain put, back the other way */
		req = NULL;
		CHECK_EQ(rma_iput(ctx[1], 0, dst_off, dwin[1], n, 9, dwin[1], 0, &req), 0);
		CHECK_EQ(wait_req(1, req), 0);
		bad = 0;
		for (size_t k = 0; k < n; k++)
			bad += data[0][9 + k] != pattern(k, seed);
		CHECK_EQ(bad, 0);
		printf("  %zu bytes: put+signal and put checked\n", n);
	}
	return 0;
}

/* Signals counted exactly: both ranks signal each other at once, INC and
 * ADD mixed, 64 in flight at a time. */
static int test_signals_counted(void)
{
	enum { N = 2000, WINDOW = 64 };
	uint64_t base[NR] = { sig_word(0, 16), sig_word(1, 16) };
	uint64_t expect = 0;
	void *reqs[NR][WINDOW] = { { 0 } };
	for (int i = 0; i < N; i++) {
		uint32_t op = (i % 3) ? NCCL_NET_SIGNAL_OP_ADD : NCCL_NET_SIGNAL_OP_INC;
		uint64_t v = (uint64_t)(i % 5) + 2;
		expect += op == NCCL_NET_SIGNAL_OP_INC ? 1 : v;
		for (int r = 0; r < NR; r++) {
			void **slot = &reqs[r][i % WINDOW];
			if (*slot)
				CHECK_EQ(wait_req(r, *slot), 0);
			*slot = NULL;
			/* a 16-byte put with each signal, and v13's form (always strong)
			 * every other one */
			CHECK_EQ(rma_iput_signal(ctx[r], 0, 64, dwin[r], 16, 128, dwin[r], 1 - r,
						 16, swin[r], v, op, (i & 1) != 0, slot),
				 0);
		}
	}
	for (int r = 0; r < NR; r++)
		for (int k = 0; k < WINDOW; k++)
			if (reqs[r][k])
				CHECK_EQ(wait_req(r, reqs[r][k]), 0);
	double end = unit_now_s() + 30;
	while ((sig_word(0, 16) != base[0] + expect || sig_word(1, 16) != base[1] + expect) &&
	       unit_now_s() < end)
		for (int r = 0; r < NR; r++)
			rma_progress(ctx[r]);
	CHECK_EQ(sig_word(0, 16) - base[0], expect);
	CHECK_EQ(sig_word(1, 16) - base[1], expect);
	printf("  %d signals each way, sum %llu on both ranks\n", N, (unsigned long long)expect);
	return 0;
}

/* Gets at odd offsets, and flushes of both ranks' windows. */
static int test_get_flush(void)
{
	static const size_t sizes[] = { 0, 1, 4097, (1u << 20) + 1, 8u << 20 };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		for (size_t k = 0; k < n; k++)
			data[1][11 + k] = pattern(k, 99 + (unsigned)i);
		memset(data[0], 0, n + 32);
		void *req = NULL;
		CHECK_EQ(rma_iget(ctx[0], 0, 11, dwin[0], n, 7, dwin[0], 1, &req), 0);
		CHECK_EQ(wait_req(0, req), 0);
		size_t bad = 0;
		for (size_t k = 0; k < n; k++)
			bad += data[0][7 + k] != pattern(k, 99 + (unsigned)i);
		CHECK_EQ(bad, 0);
		CHECK_EQ(data[0][6], 0);
		CHECK_EQ(data[0][7 + n], 0);
	}
	for (int r = 0; r < NR; r++)
		for (uint32_t t = 0; t < NR; t++) {
			void *req = NULL;
			CHECK_EQ(rma_iflush(ctx[r], 0, dwin[r], t, &req), 0);
			CHECK_EQ(wait_req(r, req), 0);
		}
	return 0;
}

/* 64 windows at once, a put into each, then all deregistered. */
static int test_many_windows(void)
{
	enum { NW = 64, SZ = 8192 };
	unsigned char *bufs[NW][NR];
	void *wins[NW][NR];
	for (int w = 0; w < NW; w++) {
		for (int r = 0; r < NR; r++) {
			bufs[w][r] = aligned_alloc(4096, SZ);
			memset(bufs[w][r], r ? 0 : w + 1, SZ);
		}
		CHECK_EQ(reg_both(bufs[w], SZ, wins[w]), 0);
	}
	for (int w = 0; w < NW; w++) {
		void *req = NULL;
		CHECK_EQ(rma_iput(ctx[0], 0, 1, wins[w][0], SZ - 2, 1, wins[w][0], 1, &req), 0);
		CHECK_EQ(wait_req(0, req), 0);
	}
	for (int w = 0; w < NW; w++) {
		size_t bad = 0;
		for (int k = 1; k < SZ - 1; k++)
			bad += bufs[w][1][k] != (unsigned char)(w + 1);
		CHECK_EQ(bad, 0);
		CHECK_EQ(bufs[w][1][0], 0);
		CHECK_EQ(bufs[w][1][SZ - 1], 0);
		struct reg_arg a = { bufs[w], SZ, wins[w] };
		CHECK_EQ(both(do_dereg, &a), 0);
		for (int r = 0; r < NR; r++)
			free(bufs[w][r]);
	}
	return 0;
}

/* Offsets and windows the plugin must refuse before anything is posted. */
static int test_out_of_window(void)
{
	void *req = NULL;
	memset(data[1], 0x5A, 64);
	/* past the end of the target's window, and wrapping around */
	CHECK_EQ(rma_iput(ctx[0], 0, 0, dwin[0], 8, WIN - 3, dwin[0], 1, &req), -FI_EINVAL);
	CHECK_EQ(rma_iput(ctx[0], 0, 0, dwin[0], 8, UINT64_MAX - 2, dwin[0], 1, &req), -FI_EINVAL);
	CHECK_EQ(rma_iput(ctx[0], 0, WIN - 1, dwin[0], 2, 0, dwin[0], 1, &req), -FI_EINVAL);
	CHECK_EQ(rma_iget(ctx[0], 0, WIN, dwin[0], 1, 0, dwin[0], 1, &req), -FI_EINVAL);
	/* signal words: unaligned, past the end, an unknown window, a bad op */
	CHECK_EQ(rma_iput_signal(ctx[0], 0, 0, dwin[0], 0, 0, dwin[0], 1, 12, swin[0], 1,
				 NCCL_NET_SIGNAL_OP_INC, true, &req),
		 -FI_EINVAL);
	CHECK_EQ(rma_iput_signal(ctx[0], 0, 0, dwin[0], 0, 0, dwin[0], 1, SIGW, swin[0], 1,
				 NCCL_NET_SIGNAL_OP_INC, true, &req),
		 -FI_EINVAL);
	uint64_t fake[16] = { 0 };
	CHECK_EQ(rma_iput_signal(ctx[0], 0, 0, dwin[0], 0, 0, dwin[0], 1, 0, fake, 1,
				 NCCL_NET_SIGNAL_OP_INC, true, &req),
		 -FI_EINVAL);
	CHECK_EQ(rma_iput_signal(ctx[0], 0, 0, dwin[0], 0, 0, dwin[0], 1, 0, swin[0], 1, 7, true,
				 &req),
		 -FI_EINVAL);
	/* a rank, a context and a window of another comm */
	CHECK_EQ(rma_iput(ctx[0], 0, 0, dwin[0], 8, 0, dwin[0], 2, &req), -FI_EINVAL);
	CHECK_EQ(rma_iput(ctx[0], 1, 0, dwin[0], 8, 0, dwin[0], 1, &req), -FI_EINVAL);
	CHECK_EQ(rma_iput(ctx[0], 0, 0, dwin[1], 8, 0, dwin[0], 1, &req), -FI_EINVAL);
	CHECK_EQ(rma_iput(ctx[0], 0, 0, dwin[0], 8, 0, dwin[1], 1, &req), -FI_EINVAL);
	CHECK(req == NULL);
	size_t bad = 0;
	for (int k = 0; k < 64; k++)
		bad += data[1][k] != 0x5A;
	CHECK_EQ(bad, 0);
	return 0;
}

static int do_close(int rank, void *arg)
{
	(void)arg;
	int rc = rma_destroy_context(ctx[rank]);
	if (!rc)
		rc = rma_dereg_sym(coll[rank], dwin[rank]);
	if (!rc)
		rc = rma_dereg_sym(coll[rank], swin[rank]);
	if (!rc)
		rc = rma_close_coll(coll[rank]);
	ctx[rank] = coll[rank] = NULL;
	return rc;
}

static int regroup_open(void);

/* Closes the group and makes a new one, with the two windows. */
static int regroup(void)
{
	/* rank 0, which posts, first: see test_close_inflight */
	int rc = do_close(0, NULL);
	int rc1 = do_close(1, NULL);
	rc = rc ? rc : rc1;
	return rc ? rc : regroup_open();
}

/* ... after the ranks closed theirs (regroup) or their own way. */
static int regroup_open(void)
{
	int rc = 0;
	for (int r = 0; r < NR && !rc; r++) {
		rc = rma_close_listen(lcomm[r]);
		if (!rc)
			rc = rma_listen(0, handles[r], &lcomm[r]);
	}
	if (!rc)
		rc = both(do_connect, NULL);
	if (!rc)
		rc = reg_both(data, WIN, dwin);
	if (!rc)
		rc = reg_both(sigmem, SIGW, swin);
	return rc;
}

/* One byte put from rank 0 to rank 1 at `off` of the data windows arrives:
 * what a group made again must do. */
static void check_byte_arrives(size_t off, unsigned char v)
{
	void *req = NULL;
	data[0][off] = v;
	data[1][off] = 0;
	CHECK_EQ(rma_iput(ctx[0], 0, off, dwin[0], 1, off, dwin[0], 1, &req), 0);
	CHECK_EQ(wait_req(0, req), 0);
	CHECK_EQ(data[1][off], v);
}

/* Close with puts in flight: 32 puts of 2 MiB with signals, then the
 * contexts and comms closed at once; then a new group works. */
static int test_close_inflight(void)
{
	for (int i = 0; i < 32; i++) {
		void *req = NULL;
		CHECK_EQ(rma_iput_signal(ctx[0], 0, (uint64_t)i << 21, dwin[0], 2u << 20,
					 (uint64_t)i << 21, dwin[0], 1, 24, swin[0], 1,
					 NCCL_NET_SIGNAL_OP_INC, true, &req),
			 0);
	}
	/* The initiator closes first: its destroyContext waits for (or cancels)
	 * the puts in flight while the target still runs. (Both at once, in one
	 * process over shm of libfabric 2.1, crashed in the provider: the
	 * target's endpoint closed under puts into its region.) */
	CHECK_EQ(do_close(0, NULL), 0);
	CHECK_EQ(do_close(1, NULL), 0);
	CHECK_EQ(regroup_open(), 0);
	check_byte_arrives(100, 0x99);
	return 0;
}

/* A key of a window the target deregistered, and a key it never registered
 * (a lying peer): the target's provider refuses both, the put fails, and the
 * target's memory is not written. A provider may drop the connection over
 * such a put (tcp;ofi_rxm does), so each case gets a group of its own. */
static int bad_key_case(int forge)
{
	enum { SZ = 16384 };
	unsigned char *bufs[NR];
	void *wins[NR];
	for (int r = 0; r < NR; r++) {
		bufs[r] = aligned_alloc(4096, SZ);
		memset(bufs[r], r ? 0x11 : 0x77, SZ);
	}
	CHECK_EQ(reg_both(bufs, SZ, wins), 0);
	uint64_t key = 0, size = 0;
	CHECK_EQ(rma_test_peer_window(wins[0], 1, &key, &size), 0);
	CHECK_EQ(size, SZ);
	if (forge) {
		CHECK_EQ(rma_test_set_peer_window(wins[0], 1, key ^ 0x5a5a5a5a5a5aULL, size), 0);
	} else {
		CHECK_EQ(rma_dereg_sym(coll[1], wins[1]), 0);
		/* and the deregistered window itself is refused at once */
		void *req = NULL;
		CHECK_EQ(rma_iput(ctx[1], 0, 0, wins[1], 8, 0, wins[1], 0, &req), -FI_EINVAL);
		CHECK_EQ(rma_dereg_sym(coll[1], wins[1]), -FI_EINVAL);
	}
	void *req = NULL;
	CHECK_EQ(rma_iput(ctx[0], 0, 0, wins[0], 4096, 0, wins[0], 1, &req), 0);
	int rc = req ? wait_req(0, req) : -1;
	printf("  %s key: put ended with %d (%s)\n", forge ? "forged" : "stale", rc,
	       rc ? ofi_strerror(rc) : "no error");
	CHECK(rc != 0);
	/* whatever reached the target, nothing was written */
	double end = unit_now_s() + 0.5;
	while (unit_now_s() < end)
		for (int r = 0; r < NR; r++)
			rma_progress(ctx[r]);
	size_t bad = 0;
	for (int k = 0; k < SZ; k++)
		bad += bufs[1][k] != 0x11;
	CHECK_EQ(bad, 0);
	/* what the pair can do afterwards depends on the provider: say it */
	data[0][0] = 0x42;
	data[1][0] = 0;
	req = NULL;
	int prc = rma_iput(ctx[0], 0, 0, dwin[0], 1, 0, dwin[0], 1, &req);
	int trc = prc ? prc : wait_req(0, req);
	printf("  afterwards a put between the same ranks: %s\n",
	       trc ? ofi_strerror(trc) : data[1][0] == 0x42 ? "arrived" : "completed, not there");
	CHECK(trc != 0 || data[1][0] == 0x42);
	if (forge)
		CHECK_EQ(rma_dereg_sym(coll[1], wins[1]), 0);
	CHECK_EQ(rma_dereg_sym(coll[0], wins[0]), 0);
	for (int r = 0; r < NR; r++)
		free(bufs[r]);
	/* a new group works */
	CHECK_EQ(regroup(), 0);
	check_byte_arrives(0, 0x42);
	return 0;
}

static int test_stale_key(void)
{
	return bad_key_case(0);
}

static int test_forged_key(void)
{
	return bad_key_case(1);
}

/* A signal naming a window the target does not have: refused by the
 * target's plugin (signal messages) or by its provider (atomics); the
 * signal word never moves, also a second later. */
static int test_forged_signal(void)
{
	uint64_t before = sig_word(1, 32);
	uint64_t key = 0, size = 0;
	CHECK_EQ(rma_test_peer_window(swin[0], 1, &key, &size), 0);
	bool msgs = rma_test_msg_signals(coll[0]);
	unsigned refused = rma_test_refused(coll[1]);
	if (msgs)
		CHECK_EQ(rma_test_set_peer_id(swin[0], 1, 0x1234567ULL), 0);
	else
		CHECK_EQ(rma_test_set_peer_window(swin[0], 1, key ^ 0x77ULL, size), 0);
	void *req = NULL;
	CHECK_EQ(rma_iput_signal(ctx[0], 0, 0, dwin[0], 0, 0, dwin[0], 1, 32, swin[0], 5,
				 NCCL_NET_SIGNAL_OP_ADD, true, &req),
		 0);
	int rc = req ? wait_req(0, req) : -1;
	double end = unit_now_s() + 1;
	while (unit_now_s() < end && (!msgs || rma_test_refused(coll[1]) == refused))
		for (int r = 0; r < NR; r++)
			rma_progress(ctx[r]);
	printf("  signal %s: sender's result %d (%s), target refused %u\n",
	       msgs ? "message with a forged window id" : "with a forged key", rc,
	       rc ? ofi_strerror(rc) : "no error", rma_test_refused(coll[1]) - refused);
	/* signal messages: the target's plugin refuses and counts it; atomics:
	 * the target's provider refuses it, and tells the sender or not (shm
	 * completes an atomic once it is queued, and never answers this one) */
	if (msgs)
		CHECK_EQ(rma_test_refused(coll[1]) - refused, 1);
	CHECK_EQ(sig_word(1, 32), before);
	if (!msgs)
		CHECK_EQ(regroup(), 0);
	return 0;
}

/* The tables NCCL loads, from the shared library itself. */
static const char *plugin_path;

static int test_abi_tables(void)
{
	if (!plugin_path) {
		printf("  (no plugin path given: tables not loaded)\n");
		return 0;
	}
	void *lib = dlopen(plugin_path, RTLD_NOW | RTLD_LOCAL);
	CHECK(lib != NULL);
	if (!lib)
		return 1;
	const ncclRma_v14_t *v14 = dlsym(lib, "ncclRmaPlugin_v14");
	const ncclRma_v13_t *v13 = dlsym(lib, "ncclRmaPlugin_v13");
	CHECK(v14 && v13);
	CHECK(dlsym(lib, "ncclGinPlugin_v13") == NULL); /* not a GIN plugin */
	if (v14 && v13) {
		CHECK_STR_CONTAINS(v14->name, "Fabric");
		CHECK(v14->iput && v14->iputSignal && v14->iget && v14->iflush && v14->test &&
		      v14->progress && v14->queryLastError && v14->finalize);
		CHECK(v13->iput && v13->iputSignal && v13->createContext && v13->finalize);
		void *c = NULL;
		CHECK_EQ(v14->init(&c, 1, NULL), ncclSuccess);
		int n = -1;
		CHECK_EQ(v14->devices(&n), ncclSuccess);
		CHECK(n >= 1);
		ncclNetProperties_v12_t p;
		memset(&p, 0, sizeof(p));
		CHECK_EQ(v13->getProperties(0, &p), ncclSuccess);
		CHECK_EQ(p.netDeviceType, NCCL_NET_DEVICE_GIN_PROXY);
		CHECK_EQ(p.ptrSupport & NCCL_PTR_HOST, NCCL_PTR_HOST);
		CHECK_EQ(v14->getProperties(99, &p), ncclInvalidArgument);
		int done = 0;
		CHECK_EQ(v14->test(&p, &p, &done), ncclInvalidArgument);
		CHECK_EQ(v14->finalize(c), ncclSuccess);
	}
	dlclose(lib);
	return 0;
}

/* An all-gather a rank does not take part in (rank 1 registers nothing):
 * rank 0's regMrSym fails within NCCL_FABRIC_TIMEOUT (1 s here) with a WARN,
 * its ring is closed, so its next collective fails at once instead of
 * matching the failed round's blocks; a new group works. */
static int test_allgather_fails(void)
{
	struct proto_device *nd = core_plugin_get()->rma[0].net;
	uint64_t saved = nd->plan.timeout_ns;
	nd->plan.timeout_ns = 1000000000ULL;
	unsigned char *buf = aligned_alloc(4096, 4096);
	CHECK(buf != NULL);
	void *w = NULL;
	double t0 = unit_now_s();
	int rc = rma_reg_sym(coll[0], buf, 4096, NCCL_PTR_HOST, 0, -1, 0, &w);
	double secs = unit_now_s() - t0;
	printf("  regMrSym without the peer: %s after %.2f s\n", ofi_strerror(rc), secs);
	CHECK_EQ(rc, -FI_ETIMEDOUT);
	CHECK(w == NULL);
	CHECK(secs < 10);
	t0 = unit_now_s();
	rc = rma_reg_sym(coll[0], buf, 4096, NCCL_PTR_HOST, 0, -1, 0, &w);
	secs = unit_now_s() - t0;
	printf("  the next regMrSym: %s after %.2f s\n", ofi_strerror(rc), secs);
	CHECK_EQ(rc, -FI_EIO);
	CHECK(w == NULL);
	CHECK(secs < 1);
	nd->plan.timeout_ns = saved;
	free(buf);
	CHECK_EQ(regroup(), 0);
	check_byte_arrives(200, 0x5c);
	return 0;
}

static const struct unit_test tests[] = {
	TEST_ENTRY(test_put_sizes, "puts 0 B..64 MiB at odd offsets, each with a strong signal"),
	TEST_ENTRY(test_signals_counted, "2000 signals each way counted exactly"),
	TEST_ENTRY(test_get_flush, "gets at odd offsets; flushes"),
	TEST_ENTRY(test_many_windows, "64 windows"),
	TEST_ENTRY(test_out_of_window, "out-of-window offsets, unknown windows refused"),
	TEST_ENTRY(test_close_inflight, "close with puts in flight, then a new group"),
	TEST_ENTRY(test_stale_key, "a stale key after deregistration refused by the target"),
	TEST_ENTRY(test_forged_key, "a forged key refused by the target"),
	TEST_ENTRY(test_forged_signal, "a signal for an unknown window refused"),
	TEST_ENTRY(test_allgather_fails, "an all-gather without the peer fails in bounded time; "
					 "the ring is closed; a new group works"),
	TEST_ENTRY(test_abi_tables, "ncclRmaPlugin_v14/_v13 from the shared library"),
};

int main(int argc, char **argv)
{
	if (argc > 1 && strchr(argv[1], '/')) {
		plugin_path = argv[1];
		argc--;
		argv++;
	}
	void *nctx = NULL;
	int rc = net_init(&nctx, NULL);
	if (rc) {
		printf("SKIP: no usable provider (%s)\n", ofi_strerror(rc));
		return 77;
	}
	int n = 0;
	rma_devices(&n);
	if (n < 1) {
		printf("SKIP: the RMA plugin is not offered: %s\n",
		       core_plugin_get()->rma[0].decision.reason);
		net_finalize(nctx);
		return 77;
	}
	printf("provider %s; %s; strong signals: %s\n", core_plugin_get()->disc.sel.provider,
	       core_plugin_get()->rma[0].decision.reason,
	       core_plugin_get()->rma[0].decision.order_reason);
	for (int r = 0; r < NR; r++) {
		data[r] = aligned_alloc(4096, (WIN + 4095) & ~(size_t)4095);
		sigmem[r] = aligned_alloc(4096, SIGW);
		memset(sigmem[r], 0, SIGW);
		if (!data[r] || !sigmem[r] || rma_listen(0, handles[r], &lcomm[r])) {
			printf("FAIL: setup\n");
			return 1;
		}
	}
	if (both(do_connect, NULL) || reg_both(data, WIN, dwin) || reg_both(sigmem, SIGW, swin)) {
		printf("FAIL: connect or registration\n");
		return 1;
	}
	rc = unit_main(tests, argc, argv);
	if (do_close(0, NULL) || do_close(1, NULL))
		rc = rc ? rc : 1;
	for (int r = 0; r < NR; r++) {
		rma_close_listen(lcomm[r]);
		free(data[r]);
		free(sigmem[r]);
	}
	net_finalize(nctx);
	return rc;
}
