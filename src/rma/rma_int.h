/*
 * rma_int.h - the RMA layer's own types, shared by its two files: rma.c (the
 * group, its windows and contexts) and rma_ops.c (requests: puts, signals,
 * gets, flushes, test and progress). Nothing outside src/rma/ includes it.
 */
#ifndef NCCL_FABRIC_RMA_INT_H
#define NCCL_FABRIC_RMA_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ofi/ofi.h"
#include "rma/rma.h"
#include "util/freelist.h"
#include "util/list.h"

#define RMA_COLL_MAGIC 0x43414d52U /* "RMAC" */
#define RMA_CTX_MAGIC 0x58414d52U  /* "RMAX" */
#define RMA_WIN_MAGIC 0x57414d52U  /* "RMAW" */
#define RMA_WIN_DEAD 0x44414d52U   /* deregistered: kept until closeColl, refused */
#define RMA_REQ_MAGIC 0x51414d52U
#define RMA_RING_TAG 0x52 /* the ring's all-gathers: one tag, FIFO per tag */
/* Requests per context: NCCL keeps at most NCCL_NET_MAX_REQUESTS * maxRecvs
 * operations in flight per target rank, plus its flushes. */
#define RMA_REQS_PER_RANK (NCCL_NET_MAX_REQUESTS * PROTO_MAX_RECVS + 4)
#define RMA_MAX_CONTEXTS 64
/* How long destroyContext waits for operations still posted. */
#define RMA_CLOSE_WAIT_NS (5ULL * 1000000000ULL)


struct rma_peer_win {
	uint64_t base; /* the address a put at offset 0 writes (VA, or offset in the MR) */
	uint64_t key;
	uint64_t size;
	uint64_t id;   /* names the window in signal messages (random, never 0) */
};

/* A signal as a message (policy: msg_signals), applied by the target's
 * plugin after checking it names a live host window and a word inside it. */
#define RMA_SIGNAL_ROUTE 0x5349474e414c0001ULL /* "SIGNAL", the pool's route */
struct rma_sig_msg {
	uint64_t route;
	uint64_t win_id;
	uint64_t offset;
	uint64_t value;
};

struct rma_coll;

struct rma_win {
	_Atomic uint32_t magic;
	struct rma_coll *coll;
	struct dlist link;
	char *data;
	size_t size;
	int type;
	uint64_t flags;
	uint64_t id;
	struct ofi_mr *mr;
	struct rma_peer_win *peers; /* nranks */
};

struct rma_coll {
	uint32_t magic;
	struct rma_device *dev;
	int rank, nranks;
	void *sc, *rc;                /* the ring: to rank+1, from rank-1 (net API comms) */
	pthread_mutex_t coll_lock;    /* one collective at a time */
	struct ofi_domain *dom;       /* owned: RMA traffic only */
	struct ofi_ep *ep;
	fi_addr_t *peers;             /* nranks, ourselves included (flushes, self puts) */
	bool virt;                    /* FI_MR_VIRT_ADDR: remote addresses are VAs */
	bool msg_signals;             /* signals are messages (policy_rma) */
	atomic_uint refused;          /* signal messages refused (forged or stale) */
	pthread_mutex_t win_lock;
	struct dlist wins;            /* every window until closeColl (dead ones too) */
	atomic_int contexts;
	atomic_int last_error;
};

enum rma_req_kind { RMA_REQ_PUT = 1, RMA_REQ_GET, RMA_REQ_FLUSH, RMA_REQ_NOP };

struct rma_ctx;

struct rma_req {
	uint32_t magic;
	struct rma_ctx *ctx;
	struct util_free_node free_node;
	enum rma_req_kind kind;
	atomic_bool in_use;
	struct ofi_op op[2];          /* data, signal */
	int nops;                     /* operations that end the request */
	atomic_int ncomplete;
	atomic_int status;
	/* a strong signal posted from the put's completion (POLICY_RMA_ORDER_CHAIN) */
	bool chain;
	atomic_bool sig_due;          /* the put completed, the signal is not yet posted */
	fi_addr_t sig_dest;
	uint64_t sig_addr, sig_key;
	uint64_t start_ns;            /* posted at */
	/* the data operation, kept so that test() can post it when the provider
	 * had no room at first (data_due): NCCL expects a request, never EAGAIN */
	bool is_read;
	void *lbuf;
	size_t len;
	struct ofi_mr *lmr;
	uint64_t raddr, rkey;
	fi_addr_t dest;
	bool signal_after;            /* a signal follows the data op (not chained) */
	atomic_bool data_due;
	struct ofi_mr *due_hold;      /* keeps lmr while data_due */
	bool abandoned;               /* test() gave up on it: the last completion frees it
				       * (both under the CQ lock) */
	uint64_t operand;             /* the signal's addend (registered) */
	struct rma_sig_msg sig_msg;   /* ... or its message (registered) */
	uint64_t scratch;             /* a flush reads into it (registered) */
	/* the arrays the posts name, alive until their completions: a provider
	 * with FI_ASYNC_IOV (opx) reads them after the call returns */
	struct {
		struct iovec iov;
		struct fi_rma_iov riov;
		struct fi_ioc ioc;
		struct fi_rma_ioc rioc;
		void *desc;
	} vec[2];
};

struct rma_ctx {
	uint32_t magic;
	struct rma_coll *coll;
	int ncontexts;
	int nreqs;
	struct rma_req *reqs;
	struct ofi_mr *reqs_mr;       /* operands and scratch: FI_MR_LOCAL providers need it */
	struct util_freelist free;
	atomic_int posted;            /* operations handed to libfabric, not yet completed */
	atomic_int ndue;              /* requests with an operation waiting for room */
};

static inline void rma_set_due(struct rma_req *r, atomic_bool *flag)
{
	atomic_store(flag, true);
	atomic_fetch_add(&r->ctx->ndue, 1);
}

static inline bool rma_take_due(struct rma_req *r, atomic_bool *flag)
{
	if (!atomic_exchange(flag, false))
		return false;
	atomic_fetch_sub(&r->ctx->ndue, 1);
	return true;
}

struct rma_coll *rma_coll_from(void *p, const char *what);
struct rma_ctx *rma_ctx_from(void *p, int context, const char *what);
/* rma_ctx_from, and rank a rank of its group */
struct rma_ctx *rma_ctx_rank_from(void *p, int context, uint32_t rank, const char *what);
/* [off, off+len) inside a window of `size` bytes */
bool rma_in_window(uint64_t off, size_t len, uint64_t size);
/* a live window of the group, else NULL and a WARN naming its role */
struct rma_win *rma_win_from(struct rma_coll *c, void *p, const char *what, const char *role);

#endif
