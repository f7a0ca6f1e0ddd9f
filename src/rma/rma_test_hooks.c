/*
 * rma_test_hooks.c - what the unit tests read and forge inside a window or a
 * collective (a peer's key, a refused signal). Linked into the tests' static
 * archive only: the plugin NCCL loads has none of it.
 */
#include "rma/rma_int.h"

int rma_test_peer_window(void *mhandle, uint32_t rank, uint64_t *key, uint64_t *size)
{
	struct rma_win *w = mhandle;
	if (!w || atomic_load(&w->magic) != RMA_WIN_MAGIC || rank >= (uint32_t)w->coll->nranks)
		return -FI_EINVAL;
	*key = w->peers[rank].key;
	*size = w->peers[rank].size;
	return 0;
}

int rma_test_set_peer_id(void *mhandle, uint32_t rank, uint64_t id)
{
	struct rma_win *w = mhandle;
	if (!w || atomic_load(&w->magic) != RMA_WIN_MAGIC || rank >= (uint32_t)w->coll->nranks)
		return -FI_EINVAL;
	w->peers[rank].id = id;
	return 0;
}

unsigned rma_test_refused(void *coll)
{
	struct rma_coll *c = coll;
	return c && c->magic == RMA_COLL_MAGIC ? atomic_load(&c->refused) : 0;
}

bool rma_test_msg_signals(void *coll)
{
	struct rma_coll *c = coll;
	return c && c->magic == RMA_COLL_MAGIC && c->msg_signals;
}

int rma_test_set_peer_window(void *mhandle, uint32_t rank, uint64_t key, uint64_t size)
{
	struct rma_win *w = mhandle;
	if (!w || atomic_load(&w->magic) != RMA_WIN_MAGIC || rank >= (uint32_t)w->coll->nranks)
		return -FI_EINVAL;
	w->peers[rank].key = key;
	w->peers[rank].size = size;
	return 0;
}
