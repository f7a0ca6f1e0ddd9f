/*
 * ofi_ep.c - an endpoint's life: it opens with its own CQ and AV, shared by
 * every connection of a device, and closes; the progress loop that reads its
 * completions (and frees the domain's zombies); the table of peers inserted in
 * its AV. Its control receive pools are ofi_pool.c's, its progress thread
 * ofi_thread.c's, the drain of unexpected messages ofi_drain.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_tagged.h>

#include "ofi/ofi.h"
#include "ofi/ofi_int.h"
#include "log/log.h"
#include "util/util.h"

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
	if (ep->has_thread)
		ofi_thread_end(ep);
	/* Endpoint first, then CQ and AV; the domain frees zombies afterwards. */
	if (ep->ep)
		fi_close(&ep->ep->fid);
	ofi_pools_free(ep);
	ofi_drain_free(ep->drain);
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

/* A peer's RMA write with CQ data, by its flags: FI_REMOTE_WRITE, or CQ data
 * on a completion without a context or not a receive's (some flag a write
 * FI_RMA|FI_REMOTE_CQ_DATA only: policy_traits.c, "remote write flags"; the
 * plugin sends no message with CQ data). */
static bool remote_write(uint64_t flags, const void *ctx)
{
	return (flags & FI_REMOTE_WRITE) ||
	       ((flags & FI_REMOTE_CQ_DATA) && (!ctx || !(flags & FI_RECV)));
}

/* The context of a peer's write's completion: under FI_RX_CQ_DATA the pool
 * receive its CQ data took, posted again unread; anything else is not ours
 * and is never read through (libfabric 1.17's shm leaves a stale 1 there).
 * CQ lock held. */
static void remote_write_ctx(struct ofi_ep *ep, void *ctx, const char *what)
{
	if (!ctx || !(ep->dom->info->mode & FI_RX_CQ_DATA))
		return;
	struct ofi_op *op = ofi_pool_find(ep, ctx);
	if (op)
		ofi_pool_return(op);
	else
		LOG_WARN_LIMITED(NCCL_NET, "device %s: a peer's RMA write %s on a context that is "
				 "not one of this endpoint's posted control receives (%p); ignored",
				 ep->dom->name, what, ctx);
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
		ofi_drain_kick(ep); /* (its peeks complete in the loop below) */
	for (;;) {
		ssize_t n = fi_cq_read(ep->cq, entries, (size_t)batch);
		if (n > 0) {
			for (ssize_t i = 0; i < n; i++) {
				struct ofi_op *op = entries[i].op_context;
				uint64_t fl = entries[i].flags;
				/* a peer's RMA write with CQ data: no op of ours, but
				 * perhaps the control receive it took (FI_RX_CQ_DATA) */
				if (remote_write(fl, op)) {
					if (ep->rw_fn)
						ep->rw_fn(ep, ep->rw_arg, entries[i].data, entries[i].len);
					remote_write_ctx(ep, op, "completed");
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
				if (remote_write(err.flags, op)) {
					LOG_WARN_LIMITED(NCCL_NET, "device %s: a peer's RMA write into this "
							 "process failed: %s", ep->dom->name,
							 ofi_strerror(err.err));
					/* the receive it took is free again (a cancel
					 * is close's: nothing is posted again then) */
					if (err.err != FI_ECANCELED)
						remote_write_ctx(ep, op, "failed");
				} else if (op)
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
	ofi_pools_repost(ep);
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

/* Copies an inserted peer's endpoint name out of the table; its length, or 0
 * when the peer is unknown. */
static size_t peer_name_copy(struct ofi_ep *ep, fi_addr_t peer, unsigned char name[OFI_ADDR_MAX])
{
	size_t len = 0;
	pthread_mutex_lock(&ep->lock);
	struct ofi_peer_addr *pa = peer_entry_locked(ep, peer);
	if (pa) {
		len = pa->len;
		memcpy(name, pa->bytes, len);
	}
	pthread_mutex_unlock(&ep->lock);
	return len;
}

bool ofi_ep_peer_refused(struct ofi_ep *ep, fi_addr_t peer, unsigned wait_ms)
{
	unsigned char name[OFI_ADDR_MAX];
	size_t len = peer_name_copy(ep, peer, name);
	return len && ofi_sock_refused(name, len, wait_ms) == 1;
}

int ofi_ep_peer_arm_reset(struct ofi_ep *ep, fi_addr_t peer, unsigned timeout_ms, bool shut,
			  struct ofi_sock_armed *armed)
{
	unsigned char name[OFI_ADDR_MAX];
	size_t len = peer_name_copy(ep, peer, name);
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

void ofi_cq_error_text(struct ofi_ep *ep, const struct fi_cq_err_entry *err, char *buf,
		       size_t len)
{
	const char *prov = fi_cq_strerror(ep->cq, err->prov_errno, err->err_data, NULL, 0);
	snprintf(buf, len, "%s (provider: %s)", fi_strerror(err->err), prov ? prov : "-");
}
