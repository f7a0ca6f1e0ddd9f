/*
 * ofi_ep.c - an endpoint with its own CQ and AV, shared by every connection of
 * a device, and the progress loop that reads its completions.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_tagged.h>

#include "ofi/ofi.h"
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

static void threads_forget(struct ofi_ep *ep);
static void thread_stop(struct ofi_ep *ep);
static void drain_kick(struct ofi_ep *ep);
static void drain_free(struct ofi_drain *d);

int ofi_ep_open(struct ofi_domain *dom, int index, struct ofi_ep **out)
{
	struct ofi_ep *ep = calloc(1, sizeof(*ep));
	int rc;
	if (!ep)
		return -FI_ENOMEM;
	ep->dom = dom;
	ep->index = index;
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE); /* callbacks post under it */
	pthread_mutex_init(&ep->cq_lock, &ma);
	pthread_mutexattr_destroy(&ma);
	ep->serialize = dom->traits.serialize;
	pthread_mutex_init(&ep->lock, NULL);
	pthread_mutex_init(&ep->wake_lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ep->wake, &ca);
	pthread_condattr_destroy(&ca);

	struct fid_domain *fd = dom->domain;
	if (dom->split && index > 0) {
		rc = fi_domain(dom->fabric, dom->info, &ep->own_domain, NULL);
		if (rc) {
			LOG_WARN(NCCL_INIT | NCCL_NET, "device %s: fi_domain for rail %d failed: %s",
				 dom->name, index, ofi_strerror(rc));
			goto fail;
		}
		fd = ep->own_domain;
	}
	struct fi_cq_attr cq_attr = {
		.format = FI_CQ_FORMAT_TAGGED,
		.wait_obj = FI_WAIT_NONE,
		.size = 0, /* provider default */
	};
	rc = fi_cq_open(fd, &cq_attr, &ep->cq, NULL);
	if (rc) {
		LOG_WARN(NCCL_INIT | NCCL_NET, "device %s: fi_cq_open failed: %s", dom->name,
			 ofi_strerror(rc));
		goto fail;
	}
	struct fi_av_attr av_attr = { .type = dom->info->domain_attr->av_type };
	rc = fi_av_open(fd, &av_attr, &ep->av, NULL);
	if (rc) {
		LOG_WARN(NCCL_INIT | NCCL_NET, "device %s: fi_av_open failed: %s", dom->name,
			 ofi_strerror(rc));
		goto fail;
	}
	rc = fi_endpoint(fd, dom->info, &ep->ep, NULL);
	if (rc) {
		LOG_WARN(NCCL_INIT | NCCL_NET, "device %s: fi_endpoint failed: %s", dom->name,
			 ofi_strerror(rc));
		goto fail;
	}
	rc = fi_ep_bind(ep->ep, &ep->av->fid, 0);
	if (!rc)
		rc = fi_ep_bind(ep->ep, &ep->cq->fid, FI_TRANSMIT | FI_RECV);
	if (rc) {
		LOG_WARN(NCCL_INIT | NCCL_NET, "device %s: fi_ep_bind failed: %s%s", dom->name,
			 ofi_strerror(rc), dom->traits.close_unbound_crashes ?
			 " (the endpoint is left open: closing it unbound would crash this provider)" : "");
		if (dom->traits.close_unbound_crashes)
			ep->ep = NULL;
		goto fail;
	}

	/* NCCL forbids CUDA API calls under it: every endpoint is asked, before
	 * fi_enable, whatever the libfabric version. A provider that does not know
	 * the option answers -FI_ENOPROTOOPT. */
	bool permitted = false;
	ep->cuda_api_rc = fi_setopt(&ep->ep->fid, FI_OPT_ENDPOINT, POLICY_OPT_CUDA_API_PERMITTED,
				    &permitted, sizeof(permitted));
	LOG_TRACE(NCCL_NET, "device %s endpoint %d: FI_OPT_CUDA_API_PERMITTED=false answered %d (%s)",
		  dom->name, index, ep->cuda_api_rc, policy_cuda_answer(ep->cuda_api_rc, fi_version()));
	if (dom->hmem && ep->cuda_api_rc != dom->expected_cuda_rc) {
		/* GPU buffers were promised to NCCL on the strength of the probe's
		 * answer; an endpoint that answers otherwise cannot keep that promise. */
		LOG_WARN(NCCL_INIT | NCCL_NET,
			 "device %s endpoint %d answered FI_OPT_CUDA_API_PERMITTED with %d (%s), but "
			 "the probe endpoint answered %d (%s) and GPU memory was advertised to NCCL "
			 "on that basis. Refusing the endpoint; run with NCCL_FABRIC_HMEM=off to use "
			 "host memory only",
			 dom->name, index, ep->cuda_api_rc, policy_cuda_answer(ep->cuda_api_rc, fi_version()),
			 dom->expected_cuda_rc, policy_cuda_answer(dom->expected_cuda_rc, fi_version()));
		rc = -FI_EOPNOTSUPP;
		goto fail;
	}

	int stale;
	rc = ofi_enable(ep->ep, dom->traits.shm_region, &stale);
	if (stale)
		LOG_INFO(NCCL_INIT | NCCL_NET, "device %s: removed %d shm region(s) a dead process "
			 "with this process's pid left under /dev/shm", dom->name, stale);
	if (rc) {
		LOG_WARN(NCCL_INIT | NCCL_NET, "device %s: fi_enable failed: %s%s", dom->name,
			 ofi_strerror(rc), rc == -FI_EBUSY && dom->traits.shm_region ?
			 " (shm: a region of this endpoint's name exists under /dev/shm)" : "");
		goto fail;
	}
	ep->namelen = sizeof(ep->name);
	rc = fi_getname(&ep->ep->fid, ep->name, &ep->namelen);
	if (rc) {
		LOG_WARN(NCCL_INIT | NCCL_NET,
			 "device %s: fi_getname failed: %s (addresses longer than %d bytes do not "
			 "fit a connection handle)",
			 dom->name, ofi_strerror(rc), OFI_ADDR_MAX);
		goto fail;
	}
	if (dom->traits.shm_region && ofi_shm_self_init(&ep->shm, ep->name, ep->namelen))
		LOG_INFO(NCCL_INIT | NCCL_NET,
			 "device %s: this endpoint's shm region is not of a layout the plugin knows; "
			 "peer regions are checked for owner and process only", dom->name);
	*out = ep;
	return 0;
fail:
	ofi_ep_close(ep);
	return rc;
}

void ofi_ep_close(struct ofi_ep *ep)
{
	if (!ep)
		return;
	if (ep->has_thread) {
		threads_forget(ep);
		thread_stop(ep);
	}
	/* Endpoint first, then CQ and AV; the domain frees zombies afterwards. */
	if (ep->ep)
		fi_close(&ep->ep->fid);
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
	drain_free(ep->drain);
	if (ep->av)
		fi_close(&ep->av->fid);
	if (ep->cq)
		fi_close(&ep->cq->fid);
	if (ep->own_domain)
		fi_close(&ep->own_domain->fid);
	free(ep->addrs);
	pthread_mutex_destroy(&ep->cq_lock);
	pthread_mutex_destroy(&ep->wake_lock);
	pthread_cond_destroy(&ep->wake);
	pthread_mutex_destroy(&ep->lock);
	free(ep);
}

static void pool_repost_waiting(struct ofi_rx_pool *p);

void ofi_domain_add_zombie(struct ofi_domain *dom, struct ofi_zombie *z)
{
	pthread_mutex_lock(&dom->zombie_lock);
	dlist_insert_tail(&dom->zombies, &z->link);
	pthread_mutex_unlock(&dom->zombie_lock);
}

/* Frees the zombies whose operations are all done and expires those that are
 * due (struct ofi_zombie). Expire runs under zombie_lock, which keeps the
 * zombie from being freed meanwhile; no thread takes zombie_lock while it
 * holds a CQ lock, which expire's cancels take. */
static void reap_zombies(struct ofi_domain *dom)
{
	struct dlist *it, *tmp;
	struct dlist done;
	uint64_t now = util_coarse_ns();
	int timed = 0;
	dlist_init(&done);
	pthread_mutex_lock(&dom->zombie_lock);
	dlist_foreach(&dom->zombies, it) {
		struct ofi_zombie *z = container_of(it, struct ofi_zombie, link);
		if (z->expire && !atomic_load(&z->expired))
			timed += atomic_load(z->pending);
	}
	dlist_foreach_safe(&dom->zombies, it, tmp) {
		struct ofi_zombie *z = container_of(it, struct ofi_zombie, link);
		int pending = atomic_load(z->pending);
		if (pending == 0) {
			dlist_remove(&z->link);
			dlist_insert_tail(&done, &z->link);
		} else if (z->expire && !atomic_load(&z->expired) &&
			   (now >= z->expire_ns || timed > OFI_ZOMBIE_TIMED_OPS)) {
			atomic_store(&z->expired, true);
			timed -= pending;
			z->expire(z);
		}
	}
	atomic_store(&dom->zombie_check_ns, now + OFI_ZOMBIE_CHECK_NS);
	pthread_mutex_unlock(&dom->zombie_lock);
	while ((it = dlist_pop_head(&done)))
		container_of(it, struct ofi_zombie, link)->release(container_of(it, struct ofi_zombie, link));
}

int ofi_ep_progress(struct ofi_ep *ep)
{
	struct fi_cq_tagged_entry entries[256];
	int batch = ep->dom->cq_batch;
	int total = 0;

	if (pthread_mutex_trylock(&ep->cq_lock))
		return 0; /* another thread is reading this CQ; its completions serve us too */
	atomic_store_explicit(&ep->last_read_ns, util_coarse_ns(), memory_order_relaxed);
	if (ep->drain)
		drain_kick(ep); /* (its peeks complete in the loop below) */
	for (;;) {
		ssize_t n = fi_cq_read(ep->cq, entries, (size_t)batch);
		if (n > 0) {
			for (ssize_t i = 0; i < n; i++) {
				struct ofi_op *op = entries[i].op_context;
				uint64_t fl = entries[i].flags;
				/* a peer's RMA write with CQ data has no context of ours
				 * (some flag it FI_RMA|FI_REMOTE_CQ_DATA only:
				 * policy_traits.c, "remote write flags") */
				if ((fl & FI_REMOTE_WRITE) || (!op && (fl & FI_REMOTE_CQ_DATA))) {
					if (ep->rw_fn)
						ep->rw_fn(ep, ep->rw_arg, entries[i].data, entries[i].len);
					continue;
				}
				if (!op) {
					atomic_fetch_add(&ep->dropped, 1);
					LOG_WARN_LIMITED(NCCL_NET, "device %s: a completion without context "
							 "(flags 0x%llx) was ignored", ep->dom->name,
							 (unsigned long long)fl);
					continue;
				}
				op->complete(op, &entries[i], NULL);
			}
			total += (int)n;
			if (n < batch)
				break;
			continue;
		}
		if (n == -FI_EAGAIN)
			break;
		if (n == -FI_EAVAIL) {
			/* Room for fields newer libfabric adds after the 1.17 layout
			 * (src_addr in 1.20): we ask for a newer API version. */
			union {
				struct fi_cq_err_entry e;
				char room[256];
			} u;
			memset(&u, 0, sizeof(u));
			struct fi_cq_err_entry err;
			ssize_t r = fi_cq_readerr(ep->cq, &u.e, 0);
			err = u.e;
			if (r == 1 || r == sizeof(err)) {
				/* The one place a provider's error sign is normalised
				 * (policy_traits.c, "CQ error sign"). */
				err.err = ofi_cq_err_code(&err);
				if (err.err != FI_ENOMSG) /* (a peek that found nothing) */
					atomic_fetch_add(&ep->cq_errors, 1);
				struct ofi_op *op = err.op_context;
				if (err.flags & FI_REMOTE_WRITE)
					LOG_WARN_LIMITED(NCCL_NET, "device %s: a peer's RMA write into this "
							 "process failed: %s", ep->dom->name,
							 ofi_strerror(err.err));
				else if (op)
					op->complete(op, NULL, &err);
				else
					LOG_WARN(NCCL_NET, "device %s: completion error without context: %s",
						 ep->dom->name, ofi_strerror(err.err));
				total++;
				continue;
			}
			if (r == -FI_EAGAIN)
				break;
			LOG_WARN(NCCL_NET, "device %s: fi_cq_readerr failed: %s", ep->dom->name,
				 ofi_strerror((int)r));
			pthread_mutex_unlock(&ep->cq_lock);
			return (int)r;
		}
		LOG_WARN(NCCL_NET, "device %s: fi_cq_read failed: %s", ep->dom->name,
			 ofi_strerror((int)n));
		pthread_mutex_unlock(&ep->cq_lock);
		return (int)n;
	}
	if (total)
		atomic_fetch_add(&ep->completions, (uint_fast64_t)total);
	for (int k = 0; k < ep->npools; k++)
		if (atomic_load(&ep->pools[k]->retry))
			pool_repost_waiting(ep->pools[k]);
	pthread_mutex_unlock(&ep->cq_lock);
	if (!dlist_empty(&ep->dom->zombies) &&
	    (total || util_coarse_ns() >= atomic_load(&ep->dom->zombie_check_ns)))
		reap_zombies(ep->dom);
	return total;
}

int ofi_ep_resolve(struct ofi_ep *ep, const void *addr, size_t len, fi_addr_t *out)
{
	char why[256];
	uint32_t fmt = ep->dom->info->addr_format;
	if (ofi_addr_check(fmt, addr, len, why, sizeof(why))) {
		atomic_fetch_add(&ep->dropped, 1);
		LOG_WARN_LIMITED(NCCL_NET, "device %s: a peer address (%s) was refused before fi_av_insert: %s. "
			 "The handle or message came from another provider, another version of the "
			 "plugin, or was damaged",
			 ep->dom->name, ofi_addr_format_name(fmt), why);
		return -FI_EINVAL;
	}
	pthread_mutex_lock(&ep->lock);
	for (int i = 0; i < ep->naddrs; i++) {
		if (ep->addrs[i].len == len && !memcmp(ep->addrs[i].bytes, addr, len)) {
			*out = ep->addrs[i].fi_addr;
			pthread_mutex_unlock(&ep->lock);
			return 0;
		}
	}
	pid_t shm_pid = 0;
	uint64_t shm_start = 0;
	if (ep->dom->traits.shm_region) {
		/* libfabric maps what the name reaches, unchecked (policy_traits.c,
		 * "shm region") */
		int src = ofi_shm_check(&ep->shm, addr, len, &shm_pid, &shm_start, why, sizeof(why));
		if (src) {
			pthread_mutex_unlock(&ep->lock);
			atomic_fetch_add(&ep->dropped, 1);
			LOG_WARN_LIMITED(NCCL_NET, "device %s: a peer address was refused before "
					 "fi_av_insert: %s. A stale or damaged handle, a peer that exited, "
					 "or a peer in another pid namespace (shm needs one host and one "
					 "pid namespace)", ep->dom->name, why);
			return src;
		}
	}
	if (ep->naddrs == ep->addrs_cap) {
		int cap = ep->addrs_cap ? ep->addrs_cap * 2 : 16;
		void *n = realloc(ep->addrs, (size_t)cap * sizeof(*ep->addrs));
		if (!n) {
			pthread_mutex_unlock(&ep->lock);
			return -FI_ENOMEM;
		}
		ep->addrs = n;
		ep->addrs_cap = cap;
	}
	fi_addr_t fa = FI_ADDR_UNSPEC;
	int rc = fi_av_insert(ep->av, addr, 1, &fa, 0, NULL);
	if (rc != 1) {
		pthread_mutex_unlock(&ep->lock);
		LOG_WARN(NCCL_NET, "device %s: fi_av_insert of a peer address failed: %s",
			 ep->dom->name, rc < 0 ? ofi_strerror(rc) : "address rejected");
		return rc < 0 ? rc : -FI_EINVAL;
	}
	struct ofi_peer_addr *pa = &ep->addrs[ep->naddrs++];
	pa->len = len;
	memcpy(pa->bytes, addr, len);
	pa->fi_addr = fa;
	pa->silent = false;
	pa->shm_pid = shm_pid;
	pa->shm_start = shm_start;
	pthread_mutex_unlock(&ep->lock);
	*out = fa;
	return 0;
}

/* The address cache's entry of an inserted peer, or NULL; caller holds ep->lock. */
static struct ofi_peer_addr *peer_entry_locked(struct ofi_ep *ep, fi_addr_t peer)
{
	for (int i = 0; i < ep->naddrs; i++)
		if (ep->addrs[i].fi_addr == peer)
			return &ep->addrs[i];
	return NULL;
}

bool ofi_ep_peer_gone(struct ofi_ep *ep, fi_addr_t peer)
{
	pthread_mutex_lock(&ep->lock);
	struct ofi_peer_addr *pa = peer_entry_locked(ep, peer);
	pid_t pid = pa ? pa->shm_pid : 0;
	uint64_t start = pa ? pa->shm_start : 0;
	pthread_mutex_unlock(&ep->lock);
	return pid && ofi_shm_gone(pid, start);
}

int ofi_ep_peer_arm_reset(struct ofi_ep *ep, fi_addr_t peer, unsigned timeout_ms, bool shut,
			  struct ofi_sock_armed *armed)
{
	unsigned char name[OFI_ADDR_MAX];
	size_t len = 0;
	pthread_mutex_lock(&ep->lock);
	struct ofi_peer_addr *pa = peer_entry_locked(ep, peer);
	if (pa) {
		len = pa->len;
		memcpy(name, pa->bytes, len);
	}
	pthread_mutex_unlock(&ep->lock);
	if (!len)
		return -FI_ENOENT;
	int rc = ofi_sock_arm(ep->name, ep->namelen, name, len, timeout_ms, armed);
	if (shut && rc >= 0)
		rc = ofi_sock_shut(name, len, armed);
	return rc;
}

void ofi_ep_peer_set_silent(struct ofi_ep *ep, fi_addr_t peer, bool silent)
{
	pthread_mutex_lock(&ep->lock);
	struct ofi_peer_addr *pa = peer_entry_locked(ep, peer);
	if (pa)
		pa->silent = silent;
	pthread_mutex_unlock(&ep->lock);
}

bool ofi_ep_peer_silent(struct ofi_ep *ep, fi_addr_t peer)
{
	pthread_mutex_lock(&ep->lock);
	struct ofi_peer_addr *pa = peer_entry_locked(ep, peer);
	bool silent = pa && pa->silent;
	pthread_mutex_unlock(&ep->lock);
	return silent;
}

/* ---------------- shared control receives ---------------- */


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

/* ---------------- progress thread ---------------- */

/* Every endpoint with a running thread, so that exit() stops them before
 * libfabric's destructors close the providers under them (NCCL before 2.28
 * never finalizes). atexit from a shared object also runs at its dlclose. */
static pthread_mutex_t threads_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ofi_ep *threads_eps[64];
static int threads_n;
static bool threads_atexit;

static void threads_forget(struct ofi_ep *ep)
{
	pthread_mutex_lock(&threads_lock);
	for (int i = 0; i < threads_n; i++) {
		if (threads_eps[i] == ep) {
			threads_eps[i] = threads_eps[--threads_n];
			break;
		}
	}
	pthread_mutex_unlock(&threads_lock);
}

static void thread_wake(struct ofi_ep *ep)
{
	pthread_mutex_lock(&ep->wake_lock);
	pthread_cond_signal(&ep->wake);
	pthread_mutex_unlock(&ep->wake_lock);
}

static void thread_stop(struct ofi_ep *ep)
{
	atomic_store(&ep->thread_run, false);
	thread_wake(ep);
	pthread_join(ep->thread, NULL);
	ep->has_thread = false;
}

static void threads_stop_all(void)
{
	pthread_mutex_lock(&threads_lock);
	for (int i = 0; i < threads_n; i++)
		thread_stop(threads_eps[i]);
	threads_n = 0;
	pthread_mutex_unlock(&threads_lock);
}

/* Sleeps until bulk work starts on a busy thread's endpoint, or for the idle
 * interval; then reads the CQ if no other thread has for that long. */
static void thread_idle(struct ofi_ep *ep)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	uint64_t ns = (uint64_t)until.tv_nsec + OFI_EP_IDLE_NS;
	until.tv_sec += (time_t)(ns / 1000000000ULL);
	until.tv_nsec = (long)(ns % 1000000000ULL);
	pthread_mutex_lock(&ep->wake_lock);
	if (atomic_load_explicit(&ep->thread_run, memory_order_relaxed) &&
	    !(ep->thread_busy && atomic_load_explicit(&ep->bulk, memory_order_acquire) > 0))
		(void)pthread_cond_timedwait(&ep->wake, &ep->wake_lock, &until);
	pthread_mutex_unlock(&ep->wake_lock);
	uint64_t last = atomic_load_explicit(&ep->last_read_ns, memory_order_relaxed);
	if (util_coarse_ns() - last >= OFI_EP_IDLE_NS)
		(void)ofi_ep_progress(ep);
}

static void *progress_main(void *arg)
{
	struct ofi_ep *ep = arg;
	unsigned idle = 0;
	while (atomic_load_explicit(&ep->thread_run, memory_order_relaxed)) {
		if (!ep->thread_busy || atomic_load_explicit(&ep->bulk, memory_order_acquire) == 0) {
			thread_idle(ep);
			idle = 0;
			continue;
		}
		int n = ofi_ep_progress(ep);
		if (n > 0) {
			idle = 0;
			continue;
		}
		/* Spin while data is likely, then back off: a transfer waiting on
		 * its peer costs little CPU, and test() still progresses on NCCL's
		 * thread. */
		if (++idle < 256) {
			sched_yield();
		} else {
			struct timespec ts = { 0, idle < 4096 ? 20000 : 200000 };
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

void ofi_ep_bulk_hold(struct ofi_ep *ep)
{
	if (atomic_fetch_add_explicit(&ep->bulk, 1, memory_order_acq_rel) == 0 && ep->thread_busy)
		thread_wake(ep);
}

void ofi_ep_bulk_begin(struct ofi_op *op)
{
	op->bulk = true;
	ofi_ep_bulk_hold(op->ep);
}

int ofi_ep_start_progress_thread(struct ofi_ep *ep, bool busy)
{
	pthread_mutex_lock(&threads_lock);
	if (threads_n == (int)UTIL_ARRAY_SIZE(threads_eps)) {
		pthread_mutex_unlock(&threads_lock);
		LOG_WARN(NCCL_INIT | NCCL_NET, "device %s: more than %d progress threads; rail %d "
			 "progresses only when NCCL tests", ep->dom->name, threads_n, ep->index);
		return 0;
	}
	if (!threads_atexit)
		threads_atexit = atexit(threads_stop_all) == 0;
	threads_eps[threads_n++] = ep;
	pthread_mutex_unlock(&threads_lock);
	atomic_store(&ep->thread_run, true);
	ep->thread_busy = busy;
	int rc = pthread_create(&ep->thread, NULL, progress_main, ep);
	if (rc) {
		threads_forget(ep);
		LOG_WARN(NCCL_INIT | NCCL_NET, "device %s: cannot start a progress thread: %s",
			 ep->dom->name, strerror(rc));
		return -FI_ENOMEM;
	}
	ep->has_thread = true;
	return 0;
}

void ofi_cq_error_text(struct ofi_ep *ep, const struct fi_cq_err_entry *err, char *buf,
		       size_t len)
{
	const char *prov = fi_cq_strerror(ep->cq, err->prov_errno, err->err_data, NULL, 0);
	snprintf(buf, len, "%s (provider: %s)", fi_strerror(err->err), prov ? prov : "-");
}

/* ---------------- drain of unexpected messages ---------------- */

/* A node of the key space: the keys whose first len key bits (highest
 * first) are those of prefix. */
struct ofi_drain_node {
	uint64_t prefix; /* key bits in their tag positions */
	int len;
};

#define OFI_DRAIN_STACK 512
/* A message is taken whole into the scratch buffer, which grows to its
 * size up to this; a larger one is discarded (FI_DISCARD). */
#define OFI_DRAIN_BUF_MAX (4u << 20)
/* A receive for a message that another receive took meanwhile (a closing
 * connection's drain) would wait forever: cancelled after this. */
#define OFI_DRAIN_RECV_NS 1000000000ULL

enum ofi_drain_step { DRAIN_PEEK, DRAIN_RECV, DRAIN_DISCARD };

struct ofi_drain {
	struct ofi_op op;
	uint64_t key_mask;
	int key_bits;
	uint64_t bit[64];        /* the key's bits, highest first */
	ofi_drain_keep_fn keep;
	void *arg;
	bool busy;               /* a peek, receive or discard is posted */
	enum ofi_drain_step step;
	uint64_t tag;            /* the message being taken */
	size_t len;
	uint64_t posted_ns;      /* when the receive was posted */
	bool cancelled;          /* ... and cancelled, having waited too long */
	bool found;              /* this walk found a message to drain */
	struct ofi_drain_node cur; /* the node being looked at */
	bool have_cur;
	uint64_t next_ns;        /* when the next sweep starts (or resumes; util_now_ns) */
	uint64_t coarse_next_ns; /* ... on the coarse clock, what every progress call reads */
	uint64_t slice_end_ns;
	void *buf;               /* scratch for the messages taken */
	size_t buf_len;
	struct ofi_mr *buf_mr;   /* FI_MR_LOCAL */
	int depth;
	struct ofi_drain_node stack[OFI_DRAIN_STACK];
};

/* The node's mask: the tag bits its prefix fixes. */
static uint64_t drain_node_mask(const struct ofi_drain *d, int len)
{
	uint64_t m = 0;
	for (int i = 0; i < len; i++)
		m |= d->bit[i];
	return m;
}

/* The next sweep starts (or resumes) ns from now. */
static void drain_wait(struct ofi_drain *d, uint64_t ns)
{
	d->next_ns = util_now_ns() + ns;
	d->coarse_next_ns = ns ? util_coarse_ns() + ns : 0;
}

static ssize_t drain_peek(struct ofi_ep *ep, uint64_t tag, uint64_t ignore, uint64_t flags)
{
	struct ofi_drain *d = ep->drain;
	struct fi_msg_tagged msg = {
		.msg_iov = NULL, .desc = NULL, .iov_count = 0, .addr = FI_ADDR_UNSPEC,
		.tag = tag, .ignore = ignore, .context = &d->op.ctx, .data = 0,
	};
	memset(&d->op.ctx, 0, sizeof(d->op.ctx));
	ofi_ep_enter(ep);
	ssize_t rc = fi_trecvmsg(ep->ep, &msg, flags | FI_PEEK | FI_COMPLETION);
	ofi_ep_leave(ep);
	return rc;
}

/* Room for len bytes in the scratch buffer; false when there cannot be. */
static bool drain_buf_fit(struct ofi_ep *ep, size_t len)
{
	struct ofi_drain *d = ep->drain;
	if (len <= d->buf_len && d->buf)
		return true;
	if (len > OFI_DRAIN_BUF_MAX)
		return false;
	size_t want = d->buf_len ? d->buf_len : 65536;
	while (want < len)
		want *= 2;
	ofi_mr_put(d->buf_mr);
	d->buf_mr = NULL;
	free(d->buf);
	d->buf_len = 0;
	d->buf = malloc(want);
	if (!d->buf)
		return false;
	if ((ep->dom->mr_mode & FI_MR_LOCAL) &&
	    ofi_mr_get(ep->dom, d->buf, want, FI_HMEM_SYSTEM, 0, &d->buf_mr)) {
		free(d->buf);
		d->buf = NULL;
		return false;
	}
	d->buf_len = want;
	return true;
}

/* Posts the sweep's next operation; CQ lock held. Leaves d->busy false when
 * the sweep is done or paused. */
static void drain_next(struct ofi_ep *ep)
{
	struct ofi_drain *d = ep->drain;
	uint64_t now = util_now_ns();
	if (now >= d->slice_end_ns) {
		drain_wait(d, 0); /* resumes at the next progress call */
		return;
	}
	ssize_t rc;
	switch (d->step) {
	case DRAIN_RECV:
		/* An ordinary receive of that very tag: the provider takes it the
		 * way it takes any message (segments, rendezvous, flow control),
		 * which a discard does not everywhere. */
		memset(&d->op.ctx, 0, sizeof(d->op.ctx));
		d->posted_ns = now;
		d->cancelled = false;
		rc = ofi_ep_trecv(ep, d->buf, d->buf_len, d->buf_mr ? d->buf_mr->desc : NULL,
				  FI_ADDR_UNSPEC, d->tag, 0, &d->op.ctx);
		break;
	case DRAIN_DISCARD:
		rc = drain_peek(ep, d->tag, 0, FI_DISCARD);
		break;
	default:
		if (!d->have_cur) {
			if (!d->depth) {
				/* the walk is done; one that found messages to drain
				 * is followed by another at once: more may be coming */
				drain_wait(d, d->found ? 0 : OFI_DRAIN_NS);
				d->found = false;
				d->cur = (struct ofi_drain_node){ 0, 0 };
				d->have_cur = true;
				return;
			}
			d->cur = d->stack[--d->depth];
			d->have_cur = true;
		}
		rc = drain_peek(ep, d->cur.prefix, ~drain_node_mask(d, d->cur.len), 0);
		break;
	}
	if (rc == 0) {
		d->busy = true;
		return;
	}
	if (rc == -FI_EAGAIN) {
		drain_wait(d, 0); /* the queue is full: at the next call */
		return;
	}
	LOG_WARN_LIMITED(NCCL_NET, "device %s: draining unexpected messages failed: %s; this "
			 "endpoint stops draining", ep->dom->name, ofi_strerror((int)rc));
	d->next_ns = d->coarse_next_ns = UINT64_MAX;
}

static void drain_push(struct ofi_drain *d, uint64_t prefix, int len)
{
	if (d->depth < OFI_DRAIN_STACK)
		d->stack[d->depth++] = (struct ofi_drain_node){ prefix, len };
	/* (else left for the next walk) */
}

static void drain_done(struct ofi_op *op, const struct fi_cq_tagged_entry *e,
		       const struct fi_cq_err_entry *err)
{
	struct ofi_ep *ep = op->owner;
	struct ofi_drain *d = ep->drain;
	d->busy = false;
	if (d->step != DRAIN_PEEK) {
		/* taken (a larger message than the peek said is cut: as good),
		 * or gone meanwhile; either way the node is looked at again */
		bool took = e || (err && err->err == FI_ETRUNC);
		if (err && !took && err->err != FI_ENOMSG && err->err != FI_ECANCELED)
			LOG_WARN_LIMITED(NCCL_NET, "device %s: draining a message failed: %s",
					 ep->dom->name, ofi_strerror(err->err));
		if (took) {
			unsigned n = atomic_fetch_add(&ep->drained, 1) + 1;
			LOG_WARN_LIMITED(NCCL_NET, "device %s: drained a data message that no "
					 "connection will take (tag 0x%llx, %zu bytes: its connection "
					 "is closed or never existed; %u so far). A peer sent after "
					 "its connection closed, or a process forges messages",
					 ep->dom->name, (unsigned long long)d->tag, d->len, n);
		}
		d->step = DRAIN_PEEK;
	} else if (!e) {
		if (err->err != FI_ENOMSG && err->err != FI_ECANCELED)
			LOG_WARN_LIMITED(NCCL_NET, "device %s: a peek for unexpected messages failed: %s",
					 ep->dom->name, ofi_strerror(err->err));
		d->have_cur = false; /* nothing unexpected under this node */
	} else if (!d->keep(ep, d->arg, e->tag)) {
		d->tag = e->tag;
		d->len = e->len;
		d->found = true;
		/* discarded unread where a receive would follow the sender's
		 * connection, which may be freed (traits.whole_max) */
		size_t whole = ep->dom->traits.whole_max;
		d->step = (!whole || e->len <= whole) && drain_buf_fit(ep, e->len) ? DRAIN_RECV :
										      DRAIN_DISCARD;
	} else {
		/* Someone takes it: step over its key. Its key's path below the
		 * node is split off, the siblings along it looked at instead. */
		uint64_t key = e->tag & d->key_mask;
		for (int l = d->key_bits; l > d->cur.len; l--) {
			uint64_t sib = (key & drain_node_mask(d, l - 1)) | (~key & d->bit[l - 1]);
			drain_push(d, sib, l);
		}
		d->have_cur = false;
	}
	drain_next(ep);
}

int ofi_ep_drain_start(struct ofi_ep *ep, uint64_t key_mask, ofi_drain_keep_fn keep, void *arg)
{
	struct ofi_drain *d = calloc(1, sizeof(*d));
	if (!d)
		return -FI_ENOMEM;
	d->key_mask = key_mask;
	for (int b = 63; b >= 0; b--)
		if (key_mask >> b & 1)
			d->bit[d->key_bits++] = 1ULL << b;
	d->keep = keep;
	d->arg = arg;
	d->op.complete = drain_done;
	d->op.owner = ep;
	d->op.ep = ep;
	d->cur = (struct ofi_drain_node){ 0, 0 };
	d->have_cur = true;
	drain_wait(d, OFI_DRAIN_NS);
	pthread_mutex_lock(&ep->cq_lock);
	ep->drain = d;
	pthread_mutex_unlock(&ep->cq_lock);
	return 0;
}

static void drain_free(struct ofi_drain *d)
{
	if (!d)
		return;
	ofi_mr_put(d->buf_mr);
	free(d->buf);
	free(d);
}

/* Starts or resumes the sweep when it is due; CQ lock held. */
static void drain_kick(struct ofi_ep *ep)
{
	struct ofi_drain *d = ep->drain;
	if (d->busy) {
		if (d->step == DRAIN_RECV && !d->cancelled &&
		    util_now_ns() - d->posted_ns > OFI_DRAIN_RECV_NS) {
			d->cancelled = true;
			ofi_ep_cancel(ep, &d->op.ctx);
		}
		return;
	}
	if (util_coarse_ns() < d->coarse_next_ns)
		return;
	uint64_t now = util_now_ns();
	if (now < d->next_ns)
		return;
	d->slice_end_ns = now + OFI_DRAIN_SLICE_NS;
	drain_next(ep);
}
