/*
 * ofi_domain.c - one NCCL device: its fabric, domain, endpoints and the
 * registration cache.
 *
 * The cache keeps one fi_mr per registered range, sorted by start address.
 * NCCL registers the same buffers from many connections (regIsGlobal), and
 * sub-ranges of buffers it registered before; those take a reference on the
 * covering registration instead of registering again. The last ofi_mr_put of
 * a range closes its fi_mr, so no pages stay pinned behind the user's back.
 */
#include <sched.h>
#include <stdlib.h>
#include <sys/random.h>
#include <string.h>
#include <stddef.h>
#include <unistd.h>

#include "ofi/ofi.h"
#include "ofi/ofi_int.h"
#include "log/log.h"
#include "util/util.h"

/* Bounce buffers come in slabs, registered once each. */
struct ofi_buf_slab {
	struct ofi_buf_slab *next;
	char *mem;
	struct ofi_mr *mr;
	struct ofi_buf *bufs;
};

#define OFI_BUF_PER_SLAB 32

static void buf_slab_free(struct ofi_buf_slab *sl)
{
	if (!sl)
		return;
	ofi_mr_put(sl->mr);
	free(sl->mem);
	free(sl->bufs);
	free(sl);
}

int ofi_domain_open(const struct ofi_domain_attr *attr, struct ofi_domain **out)
{
	struct ofi_domain *dom = calloc(1, sizeof(*dom));
	int rc;
	if (!dom)
		return -FI_ENOMEM;
	pthread_mutex_init(&dom->lock, NULL);
	pthread_mutex_init(&dom->zombie_lock, NULL);
	dlist_init(&dom->zombies);
	pthread_mutex_init(&dom->id_lock, NULL);
	pthread_mutex_init(&dom->buf_lock, NULL);
	dom->buf_size = attr->buf_size;
	for (int b = 0; b < OFI_ID_BUCKETS; b++)
		dlist_init(&dom->ids[b]);
	dom->next_id = 1;
	if (getrandom(&dom->id_rng, sizeof(dom->id_rng), GRND_NONBLOCK) != sizeof(dom->id_rng))
		dom->id_rng = util_now_ns() ^ (uint64_t)(uintptr_t)dom;
	dom->id_rng |= 1; /* xorshift never leaves 0 */
	ofi_mr_cache_init(&dom->mrs);
	dom->next_key = 1;
	dom->random_keys = attr->random_keys;
	dom->hmem = attr->hmem;
	dom->expected_cuda_rc = attr->expected_cuda_rc;
	dom->cq_batch = attr->cq_batch > 0 ? attr->cq_batch : 32;
	util_strlcpy(dom->name, attr->name ? attr->name : "?", sizeof(dom->name));
	dom->info = fi_dupinfo(attr->info);
	if (!dom->info) {
		rc = -FI_ENOMEM;
		goto fail;
	}
	dom->mr_mode = dom->info->domain_attr->mr_mode;
	dom->directed = (dom->info->caps & FI_DIRECTED_RECV) != 0;
	dom->rx_iov2 = dom->info->rx_attr && dom->info->rx_attr->iov_limit >= 2;
	/* The provider's quirks (policy_traits.c), for this domain and its endpoints. */
	policy_traits_for(dom->info, fi_version(), &dom->traits);
	if (dom->traits.serialize)
		LOG_INFO(NCCL_INIT | NCCL_NET,
			 "device %s: provider %s: posts and completion reads are serialized per "
			 "endpoint (its multi-threaded posting is unreliable)",
			 dom->name, dom->info->fabric_attr->prov_name);
	dom->rma = (dom->info->caps & (FI_RMA | FI_READ)) == (FI_RMA | FI_READ);
	/* Large messages go as one RMA write whose CQ data tells the receiver
	 * which buffer is full: needs the write capabilities, 4 bytes of CQ data
	 * or more (with 4 the receiver sums the size from the completions); where
	 * it takes a posted receive (FI_RX_CQ_DATA), a control receive serves. */
	dom->rma_write = attr->rma_write && policy_writes_fit(dom->info);
	dom->cq_data4 = dom->info->domain_attr->cq_data_size < 8;

	rc = fi_fabric(dom->info->fabric_attr, &dom->fabric, NULL);
	if (rc) {
		LOG_WARN(NCCL_INIT | NCCL_NET, "device %s: fi_fabric(%s) failed: %s", dom->name,
			 dom->info->fabric_attr->name, ofi_strerror(rc));
		goto fail;
	}
	rc = fi_domain(dom->fabric, dom->info, &dom->domain, NULL);
	if (rc) {
		LOG_WARN(NCCL_INIT | NCCL_NET, "device %s: fi_domain(%s) failed: %s", dom->name,
			 dom->info->domain_attr->name, ofi_strerror(rc));
		goto fail;
	}
	/* Endpoints are opened up front: with FI_MR_ENDPOINT every registration is
	 * bound to each of them, so they must all exist before the first one. */
	int nep = attr->nep < 1 ? 1 : attr->nep > CFG_MAX_RAILS ? CFG_MAX_RAILS : attr->nep;
	dom->split = nep > 1 && dom->traits.split_domains && !dom->hmem &&
		     (!dom->rma_write || !(dom->mr_mode & FI_MR_PROV_KEY));
	for (int i = 0; i < nep; i++) {
		rc = ofi_ep_open(dom, i, &dom->eps[i]);
		if (rc)
			goto fail;
		dom->nep++;
	}
	/* Every endpoint gets a thread: a busy one with progress threads, else
	 * one that reads the CQ only when nobody has for a while, so the peers'
	 * pings are answered while NCCL is busy elsewhere (PROTO_PING_NS). */
	for (int i = 0; i < dom->nep; i++) {
		rc = ofi_ep_start_progress_thread(dom->eps[i], attr->progress_threads);
		if (rc)
			goto fail;
	}
	if (attr->flush_rma) {
		dom->flush_page = aligned_alloc(4096, 4096);
		if (!dom->flush_page) {
			rc = -FI_ENOMEM;
			goto fail;
		}
		rc = ofi_mr_get(dom, dom->flush_page, 4096, FI_HMEM_SYSTEM, 0, &dom->flush_mr);
		if (rc)
			goto fail;
	}
	*out = dom;
	return 0;
fail:
	ofi_domain_close(dom);
	return rc;
}

void ofi_domain_drain(struct ofi_domain *dom, uint64_t quiet_ns, uint64_t max_ns)
{
	if (!dom)
		return;
	uint64_t start = util_now_ns(), last = start;
	for (;;) {
		uint64_t now = util_now_ns();
		if (now - last > quiet_ns || now - start > max_ns)
			break;
		int n = 0;
		for (int i = 0; i < dom->nep; i++) {
			int r = ofi_ep_progress(dom->eps[i]);
			n += r > 0 ? r : 0;
		}
		if (n)
			last = util_now_ns();
		else
			sched_yield();
	}
}

void ofi_domain_close(struct ofi_domain *dom)
{
	if (!dom)
		return;
	/* Every rail's thread stops before any endpoint closes: an idle thread
	 * reaps the domain's zombies, whose expiry cancels operations on every
	 * rail, and would cancel on an endpoint already closed. */
	for (int i = 0; i < dom->nep; i++)
		if (dom->eps[i] && dom->eps[i]->has_thread)
			ofi_thread_end(dom->eps[i]);
	for (int i = dom->nep - 1; i >= 0; i--)
		ofi_ep_close(dom->eps[i]);
	/* No completion can name a zombie's operations any more. */
	struct dlist *zit;
	while ((zit = dlist_pop_head(&dom->zombies)))
		container_of(zit, struct ofi_zombie, link)->release(container_of(zit, struct ofi_zombie, link));
	ofi_mr_put(dom->flush_mr);
	free(dom->flush_page);
	while (dom->buf_slabs) {
		struct ofi_buf_slab *sl = dom->buf_slabs;
		dom->buf_slabs = sl->next;
		buf_slab_free(sl);
	}
	/* Registrations NCCL never released (it does not always deregister before
	 * finalize): close them, the domain cannot close while they are open. */
	struct dlist *it, *tmp;
	int leaked = 0;
	dlist_foreach_safe(&dom->mrs.mrs, it, tmp) {
		struct ofi_mr *mr = container_of(it, struct ofi_mr, link);
		dlist_remove(&mr->link);
		if (mr->mr)
			fi_close(&mr->mr->fid);
		free(mr);
		leaked++;
	}
	if (leaked)
		LOG_INFO(NCCL_NET, "device %s: closed %d registrations still held at finalize",
			 dom->name, leaked);
	if (dom->domain)
		fi_close(&dom->domain->fid);
	if (dom->fabric)
		fi_close(&dom->fabric->fid);
	if (dom->info)
		fi_freeinfo(dom->info);
	pthread_mutex_destroy(&dom->lock);
	pthread_mutex_destroy(&dom->zombie_lock);
	pthread_mutex_destroy(&dom->id_lock);
	pthread_mutex_destroy(&dom->buf_lock);
	free(dom);
}

/* ---------------- bounce buffers ---------------- */


struct ofi_buf *ofi_buf_get(struct ofi_domain *dom)
{
	if (!dom->buf_size)
		return NULL;
	pthread_mutex_lock(&dom->buf_lock);
	if (!dom->buf_free) {
		struct ofi_buf_slab *sl = calloc(1, sizeof(*sl));
		size_t bytes = dom->buf_size * OFI_BUF_PER_SLAB;
		if (sl) {
			sl->mem = aligned_alloc(4096, UTIL_ALIGN_UP(bytes, 4096));
			sl->bufs = calloc(OFI_BUF_PER_SLAB, sizeof(*sl->bufs));
		}
		if (!sl || !sl->mem || !sl->bufs ||
		    ((dom->mr_mode & FI_MR_LOCAL) &&
		     ofi_mr_get(dom, sl->mem, bytes, FI_HMEM_SYSTEM, 0, &sl->mr))) {
			buf_slab_free(sl);
			pthread_mutex_unlock(&dom->buf_lock);
			return NULL;
		}
		for (int i = 0; i < OFI_BUF_PER_SLAB; i++) {
			struct ofi_buf *b = &sl->bufs[i];
			b->mem = sl->mem + (size_t)i * dom->buf_size;
			b->desc = sl->mr ? sl->mr->desc : NULL;
			b->next = dom->buf_free;
			dom->buf_free = b;
		}
		sl->next = dom->buf_slabs;
		dom->buf_slabs = sl;
	}
	struct ofi_buf *b = dom->buf_free;
	dom->buf_free = b->next;
	pthread_mutex_unlock(&dom->buf_lock);
	return b;
}

struct ofi_buf *ofi_buf_spill(struct ofi_domain *dom)
{
	struct ofi_buf *s = atomic_load(&dom->spill);
	if (s)
		return s;
	s = ofi_buf_get(dom);
	struct ofi_buf *none = NULL;
	if (s && !atomic_compare_exchange_strong(&dom->spill, &none, s)) {
		ofi_buf_put(dom, s); /* another thread's is the domain's */
		s = none;
	}
	return s;
}

void ofi_buf_put(struct ofi_domain *dom, struct ofi_buf *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&dom->buf_lock);
	b->next = dom->buf_free;
	dom->buf_free = b;
	pthread_mutex_unlock(&dom->buf_lock);
}

/* ---------------- object ids ---------------- */

static struct dlist *id_bucket(struct ofi_domain *dom, uint32_t id)
{
	return &dom->ids[id % OFI_ID_BUCKETS];
}

void *ofi_domain_lookup_locked(struct ofi_domain *dom, uint32_t id)
{
	struct dlist *it, *b = id_bucket(dom, id);
	dlist_foreach(b, it) {
		struct ofi_obj *o = container_of(it, struct ofi_obj, link);
		if (o->id == id)
			return o->owner;
	}
	return NULL;
}

uint32_t ofi_domain_register(struct ofi_domain *dom, struct ofi_obj *obj, uint32_t mask,
			     void *owner)
{
	pthread_mutex_lock(&dom->id_lock);
	uint32_t id = 0;
	/* Random ids: a process that guesses the ids in tags and CQ data
	 * (connections' ids are small integers otherwise) hits nothing. Then a
	 * scan, should the space be nearly full. */
	for (int tries = 0; tries < 64 && !id; tries++) {
		dom->id_rng ^= dom->id_rng << 13;
		dom->id_rng ^= dom->id_rng >> 7;
		dom->id_rng ^= dom->id_rng << 17;
		uint32_t cand = (uint32_t)(dom->id_rng >> 11) & mask;
		if (cand && !ofi_domain_lookup_locked(dom, cand))
			id = cand;
	}
	for (uint64_t tries = 0; !id && tries <= mask; tries++) {
		uint32_t cand = dom->next_id & mask;
		dom->next_id = cand + 1;
		if (cand && !ofi_domain_lookup_locked(dom, cand)) {
			id = cand;
			break;
		}
	}
	if (id) {
		obj->id = id;
		obj->owner = owner;
		dlist_insert_tail(id_bucket(dom, id), &obj->link);
		dom->nids++;
	}
	pthread_mutex_unlock(&dom->id_lock);
	return id;
}

void ofi_domain_unregister(struct ofi_domain *dom, struct ofi_obj *obj)
{
	if (!obj->id)
		return;
	pthread_mutex_lock(&dom->id_lock);
	dlist_remove(&obj->link);
	dom->nids--;
	obj->id = 0;
	pthread_mutex_unlock(&dom->id_lock);
}

void ofi_domain_visit(struct ofi_domain *dom, void (*visit)(void *owner, void *arg), void *arg)
{
	pthread_mutex_lock(&dom->id_lock);
	for (int b = 0; b < OFI_ID_BUCKETS; b++) {
		struct dlist *it;
		dlist_foreach(&dom->ids[b], it)
			visit(container_of(it, struct ofi_obj, link)->owner, arg);
	}
	pthread_mutex_unlock(&dom->id_lock);
}

int ofi_domain_nobjs(struct ofi_domain *dom)
{
	pthread_mutex_lock(&dom->id_lock);
	int n = dom->nids;
	pthread_mutex_unlock(&dom->id_lock);
	return n;
}

/* ---------------- registration cache ---------------- */

static uint64_t mr_access(const struct ofi_domain *dom)
{
	uint64_t access = FI_SEND | FI_RECV;
	if (dom->rma)
		access |= FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	return access;
}

/* fi_mr_attr as libfabric 1.22 lays it out. The plugin asks for a newer API
 * than its 1.17 headers, so libfabric may read the later fields: they are
 * here, zero. The first member is a union with the DMA-BUF descriptor. */
struct ofi_mr_attr_ext {
	struct fi_mr_attr base;
	void *hmem_data;
	size_t page_size;
	const void *base_mr;
	size_t sub_mr_cnt;
};
_Static_assert(offsetof(struct ofi_mr_attr_ext, hmem_data) == sizeof(struct fi_mr_attr),
	       "fi_mr_attr extension must follow the 1.17 fields");

/* struct fi_mr_dmabuf and FI_MR_DMABUF of libfabric 1.20. */
struct ofi_mr_dmabuf {
	int fd;
	uint64_t offset;
	size_t len;
	void *base_addr;
};
#define OFI_MR_DMABUF (1ULL << 40)

/* The key to request (no FI_MR_PROV_KEY): the next one, or a random one
 * within the provider's key size, never 0; caller holds dom->lock. */
static uint64_t mr_next_key(struct ofi_domain *dom)
{
	if (!dom->random_keys)
		return dom->next_key++;
	size_t bytes = dom->info->domain_attr->mr_key_size;
	uint64_t k = 0;
	for (int tries = 0; tries < 8 && !k; tries++) {
		if (getrandom(&k, sizeof(k), GRND_NONBLOCK) != sizeof(k))
			k = util_now_ns() * 0x9e3779b97f4a7c15ULL ^ dom->next_key++;
		if (bytes && bytes < 8)
			k &= (1ULL << (8 * bytes)) - 1;
	}
	return k ? k : dom->next_key++;
}

static void mr_close_rails(struct ofi_mr *m)
{
	for (int i = 1; i < CFG_MAX_RAILS; i++) {
		if (m->rail_mr[i])
			(void)fi_close(&m->rail_mr[i]->fid);
		m->rail_mr[i] = NULL;
	}
}

static int mr_register_locked(struct ofi_domain *dom, struct ofi_mr *m,
			      const struct ofi_mr_dmabuf *dmabuf)
{
	struct iovec iov = { .iov_base = (void *)m->start, .iov_len = m->end - m->start };
	struct ofi_mr_attr_ext ext;
	memset(&ext, 0, sizeof(ext));
	struct fi_mr_attr *attr = &ext.base;
	attr->mr_iov = dmabuf ? (const struct iovec *)(const void *)dmabuf : &iov;
	attr->iov_count = 1;
	attr->access = mr_access(dom);
	attr->requested_key = (dom->mr_mode & FI_MR_PROV_KEY) ? 0 : mr_next_key(dom);
	attr->iface = m->iface;
	if (m->iface == FI_HMEM_CUDA)
		attr->device.cuda = m->device;
	int rc = fi_mr_regattr(dom->domain, attr, dmabuf ? OFI_MR_DMABUF : 0, &m->mr);
	if (rc) {
		LOG_WARN(NCCL_NET,
			 "device %s: fi_mr_regattr(%p, %zu bytes, %s memory%s) failed: %s%s", dom->name,
			 (void *)m->start, (size_t)(m->end - m->start),
			 m->iface == FI_HMEM_CUDA ? "CUDA" : "host", dmabuf ? ", DMA-BUF" : "",
			 ofi_strerror(rc),
			 m->iface == FI_HMEM_CUDA ?
				 ". The provider cannot register GPU memory: run with "
				 "NCCL_FABRIC_HMEM=off to stage through host memory" :
				 "");
		m->mr = NULL;
		return rc;
	}
	if (dom->mr_mode & FI_MR_ENDPOINT) {
		for (int i = 0; i < dom->nep; i++) {
			rc = fi_mr_bind(m->mr, &dom->eps[i]->ep->fid, 0);
			if (rc) {
				LOG_WARN(NCCL_NET, "device %s: fi_mr_bind failed: %s", dom->name,
					 ofi_strerror(rc));
				goto fail;
			}
		}
		rc = fi_mr_enable(m->mr);
		if (rc) {
			LOG_WARN(NCCL_NET, "device %s: fi_mr_enable failed: %s", dom->name,
				 ofi_strerror(rc));
			goto fail;
		}
	}
	m->desc = fi_mr_desc(m->mr);
	m->key = fi_mr_key(m->mr);
	if (dom->split && dom->rma_write) {
		/* the same key in every rail's domain: a CTS names one key */
		attr->requested_key = m->key;
		for (int i = 1; i < dom->nep; i++) {
			rc = fi_mr_regattr(dom->eps[i]->own_domain, attr, 0, &m->rail_mr[i]);
			if (!rc && fi_mr_key(m->rail_mr[i]) != m->key)
				rc = -FI_EKEYREJECTED;
			if (rc) {
				LOG_WARN(NCCL_NET, "device %s: registering %p (%zu bytes) on rail %d "
					 "failed: %s", dom->name, (void *)m->start,
					 (size_t)(m->end - m->start), i, ofi_strerror(rc));
				goto fail;
			}
		}
	}
	return 0;
fail:
	mr_close_rails(m);
	fi_close(&m->mr->fid);
	m->mr = NULL;
	return rc;
}

static int mr_get(struct ofi_domain *dom, void *addr, size_t len, enum fi_hmem_iface iface,
		  int device, const struct ofi_mr_dmabuf *dmabuf, struct ofi_mr **out)
{
	uintptr_t start, end;
	ofi_mr_range(addr, len, iface, (size_t)sysconf(_SC_PAGESIZE), &start, &end);

	pthread_mutex_lock(&dom->lock);
	struct ofi_mr *m = ofi_mr_cache_find(&dom->mrs, start, end, iface, device);
	if (m) {
		m->refs++;
		pthread_mutex_unlock(&dom->lock);
		*out = m;
		return 0;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		pthread_mutex_unlock(&dom->lock);
		return -FI_ENOMEM;
	}
	m->start = start;
	m->end = end;
	m->iface = iface;
	m->device = device;
	m->dom = dom;
	m->refs = 1;
	int rc = mr_register_locked(dom, m, dmabuf);
	if (rc) {
		pthread_mutex_unlock(&dom->lock);
		free(m);
		return rc;
	}
	ofi_mr_cache_insert(&dom->mrs, m);
	pthread_mutex_unlock(&dom->lock);
	*out = m;
	return 0;
}

int ofi_mr_get(struct ofi_domain *dom, void *addr, size_t len, enum fi_hmem_iface iface,
	       int device, struct ofi_mr **out)
{
	return mr_get(dom, addr, len, iface, device, NULL, out);
}

int ofi_mr_get_dmabuf(struct ofi_domain *dom, void *addr, size_t len, int fd, uint64_t offset,
		      int device, struct ofi_mr **out)
{
	/* The registration is [addr, addr+len) of the GPU's memory, which starts
	 * offset bytes into the DMA-BUF; libfabric takes base_addr as the start of
	 * the DMA-BUF, so the region's virtual address is base_addr + offset. A
	 * later regMr of that range (or inside it) shares the registration. The
	 * fd is only needed during the call (NCCL closes it right after). */
	struct ofi_mr_dmabuf d = { .fd = fd, .offset = offset, .len = len,
				   .base_addr = (char *)addr - offset };
	return mr_get(dom, addr, len, FI_HMEM_CUDA, device, &d, out);
}

void ofi_mr_ref(struct ofi_mr *m)
{
	pthread_mutex_lock(&m->dom->lock);
	m->refs++;
	pthread_mutex_unlock(&m->dom->lock);
}

void ofi_mr_put(struct ofi_mr *m)
{
	if (!m)
		return;
	struct ofi_domain *dom = m->dom;
	pthread_mutex_lock(&dom->lock);
	if (--m->refs > 0) {
		pthread_mutex_unlock(&dom->lock);
		return;
	}
	ofi_mr_cache_remove(m);
	pthread_mutex_unlock(&dom->lock);
	mr_close_rails(m);
	if (m->mr) {
		int rc = fi_close(&m->mr->fid);
		if (rc)
			LOG_WARN(NCCL_NET, "device %s: closing a registration failed: %s", dom->name,
				 ofi_strerror(rc));
	}
	free(m);
}

int ofi_mr_count(struct ofi_domain *dom)
{
	pthread_mutex_lock(&dom->lock);
	int n = ofi_mr_cache_count(&dom->mrs);
	pthread_mutex_unlock(&dom->lock);
	return n;
}
