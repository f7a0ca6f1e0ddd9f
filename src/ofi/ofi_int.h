/*
 * ofi_int.h - what an endpoint's files share inside the ofi layer: ofi_ep.c
 * opens, progresses and closes the endpoint and calls these for the parts the
 * other files own. Nothing outside src/ofi/ includes it.
 */
#ifndef OFI_INT_H
#define OFI_INT_H

#include "ofi/ofi.h"

/* ---- control receive pools (ofi_pool.c) ---- */

/* Posts again the receives that could not be posted (-FI_EAGAIN); CQ lock held. */
void ofi_pools_repost(struct ofi_ep *ep);
/* FI_RX_CQ_DATA: the pool receive whose context a peer's RMA write completed
 * on, found by its address alone, never read through (a provider without the
 * mode may leave anything there: libfabric 1.17's shm leaves a stale 1), so
 * NULL for anything that is not one of the endpoint's pool receives, or one
 * that is not posted. CQ lock held. */
struct ofi_op *ofi_pool_find(struct ofi_ep *ep, const void *ctx);
/* ... and posts it again, unread (the write's bytes went elsewhere). CQ lock held. */
void ofi_pool_return(struct ofi_op *op);
/* Frees every pool of the endpoint, after the endpoint itself closed. */
void ofi_pools_free(struct ofi_ep *ep);

/* ---- progress thread (ofi_thread.c) ---- */

/* Stops the endpoint's progress thread (ep->has_thread) and forgets it. */
void ofi_thread_end(struct ofi_ep *ep);

/* ---- drain of unexpected messages (ofi_drain.c) ---- */

/* Starts or resumes the sweep when it is due; CQ lock held. */
void ofi_drain_kick(struct ofi_ep *ep);
void ofi_drain_free(struct ofi_drain *d);

#endif
