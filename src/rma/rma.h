/*
 * rma.h - NCCL's RMA plugin (device-initiated networking, host side): the one
 * internal RMA API. abi/abi_rma.c adapts ncclRmaPlugin_v14 and _v13 to it;
 * core hands it the device table and the verdict at init (rma_devices_set).
 *
 * A collective comm (rma_connect) is a group of nranks ranks over one NCCL
 * device: a ring of the net API's own connections (proto) carries its
 * all-gathers (endpoint addresses, window keys), and one libfabric domain
 * with one endpoint of its own carries the RMA traffic to every rank.
 *
 *   window   regMrSym: collective; every rank registers its buffer and the
 *            ring all-gathers (address, key, size), so a put names a window
 *            and an offset in the target rank's copy of it.
 *   put      an RMA write; putSignal adds a 64-bit atomic add (FI_SUM) to the
 *            target's signal word or, where the provider has no FI_ATOMIC, a
 *            message the target's plugin checks and applies (host windows
 *            only); either is kept behind the write as the policy says
 *            (policy_rma: provider order, fence, or delivery-complete chain).
 *   get      an RMA read; flush an RMA read of the window's first bytes.
 *
 * Every offset and size is checked against the windows as registered, here
 * and now, before anything is posted; the target's provider checks the key
 * (keys are random, so a stale or forged one names no window). Requests come
 * from a fixed pool per context. Functions return 0 or a negative FI_* code.
 */
#ifndef RMA_H
#define RMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl/nccl_rma.h"
#include "net/net.h"
#include "policy/policy.h"

struct proto_device;

/* One NCCL device as the RMA plugin offers it, fixed at init by core. */
struct rma_device {
	struct proto_device *net;   /* the net device: listen comms, the ring */
	const struct fi_info *info; /* the entry with FI_RMA|FI_ATOMIC (core owns it), or NULL */
	struct policy_rma_decision decision;
};

/* The table from init to finalize (NULL, 0 then). */
void rma_devices_set(struct rma_device *devs, int ndevs);

int rma_devices(int *ndev);
int rma_get_properties(int dev, struct net_props *props);
int rma_listen(int dev, void *handle, void **listen_comm);
int rma_close_listen(void *listen_comm);
/* Blocks until the group is made (every rank calls it with the handles of
 * every rank's listen), at most the device's NCCL_FABRIC_TIMEOUT. */
int rma_connect(void *handles[], int nranks, int rank, void *listen_comm, void **coll);
int rma_close_coll(void *coll);
int rma_create_context(void *coll, int ncontexts, void **ctx);
int rma_destroy_context(void *ctx);
/* Collective. fd < 0: no DMA-BUF. */
int rma_reg_sym(void *coll, void *data, size_t size, int type, uint64_t flags, int fd,
		uint64_t offset, void **mhandle);
int rma_dereg_sym(void *coll, void *mhandle);
int rma_iput(void *ctx, int context, uint64_t src_off, void *src_mh, size_t size,
	     uint64_t dst_off, void *dst_mh, uint32_t rank, void **request);
int rma_iput_signal(void *ctx, int context, uint64_t src_off, void *src_mh, size_t size,
		    uint64_t dst_off, void *dst_mh, uint32_t rank, uint64_t sig_off,
		    void *sig_mh, uint64_t sig_value, uint32_t sig_op, bool strong,
		    void **request);
int rma_iget(void *ctx, int context, uint64_t remote_off, void *remote_mh, size_t size,
	     uint64_t local_off, void *local_mh, uint32_t rank, void **request);
int rma_iflush(void *ctx, int context, void *mh, uint32_t rank, void **request);
int rma_test(void *coll, void *request, int *done);
int rma_progress(void *ctx);
int rma_query_last_error(void *ctx, bool *has_error);

/* Tests only (rma_test_hooks.c, in the tests' archive, not the plugin): what
 * this rank believes of `rank`'s copy of a window, so a test
 * can forge a key or a size as a lying peer would. */
int rma_test_peer_window(void *mhandle, uint32_t rank, uint64_t *key, uint64_t *size);
int rma_test_set_peer_window(void *mhandle, uint32_t rank, uint64_t key, uint64_t size);
/* ... the window id its signal messages carry, the messages it refused, and
 * whether signals travel as messages (no FI_ATOMIC). */
int rma_test_set_peer_id(void *mhandle, uint32_t rank, uint64_t id);
unsigned rma_test_refused(void *coll);
bool rma_test_msg_signals(void *coll);

#endif
