/*
 * ofi_pool.c - an endpoint's control receive pools: untagged receives kept
 * posted for control messages addressed to many objects, each message handed
 * to its pool's handler by its route and the buffer posted again.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ofi/ofi.h"
#include "ofi/ofi_int.h"
#include "log/log.h"
#include "util/util.h"

/* A pool is a list of slabs: it starts with one and grows (never shrinks)
 * when the objects it serves grow, so control messages always find a posted
 * receive. Slabs are linked and read under the endpoint's CQ lock. */
struct ofi_rx_slab {
	struct ofi_rx_slab *next;
	struct ofi_rx_pool *pool;
	int count;
	char *mem;
	struct ofi_mr *mr;      /* FI_MR_LOCAL */
	struct ofi_op *ops;
	atomic_int *need;       /* 1: waiting for a re-post */
};

struct ofi_rx_pool {
	struct ofi_ep *ep;
	uint64_t tag, ignore;
	size_t size;
	ofi_rx_handler_fn fn;
	void *arg;
	struct ofi_rx_slab *slabs;
	int total;              /* receives in all slabs */
	atomic_int retry;       /* buffers waiting for a re-post */
};

/* Control receives are untagged: the provider keeps them apart from the
 * tagged data receives, so matching a data message never walks past them
 * (with hundreds posted, each tagged match would pay for them). Any
 * control message may land in any pool's buffer; its route picks the pool
 * whose handler takes it (pool_done). */
static int pool_post(struct ofi_rx_slab *sl, int i)
{
	struct ofi_rx_pool *p = sl->pool;
	return (int)ofi_ep_recv(p->ep, sl->mem + (size_t)i * p->size, p->size,
				sl->mr ? sl->mr->desc : NULL, &sl->ops[i].ctx);
}

/* The pool whose (tag, ignore) the message's route matches, or NULL. */
static struct ofi_rx_pool *pool_route(struct ofi_ep *ep, uint64_t route)
{
	for (int k = 0; k < ep->npools; k++) {
		struct ofi_rx_pool *q = ep->pools[k];
		if (((route ^ q->tag) & ~q->ignore) == 0)
			return q;
	}
	return NULL;
}

static void pool_mark(struct ofi_rx_slab *sl, int i)
{
	atomic_store(&sl->need[i], 1);
	atomic_fetch_add(&sl->pool->retry, 1);
}

/* Runs with the CQ lock held, like the callbacks: no buffer is posted twice. */
static void pool_repost_waiting(struct ofi_rx_pool *p)
{
	for (struct ofi_rx_slab *sl = p->slabs; sl && atomic_load(&p->retry); sl = sl->next) {
		for (int i = 0; i < sl->count && atomic_load(&p->retry); i++) {
			if (!atomic_load(&sl->need[i]))
				continue;
			if (pool_post(sl, i))
				return;
			atomic_store(&sl->need[i], 0);
			atomic_fetch_sub(&p->retry, 1);
		}
	}
}

static void pool_done(struct ofi_op *op, const struct fi_cq_tagged_entry *e,
		      const struct fi_cq_err_entry *err)
{
	struct ofi_rx_slab *sl = op->owner;
	struct ofi_rx_pool *p = sl->pool;
	if (err) {
		if (err->err == FI_ECANCELED)
			return;
		LOG_WARN(NCCL_NET, "device %s: a control receive failed: %s", p->ep->dom->name,
			 ofi_strerror(err->err));
	} else {
		const char *msg = sl->mem + (size_t)op->index * p->size;
		uint64_t route = 0;
		struct ofi_rx_pool *to = NULL;
		if (e->len >= sizeof(route)) {
			memcpy(&route, msg, sizeof(route));
			to = pool_route(p->ep, route);
		}
		if (to) {
			to->fn(p->ep, to->arg, msg, e->len, route);
		} else {
			atomic_fetch_add(&p->ep->dropped, 1);
			LOG_WARN_LIMITED(NCCL_NET, "device %s: dropped a control message of %zu bytes "
					 "with no known route (0x%llx)", p->ep->dom->name,
					 (size_t)e->len, (unsigned long long)route);
		}
	}
	if (pool_post(sl, op->index))
		pool_mark(sl, op->index);
}

struct ofi_op *ofi_pool_find(struct ofi_ep *ep, const void *ctx)
{
	/* receives are posted with &op->ctx: an element of a slab's ops */
	uintptr_t a = (uintptr_t)ctx - offsetof(struct ofi_op, ctx);
	for (int k = 0; ctx && k < ep->npools; k++) {
		for (struct ofi_rx_slab *sl = ep->pools[k]->slabs; sl; sl = sl->next) {
			uintptr_t s = (uintptr_t)sl->ops;
			if (a < s || a - s >= (size_t)sl->count * sizeof(*sl->ops))
				continue;
			if ((a - s) % sizeof(*sl->ops))
				return NULL;
			size_t i = (a - s) / sizeof(*sl->ops);
			/* one waiting for a re-post is not posted: nothing took it */
			return atomic_load(&sl->need[i]) ? NULL : &sl->ops[i];
		}
	}
	return NULL;
}

void ofi_pool_return(struct ofi_op *op)
{
	struct ofi_rx_slab *sl = op->owner;
	if (pool_post(sl, op->index))
		pool_mark(sl, op->index); /* (-FI_EAGAIN: ofi_pools_repost tries again) */
}

/* Adds a slab of count receives and posts them. Caller holds the CQ lock. */
static int pool_add_slab_locked(struct ofi_rx_pool *p, int count)
{
	struct ofi_ep *ep = p->ep;
	struct ofi_rx_slab *sl = calloc(1, sizeof(*sl));
	if (!sl)
		return -FI_ENOMEM;
	sl->pool = p;
	sl->count = count;
	sl->mem = calloc((size_t)count, p->size);
	sl->ops = calloc((size_t)count, sizeof(*sl->ops));
	sl->need = calloc((size_t)count, sizeof(*sl->need));
	int rc = 0;
	if (!sl->mem || !sl->ops || !sl->need)
		rc = -FI_ENOMEM;
	else if (ep->dom->mr_mode & FI_MR_LOCAL)
		rc = ofi_mr_get(ep->dom, sl->mem, (size_t)count * p->size, FI_HMEM_SYSTEM, 0, &sl->mr);
	if (rc) {
		free(sl->mem);
		free(sl->ops);
		free(sl->need);
		free(sl);
		return rc;
	}
	/* linked before posting: ofi_ep_close frees it from here on */
	sl->next = p->slabs;
	p->slabs = sl;
	p->total += count;
	for (int i = 0; i < count; i++) {
		sl->ops[i].complete = pool_done;
		sl->ops[i].owner = sl;
		sl->ops[i].index = i;
		rc = pool_post(sl, i);
		if (rc == -FI_EAGAIN) {
			pool_mark(sl, i);
		} else if (rc) {
			LOG_WARN(NCCL_NET, "device %s: posting control receives failed: %s",
				 ep->dom->name, ofi_strerror(rc));
			for (int j = i; j < count; j++)
				pool_mark(sl, j); /* retried at the next progress */
			return rc;
		}
	}
	return 0;
}

int ofi_ep_rx_pool_start(struct ofi_ep *ep, uint64_t tag, uint64_t ignore, int count,
			 size_t size, ofi_rx_handler_fn fn, void *arg)
{
	if (ep->npools == OFI_EP_MAX_POOLS)
		return -FI_ENOSPC;
	struct ofi_rx_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return -FI_ENOMEM;
	p->ep = ep;
	p->tag = tag;
	p->ignore = ignore;
	p->size = UTIL_ALIGN_UP(size, 64);
	p->fn = fn;
	p->arg = arg;
	pthread_mutex_lock(&ep->cq_lock);
	ep->pools[ep->npools++] = p; /* ofi_ep_close frees it from here on */
	int rc = pool_add_slab_locked(p, count);
	pthread_mutex_unlock(&ep->cq_lock);
	return rc;
}

int ofi_ep_rx_pool_reserve(struct ofi_ep *ep, int index, int total)
{
	if (index < 0 || index >= ep->npools)
		return -FI_EINVAL;
	struct ofi_rx_pool *p = ep->pools[index];
	if (total > OFI_RX_POOL_MAX)
		total = OFI_RX_POOL_MAX;
	pthread_mutex_lock(&ep->cq_lock);
	int rc = 0;
	if (p->total < total) {
		/* in steps, so a burst of connections does not add a slab each */
		int add = total - p->total;
		add = add < p->total ? p->total : add;
		if (p->total + add > OFI_RX_POOL_MAX)
			add = OFI_RX_POOL_MAX - p->total;
		rc = pool_add_slab_locked(p, add);
		if (!rc)
			LOG_TRACE(NCCL_NET, "device %s endpoint %d: %d control receives posted",
				  ep->dom->name, ep->index, p->total);
	}
	pthread_mutex_unlock(&ep->cq_lock);
	return rc;
}

void ofi_pools_repost(struct ofi_ep *ep)
{
	for (int k = 0; k < ep->npools; k++)
		if (atomic_load(&ep->pools[k]->retry))
			pool_repost_waiting(ep->pools[k]);
}

void ofi_pools_free(struct ofi_ep *ep)
{
	for (int k = 0; k < ep->npools; k++) {
		struct ofi_rx_slab *sl = ep->pools[k]->slabs;
		while (sl) {
			struct ofi_rx_slab *next = sl->next;
			ofi_mr_put(sl->mr);
			free(sl->mem);
			free(sl->ops);
			free(sl->need);
			free(sl);
			sl = next;
		}
		free(ep->pools[k]);
	}
}
