/*
 * testhmem domain, memory registration, AV, CQ and counter wrappers.
 */
#include "testhmem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static atomic_uint th_next_domain_id;

/* ---- accounting ---- */

void th_count(struct th_domain *dom, const struct th_mr *mr, int is_recv, size_t bytes)
{
	struct th_counters *c = &dom->counts[th_mr_is_cuda(mr) ? TH_IF_CUDA : TH_IF_SYSTEM];

	if (is_recv) {
		atomic_fetch_add(&c->recvs, 1);
		atomic_fetch_add(&c->recv_bytes, bytes);
	} else {
		atomic_fetch_add(&c->sends, 1);
		atomic_fetch_add(&c->send_bytes, bytes);
	}
}

static void th_log_summary(struct th_domain *dom)
{
	static const char *const names[TH_IF_COUNT] = { "system", "cuda" };
	int i;

	for (i = 0; i < TH_IF_COUNT; i++) {
		struct th_counters *c = &dom->counts[i];
		unsigned long sb = atomic_load(&c->send_bytes), rb = atomic_load(&c->recv_bytes);

		th_log("ops iface=%s sends=%lu recvs=%lu bytes=%lu send_bytes=%lu "
		       "recv_bytes=%lu injects=%lu reads=%lu writes=%lu rma_bytes=%lu regs=%lu "
		       "dom=%u pid=%d",
		       names[i], atomic_load(&c->sends), atomic_load(&c->recvs), sb + rb, sb, rb,
		       atomic_load(&c->injects), atomic_load(&c->reads), atomic_load(&c->writes),
		       atomic_load(&c->rma_bytes), atomic_load(&c->regs), dom->id, (int)getpid());
	}
	th_log("check bad_desc=%lu nodesc_cuda=%lu copy_errors=%lu dom=%u pid=%d "
	       "device_mismatch=%lu ops_in_use=%lu",
	       atomic_load(&dom->bad_desc), atomic_load(&dom->nodesc_cuda),
	       atomic_load(&dom->copy_errors), dom->id, (int)getpid(),
	       atomic_load(&dom->device_mismatch), th_cuda_ops_in_use(dom));
}

/* The live CUDA MR holding [buf, buf+len), or NULL. */
struct th_mr *th_domain_find_cuda(struct th_domain *dom, const void *buf, size_t len)
{
	uintptr_t p = (uintptr_t)buf;
	struct th_mr *mr, *found = NULL;
	size_t i;

	pthread_mutex_lock(&dom->lock);
	for (mr = dom->cuda_mrs; mr && !found; mr = mr->next_cuda) {
		for (i = 0; i < mr->iov_count; i++) {
			uintptr_t s = (uintptr_t)mr->iov[i].iov_base;

			if (p >= s && p - s <= mr->iov[i].iov_len &&
			    len <= mr->iov[i].iov_len - (p - s)) {
				found = mr;
				break;
			}
		}
	}
	pthread_mutex_unlock(&dom->lock);
	return found;
}

/* ---- memory registration ---- */

/* The base's registration of mr: its shadow in place of device memory, as
 * host memory, under the key requested (or the profile's). */
static int th_mr_base_register(struct th_mr *mr)
{
	struct th_domain *dom = mr->domain;
	struct iovec shadow_iov = { mr->shadow, mr->len };
	struct fi_mr_attr battr;

	memset(&battr, 0, sizeof(battr));
	battr.mr_iov = mr->shadow ? &shadow_iov : mr->iov;
	battr.iov_count = mr->shadow ? 1 : mr->iov_count;
	battr.access = mr->access;
	battr.requested_key = mr->req_key;
	battr.context = mr->mr_fid.fid.context;
	battr.iface = FI_HMEM_SYSTEM;
	return fi_mr_regattr(dom->base, &battr, mr->reg_flags, &mr->base);
}

static int th_mr_close(struct fid *fid)
{
	struct th_mr *mr = container_of(fid, struct th_mr, mr_fid.fid);
	struct th_domain *dom = mr->domain;
	int ret;

	ret = mr->base ? fi_close(&mr->base->fid) : 0;
	if (ret)
		return ret;
	th_profile_key_free(dom->profile, mr->prov_key);
	if (mr->iface == FI_HMEM_CUDA) {
		pthread_mutex_lock(&dom->lock);
		if (mr->prev_cuda)
			mr->prev_cuda->next_cuda = mr->next_cuda;
		else
			dom->cuda_mrs = mr->next_cuda;
		if (mr->next_cuda)
			mr->next_cuda->prev_cuda = mr->prev_cuda;
		pthread_mutex_unlock(&dom->lock);
	}
	if (mr->prov_key)
		th_log("dereg iface=%s len=%zu key=0x%llx dom=%u", th_iface_name(mr->iface), mr->len,
		       (unsigned long long)mr->prov_key, dom->id);
	else
		th_log("dereg iface=%s len=%zu dom=%u", th_iface_name(mr->iface), mr->len, dom->id);
	atomic_fetch_sub(&dom->ref, 1);
	mr->magic = 0;
	free(mr->shadow);
	free(mr);
	return 0;
}

static int th_mr_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct th_mr *mr = container_of(fid, struct th_mr, mr_fid.fid);
	struct fid *target;

	if (mr->domain->profile && (mr->domain->mr_mode & FI_MR_ENDPOINT)) {
		/* the base has no such rule: the wrapper keeps it */
		if (bfid->fclass != FI_CLASS_EP && bfid->fclass != FI_CLASS_CNTR)
			return -FI_EINVAL;
		if (bfid->fclass == FI_CLASS_EP &&
		    container_of(bfid, struct th_ep, ep_fid.fid)->domain != mr->domain)
			return -FI_EINVAL;
		if (!mr->pending)
			return -FI_EBUSY; /* bound before enable only */
		mr->bound |= bfid->fclass == FI_CLASS_EP;
		return 0;
	}
	switch (bfid->fclass) {
	case FI_CLASS_EP:
		target = &container_of(bfid, struct th_ep, ep_fid.fid)->base->fid;
		break;
	case FI_CLASS_CNTR:
		target = &container_of(bfid, struct th_cntr, cntr_fid.fid)->base->fid;
		break;
	default:
		return -FI_EINVAL;
	}
	return fi_mr_bind(mr->base, target, flags);
}

static int th_mr_control(struct fid *fid, int command, void *arg)
{
	struct th_mr *mr = container_of(fid, struct th_mr, mr_fid.fid);
	int ret;

	if (mr->domain->profile && (mr->domain->mr_mode & FI_MR_ENDPOINT)) {
		if (command != FI_ENABLE)
			return mr->base ? fi_control(&mr->base->fid, command, arg) : -FI_ENOSYS;
		if (!mr->pending)
			return 0;
		if (!mr->bound) {
			atomic_fetch_add(&mr->domain->rule_errors, 1);
			th_log("error rule=mr-endpoint-unbound len=%zu dom=%u", mr->len,
			       mr->domain->id);
			return -FI_EINVAL;
		}
		ret = th_mr_base_register(mr);
		if (ret)
			return ret;
		mr->pending = 0;
		mr->mr_fid.key = mr->base->key;
		return 0;
	}
	ret = fi_control(&mr->base->fid, command, arg);

	if (!ret && command == FI_ENABLE)
		mr->mr_fid.key = mr->base->key; /* FI_MR_ENDPOINT: keys exist after enable */
	return ret;
}

static struct fi_ops th_mr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = th_mr_close,
	.bind = th_mr_bind,
	.control = th_mr_control,
	.ops_open = th_no_ops_open,
	.tostr = th_no_tostr,
	.ops_set = th_no_ops_set,
};

/* FI_MR_DMABUF and struct fi_mr_dmabuf of libfabric 1.20 (the 1.17 headers lack
 * them): with the flag, attr->mr_iov points at fi_mr_dmabuf entries instead. */
#define TH_MR_DMABUF (1ULL << 40)
struct th_mr_dmabuf {
	int fd;
	uint64_t offset;
	size_t len;
	void *base_addr;
};

static int th_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
			 struct fid_mr **mr_fid)
{
	struct th_domain *dom = container_of(fid, struct th_domain, domain_fid.fid);
	struct iovec iov[TH_IOV_MAX];
	struct th_mr *mr;
	size_t i, len = 0;
	int device, cuda_dev, dmabuf = !!(flags & TH_MR_DMABUF), ret;

	if (!attr || !mr_fid || attr->iov_count > TH_IOV_MAX || (attr->iov_count && !attr->mr_iov))
		return -FI_EINVAL;
	if (attr->iface != FI_HMEM_SYSTEM && attr->iface != FI_HMEM_CUDA) {
		th_log("reg iface=%s refused=ENOSYS dom=%u", th_iface_name(attr->iface), dom->id);
		return -FI_ENOSYS;
	}
	for (i = 0; i < attr->iov_count; i++) {
		if (dmabuf) {
			/* the same pointer holds fi_mr_dmabuf entries; the barrier keeps
			 * the compiler from judging them by the iovec it may have seen */
			const void *base = attr->mr_iov;
			__asm__("" : "+r"(base));
			const struct th_mr_dmabuf *d = (const struct th_mr_dmabuf *)base + i;

			/* the fd is only needed by a NIC; the address range is what
			 * the copies and the base registration use: it starts offset
			 * bytes into the DMA-BUF, whose start is base_addr */
			iov[i].iov_base = (char *)d->base_addr + d->offset;
			iov[i].iov_len = d->len;
		} else {
			iov[i] = attr->mr_iov[i];
		}
		len += iov[i].iov_len;
	}
	device = attr->iface == FI_HMEM_CUDA ? attr->device.cuda : 0;
	cuda_dev = device;

	if (attr->iface == FI_HMEM_CUDA && dom->cuda) {
		ret = th_cuda_reg_device(dom, iov, attr->iov_count, device, &cuda_dev);
		if (ret)
			return ret;
	}

	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -FI_ENOMEM;
	mr->domain = dom;
	mr->iface = attr->iface;
	mr->access = attr->access;
	mr->iov_count = attr->iov_count;
	memcpy(mr->iov, iov, attr->iov_count * sizeof(struct iovec));
	mr->len = len;
	mr->mr_fid.fid.context = attr->context;
	/* underneath, every buffer is host memory to the base provider: in cuda
	 * mode, a device buffer that peers may reach is replaced by its shadow */
	if (attr->iface == FI_HMEM_CUDA && dom->rma &&
	    (attr->access & (FI_REMOTE_READ | FI_REMOTE_WRITE))) {
		mr->shadow = th_rma_shadow_alloc(dom, len, &ret);
		if (!mr->shadow) {
			free(mr);
			return ret;
		}
	}
	mr->req_key = attr->requested_key;
	mr->reg_flags = flags & ~(FI_HMEM_DEVICE_ONLY | TH_MR_DMABUF);
	if (dom->profile && (dom->mr_mode & FI_MR_PROV_KEY)) {
		/* the provider's key, whatever was requested */
		mr->prov_key = th_profile_key_new(dom->profile,
						  attr->iov_count ? (uintptr_t)iov[0].iov_base : 0, len);
		if (!mr->prov_key) {
			free(mr->shadow);
			free(mr);
			return -FI_ENOKEY;
		}
		mr->req_key = mr->prov_key;
	}
	if (dom->profile && (dom->mr_mode & FI_MR_ENDPOINT)) {
		/* reaches the base at FI_ENABLE, after its fi_mr_bind */
		mr->pending = 1;
		ret = 0;
	} else {
		ret = th_mr_base_register(mr);
	}
	if (ret) {
		th_log("reg iface=%s device=%d len=%zu access=0x%" PRIx64 " failed=%d dom=%u",
		       th_iface_name(attr->iface), device, len, attr->access, ret, dom->id);
		th_profile_key_free(dom->profile, mr->prov_key);
		free(mr->shadow);
		free(mr);
		return ret;
	}

	mr->magic = TH_MR_MAGIC;
	mr->device = device;
	mr->cuda_dev = cuda_dev;
	mr->mr_fid.fid.fclass = FI_CLASS_MR;
	mr->mr_fid.fid.ops = &th_mr_fi_ops;
	mr->mr_fid.mem_desc = mr; /* the caller's desc is the wrapper itself */
	mr->mr_fid.key = mr->base ? mr->base->key : FI_KEY_NOTAVAIL;

	if (mr->iface == FI_HMEM_CUDA) {
		pthread_mutex_lock(&dom->lock);
		mr->next_cuda = dom->cuda_mrs;
		if (dom->cuda_mrs)
			dom->cuda_mrs->prev_cuda = mr;
		dom->cuda_mrs = mr;
		pthread_mutex_unlock(&dom->lock);
	}
	atomic_fetch_add(&dom->counts[th_mr_is_cuda(mr) ? TH_IF_CUDA : TH_IF_SYSTEM].regs, 1);
	atomic_fetch_add(&dom->ref, 1);
	if (mr->iface == FI_HMEM_CUDA && dom->cuda)
		th_log("reg iface=%s device=%d len=%zu access=0x%" PRIx64 " dom=%u cuda_dev=%d%s%s",
		       th_iface_name(mr->iface), device, len, mr->access, dom->id, cuda_dev,
		       dmabuf ? " dmabuf=1" : "", mr->shadow ? " shadow=1" : "");
	else if (mr->prov_key)
		th_log("reg iface=%s device=%d len=%zu access=0x%" PRIx64 " key=0x%llx dom=%u",
		       th_iface_name(mr->iface), device, len, mr->access,
		       (unsigned long long)mr->prov_key, dom->id);
	else
		th_log("reg iface=%s device=%d len=%zu access=0x%" PRIx64 " dom=%u%s",
		       th_iface_name(mr->iface), device, len, mr->access, dom->id,
		       dmabuf ? " dmabuf=1" : "");
	*mr_fid = &mr->mr_fid;
	return 0;
}

static int th_mr_regv(struct fid *fid, const struct iovec *iov, size_t count, uint64_t access,
		      uint64_t offset, uint64_t requested_key, uint64_t flags,
		      struct fid_mr **mr, void *context)
{
	struct fi_mr_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.mr_iov = iov;
	attr.iov_count = count;
	attr.access = access;
	attr.offset = offset;
	attr.requested_key = requested_key;
	attr.context = context;
	attr.iface = FI_HMEM_SYSTEM;
	return th_mr_regattr(fid, &attr, flags, mr);
}

static int th_mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access,
		     uint64_t offset, uint64_t requested_key, uint64_t flags,
		     struct fid_mr **mr, void *context)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	return th_mr_regv(fid, &iov, 1, access, offset, requested_key, flags, mr, context);
}

static struct fi_ops_mr th_mr_ops = {
	.size = sizeof(struct fi_ops_mr),
	.reg = th_mr_reg,
	.regv = th_mr_regv,
	.regattr = th_mr_regattr,
};

/* ---- AV ---- */

static int th_av_close(struct fid *fid)
{
	struct th_av *av = container_of(fid, struct th_av, av_fid.fid);
	int ret;

	if (atomic_load(&av->ref))
		return -FI_EBUSY;
	ret = fi_close(&av->base->fid);
	if (ret)
		return ret;
	atomic_fetch_sub(&av->domain->ref, 1);
	free(av);
	return 0;
}

static int th_av_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct th_av *av = container_of(fid, struct th_av, av_fid.fid);

	if (bfid->fclass != FI_CLASS_EQ)
		return -FI_EINVAL;
	/* fi_av_bind is deprecated from libfabric 2.0 on; the call it wraps is the
	 * same on every version, so forward through the fid's ops directly. */
	struct fid *base = &av->base->fid;
	return base->ops->bind(base, &container_of(bfid, struct th_eq, eq_fid.fid)->base->fid,
			       flags);
}

static int th_av_control(struct fid *fid, int command, void *arg)
{
	struct th_av *av = container_of(fid, struct th_av, av_fid.fid);

	return fi_control(&av->base->fid, command, arg);
}

static int th_av_insert(struct fid_av *av_fid, const void *addr, size_t count,
			fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	struct th_av *av = container_of(av_fid, struct th_av, av_fid);

	return fi_av_insert(av->base, addr, count, fi_addr, flags, context);
}

static int th_av_insertsvc(struct fid_av *av_fid, const char *node, const char *service,
			   fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	struct th_av *av = container_of(av_fid, struct th_av, av_fid);

	return fi_av_insertsvc(av->base, node, service, fi_addr, flags, context);
}

static int th_av_insertsym(struct fid_av *av_fid, const char *node, size_t nodecnt,
			   const char *service, size_t svccnt, fi_addr_t *fi_addr,
			   uint64_t flags, void *context)
{
	struct th_av *av = container_of(av_fid, struct th_av, av_fid);

	return fi_av_insertsym(av->base, node, nodecnt, service, svccnt, fi_addr, flags,
			       context);
}

static int th_av_remove(struct fid_av *av_fid, fi_addr_t *fi_addr, size_t count,
			uint64_t flags)
{
	struct th_av *av = container_of(av_fid, struct th_av, av_fid);

	return fi_av_remove(av->base, fi_addr, count, flags);
}

static int th_av_lookup(struct fid_av *av_fid, fi_addr_t fi_addr, void *addr,
			size_t *addrlen)
{
	struct th_av *av = container_of(av_fid, struct th_av, av_fid);

	return fi_av_lookup(av->base, fi_addr, addr, addrlen);
}

static const char *th_av_straddr(struct fid_av *av_fid, const void *addr, char *buf,
				 size_t *len)
{
	struct th_av *av = container_of(av_fid, struct th_av, av_fid);

	return fi_av_straddr(av->base, addr, buf, len);
}

static int th_no_av_set(struct fid_av *av, struct fi_av_set_attr *attr,
			struct fid_av_set **av_set, void *context)
{
	return -FI_ENOSYS;
}

static struct fi_ops th_av_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = th_av_close,
	.bind = th_av_bind,
	.control = th_av_control,
	.ops_open = th_no_ops_open,
	.tostr = th_no_tostr,
	.ops_set = th_no_ops_set,
};

static struct fi_ops_av th_av_ops = {
	.size = sizeof(struct fi_ops_av),
	.insert = th_av_insert,
	.insertsvc = th_av_insertsvc,
	.insertsym = th_av_insertsym,
	.remove = th_av_remove,
	.lookup = th_av_lookup,
	.straddr = th_av_straddr,
	.av_set = th_no_av_set,
};

static int th_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av_fid,
		      void *context)
{
	struct th_domain *dom = container_of(domain, struct th_domain, domain_fid);
	struct th_av *av = calloc(1, sizeof(*av));
	int ret;

	if (!av)
		return -FI_ENOMEM;
	ret = fi_av_open(dom->base, attr, &av->base, context);
	if (ret) {
		free(av);
		return ret;
	}
	av->domain = dom;
	av->av_fid.fid.fclass = FI_CLASS_AV;
	av->av_fid.fid.context = context;
	av->av_fid.fid.ops = &th_av_fi_ops;
	av->av_fid.ops = &th_av_ops;
	atomic_fetch_add(&dom->ref, 1);
	*av_fid = &av->av_fid;
	return 0;
}

/* ---- CQ ---- */

#define TH_CQ_BATCH 64

size_t th_cq_entry_size(enum fi_cq_format format)
{
	switch (format) {
	case FI_CQ_FORMAT_MSG:
		return sizeof(struct fi_cq_msg_entry);
	case FI_CQ_FORMAT_DATA:
		return sizeof(struct fi_cq_data_entry);
	case FI_CQ_FORMAT_TAGGED:
		return sizeof(struct fi_cq_tagged_entry);
	default:
		return sizeof(struct fi_cq_entry);
	}
}

/* Writes entry e as the i-th entry of buf in the caller's format. */
static void th_cq_store(enum fi_cq_format format, void *buf, size_t i,
			const struct fi_cq_tagged_entry *e)
{
	char *slot = (char *)buf + i * th_cq_entry_size(format);

	switch (format) {
	case FI_CQ_FORMAT_MSG: {
		struct fi_cq_msg_entry m = { e->op_context, e->flags, e->len };

		memcpy(slot, &m, sizeof(m));
		break;
	}
	case FI_CQ_FORMAT_DATA: {
		struct fi_cq_data_entry d = { e->op_context, e->flags, e->len, e->buf, e->data };

		memcpy(slot, &d, sizeof(d));
		break;
	}
	case FI_CQ_FORMAT_TAGGED:
		memcpy(slot, e, sizeof(*e));
		break;
	default: {
		struct fi_cq_entry c = { e->op_context };

		memcpy(slot, &c, sizeof(c));
		break;
	}
	}
}

static const char *th_comp_kind(uint64_t flags)
{
	if (flags & FI_REMOTE_WRITE)
		return "remote-write";
	if (flags & FI_REMOTE_READ)
		return "remote-read";
	if (flags & FI_RMA)
		return flags & FI_READ ? "read" : "write";
	if (flags & FI_RECV)
		return flags & FI_TAGGED ? "trecv" : "recv";
	if (flags & FI_SEND)
		return flags & FI_TAGGED ? "tsend" : "send";
	return "?";
}

/* TESTHMEM_TRACE: one line per completion handed to the caller. */
static void th_trace_comp(struct th_cq *cq, const struct th_op *op, void *ctx, uint64_t flags,
			  size_t len, uint64_t tag, int err)
{
	TH_TRACE(cq->domain, 1,
		 "trace comp op=%s iface=%s dev=%d len=%zu tag=0x%llx ctx=%p err=%d dom=%u",
		 op ? op->name : th_comp_kind(flags), op ? "cuda" : "system", op ? op->dev : -1,
		 len, (unsigned long long)tag, ctx, err, cq->domain->id);
}

/* TESTHMEM_CQ_DATA_SIZE: only the low bytes of a remote CQ data arrive, as on
 * a NIC with that much immediate data, and the entry reports the bytes the
 * write brought (a base that reports none, as tcp;ofi_rxm, gets them from the
 * high bytes, where the initiator put them: th_ep.c). n entries in the
 * caller's format. */
static void th_cq_mask(struct th_cq *cq, void *buf, ssize_t n)
{
	uint64_t mask = cq->domain->cq_data_mask;
	ssize_t i;

	if (mask == ~0ULL || (cq->format != FI_CQ_FORMAT_DATA && cq->format != FI_CQ_FORMAT_TAGGED))
		return;
	for (i = 0; i < n; i++) {
		/* the tagged entry begins as the data entry does */
		struct fi_cq_data_entry *d =
			(void *)((char *)buf + (size_t)i * th_cq_entry_size(cq->format));

		if (!(d->flags & FI_REMOTE_CQ_DATA))
			continue;
		if (!d->len && !cq->domain->rma)
			d->len = d->data >> 32;
		d->data &= mask;
	}
}

/* Host mode: the entries were read straight into the caller's buffer. */
static void th_trace_read(struct th_cq *cq, const void *buf, ssize_t n)
{
	ssize_t i;

	for (i = 0; i < n; i++) {
		const char *slot = (const char *)buf + (size_t)i * th_cq_entry_size(cq->format);
		struct fi_cq_tagged_entry e;

		memset(&e, 0, sizeof(e));
		memcpy(&e, slot, th_cq_entry_size(cq->format));
		if (cq->format == FI_CQ_FORMAT_DATA) /* data sits where tag would */
			e.tag = 0;
		th_trace_comp(cq, NULL, e.op_context, e.flags, e.len, e.tag, 0);
	}
}

int th_cq_push_err(struct th_cq *cq, const struct fi_cq_err_entry *e, const char *text)
{
	struct th_cq_err *q = calloc(1, sizeof(*q));

	if (!q)
		return -FI_ENOMEM;
	q->e = *e;
	snprintf(q->text, sizeof(q->text), "%s", text ? text : "testhmem: CUDA copy failed");
	pthread_mutex_lock(&cq->err_lock);
	if (cq->errs_tail)
		cq->errs_tail->next = q;
	else
		cq->errs = q;
	cq->errs_tail = q;
	atomic_fetch_add(&cq->nerrs, 1);
	pthread_mutex_unlock(&cq->err_lock);
	return 0;
}

/* Points the caller's err_data at our text: copied into the caller's buffer when
 * it gave one (err_data_size > 0), else our own storage, valid until the next
 * fi_cq_readerr. cq->err_lock held. */
static void th_cq_set_err_data(struct th_cq *cq, struct fi_cq_err_entry *buf, const char *text)
{
	size_t n = strlen(text) + 1;

	if (buf->err_data && buf->err_data_size > 0) {
		if (n > buf->err_data_size)
			n = buf->err_data_size;
		memcpy(buf->err_data, text, n);
		((char *)buf->err_data)[n - 1] = '\0';
		buf->err_data_size = n;
	} else {
		snprintf(cq->err_text, sizeof(cq->err_text), "%s", text);
		buf->err_data = cq->err_text;
		buf->err_data_size = strlen(cq->err_text) + 1;
	}
	cq->err_data_ours = buf->err_data;
}

/* Pops one of our error entries into buf: 1, or 0 when there is none. */
static ssize_t th_cq_pop_err(struct th_cq *cq, struct fi_cq_err_entry *buf)
{
	struct th_cq_err *q;
	void *udata;
	size_t usize;

	if (!atomic_load(&cq->nerrs))
		return 0;
	pthread_mutex_lock(&cq->err_lock);
	q = cq->errs;
	if (!q) {
		pthread_mutex_unlock(&cq->err_lock);
		return 0;
	}
	cq->errs = q->next;
	if (!cq->errs)
		cq->errs_tail = NULL;
	atomic_fetch_sub(&cq->nerrs, 1);
	udata = buf->err_data;
	usize = buf->err_data_size;
	/* only the 1.17 fields: the caller's entry may be larger, never smaller */
	*buf = q->e;
	buf->err_data = udata;
	buf->err_data_size = usize;
	th_cq_set_err_data(cq, buf, q->text);
	pthread_mutex_unlock(&cq->err_lock);
	free(q);
	return 1;
}

/* cuda mode: finishes our ops among n base entries (copying received data to the
 * device), gives the caller's contexts back, drops completions the caller did not
 * ask for, queues an error completion for each op whose copy failed, and stores
 * the rest in the caller's format. */
static ssize_t th_cq_finish(struct th_cq *cq, struct fi_cq_tagged_entry *ents, ssize_t n,
			    void *buf, fi_addr_t *src_addr, const fi_addr_t *srcs)
{
	ssize_t i, out = 0;

	for (i = 0; i < n; i++) {
		struct th_op *op;
		struct fi_cq_tagged_entry mine;

		switch (th_rma_comp(cq, &ents[i], srcs ? srcs[i] : FI_ADDR_NOTAVAIL, &mine)) {
		case 1:
			continue;
		case 2:
			th_trace_comp(cq, NULL, mine.op_context, mine.flags, mine.len, 0, 0);
			th_cq_store(cq->format, buf, (size_t)out, &mine);
			if (src_addr)
				src_addr[out] = srcs ? srcs[i] : FI_ADDR_NOTAVAIL;
			out++;
			continue;
		default:
			break;
		}
		op = th_op_from_ctx(cq->domain, ents[i].op_context);
		if (op) {
			struct th_op info = *op; /* for the log: op is freed below */
			struct th_copy_err cerr;
			int want = op->want_comp;

			if (ents[i].buf)
				ents[i].buf = op->iov_count ? op->iov[0].iov_base : NULL;
			ents[i].op_context = op->user_ctx;
			if (th_op_finish(cq->domain, op, ents[i].len, 1, &cerr)) {
				struct fi_cq_err_entry e;

				memset(&e, 0, sizeof(e));
				e.op_context = ents[i].op_context;
				e.flags = ents[i].flags;
				e.len = ents[i].len;
				e.buf = ents[i].buf;
				e.data = ents[i].data;
				e.tag = ents[i].tag;
				e.err = FI_EIO;
				e.prov_errno = cerr.result;
				if (th_cq_push_err(cq, &e, cerr.text))
					th_log("error lost-completion reason=ENOMEM dom=%u",
					       cq->domain->id);
				th_trace_comp(cq, &info, e.op_context, e.flags, e.len, e.tag,
					      FI_EIO);
				continue;
			}
			th_trace_comp(cq, &info, ents[i].op_context, ents[i].flags, ents[i].len,
				      ents[i].tag, 0);
			if (!want)
				continue;
		} else {
			th_trace_comp(cq, NULL, ents[i].op_context, ents[i].flags, ents[i].len,
				      ents[i].tag, 0);
		}
		th_cq_store(cq->format, buf, (size_t)out, &ents[i]);
		if (src_addr)
			src_addr[out] = srcs ? srcs[i] : src_addr[i];
		out++;
	}
	if (out)
		return out;
	return atomic_load(&cq->nerrs) ? -FI_EAVAIL : -FI_EAGAIN;
}

static ssize_t th_cq_readfrom_unlocked(struct fid_cq *cq_fid, void *buf, size_t count,
				       fi_addr_t *src_addr);

static ssize_t th_cq_readfrom(struct fid_cq *cq_fid, void *buf, size_t count,
			      fi_addr_t *src_addr)
{
	struct th_cq *cq = container_of(cq_fid, struct th_cq, cq_fid);
	struct th_domain *dom = cq->domain;
	th_serial_enter(dom);
	th_rules_progress(dom, 0);
	ssize_t n = th_cq_read_reorder(cq, buf, count, src_addr, th_cq_readfrom_unlocked);
	th_q_done(cq, buf, n);
	th_serial_leave(dom);
	return n;
}

static ssize_t th_cq_readfrom_unlocked(struct fid_cq *cq_fid, void *buf, size_t count,
				       fi_addr_t *src_addr)
{
	struct th_cq *cq = container_of(cq_fid, struct th_cq, cq_fid);
	struct fi_cq_tagged_entry ents[TH_CQ_BATCH];
	fi_addr_t srcs[TH_CQ_BATCH];
	ssize_t n, out;

	if (!cq->translate) {
		/* errors a profile's rule made (remote access): the caller reads
		 * them with readerr */
		if (atomic_load(&cq->nerrs))
			return -FI_EAVAIL;
		n = src_addr ? fi_cq_readfrom(cq->base, buf, count, src_addr)
			     : fi_cq_read(cq->base, buf, count);
		if (n > 0)
			th_remote_ctx_clear(cq->domain, cq->format, buf, n);
		if (n > 0 && cq->domain->trace)
			th_trace_read(cq, buf, n);
		if (n > 0) {
			th_rx_cq_data_rewrite(cq, buf, n);
			th_cq_mask(cq, buf, n);
		}
		return n;
	}
	if (count > TH_CQ_BATCH)
		count = TH_CQ_BATCH;
	for (;;) {
		th_rma_progress(cq->domain);
		/* our error completions first: the caller reads them with readerr */
		if (atomic_load(&cq->nerrs))
			return -FI_EAVAIL;
		/* sources always: a read request is answered to its source */
		n = fi_cq_readfrom(cq->base, ents, count, srcs);
		if (n <= 0)
			return n;
		th_remote_ctx_clear(cq->domain, FI_CQ_FORMAT_TAGGED, ents, n);
		out = th_cq_finish(cq, ents, n, buf, src_addr, srcs);
		if (out > 0) {
			th_rx_cq_data_rewrite(cq, buf, out);
			th_cq_mask(cq, buf, out);
		}
		/* a full batch of completions nobody asked for: there may be more */
		if (out != -FI_EAGAIN || (size_t)n < count)
			return out;
	}
}

static ssize_t th_cq_read(struct fid_cq *cq_fid, void *buf, size_t count)
{
	return th_cq_readfrom(cq_fid, buf, count, NULL);
}

static ssize_t th_cq_sreadfrom_inner(struct fid_cq *cq_fid, void *buf, size_t count,
				     fi_addr_t *src_addr, const void *cond, int timeout);

static ssize_t th_cq_sreadfrom(struct fid_cq *cq_fid, void *buf, size_t count,
			       fi_addr_t *src_addr, const void *cond, int timeout)
{
	struct th_cq *cq = container_of(cq_fid, struct th_cq, cq_fid);
	ssize_t n;

	/* nothing held back while the consumer blocks */
	th_rules_progress(cq->domain, 1);
	n = th_cq_take_held(cq, buf, count, src_addr);
	if (!n)
		n = th_cq_sreadfrom_inner(cq_fid, buf, count, src_addr, cond, timeout);
	th_q_done(cq, buf, n);
	return n;
}

static ssize_t th_cq_sreadfrom_inner(struct fid_cq *cq_fid, void *buf, size_t count,
				     fi_addr_t *src_addr, const void *cond, int timeout)
{
	struct th_cq *cq = container_of(cq_fid, struct th_cq, cq_fid);
	struct fi_cq_tagged_entry ents[TH_CQ_BATCH];
	fi_addr_t srcs[TH_CQ_BATCH];
	ssize_t n;

	if (!cq->translate) {
		n = src_addr ? fi_cq_sreadfrom(cq->base, buf, count, src_addr, cond, timeout)
			     : fi_cq_sread(cq->base, buf, count, cond, timeout);
		if (n > 0)
			th_remote_ctx_clear(cq->domain, cq->format, buf, n);
		if (n > 0 && cq->domain->trace)
			th_trace_read(cq, buf, n);
		if (n > 0) {
			th_rx_cq_data_rewrite(cq, buf, n);
			th_cq_mask(cq, buf, n);
		}
		return n;
	}
	th_rma_progress(cq->domain);
	if (atomic_load(&cq->nerrs))
		return -FI_EAVAIL;
	if (count > TH_CQ_BATCH)
		count = TH_CQ_BATCH;
	n = fi_cq_sreadfrom(cq->base, ents, count, srcs, cond, timeout);
	if (n <= 0)
		return n;
	th_remote_ctx_clear(cq->domain, FI_CQ_FORMAT_TAGGED, ents, n);
	n = th_cq_finish(cq, ents, n, buf, src_addr, srcs);
	if (n > 0) {
		th_rx_cq_data_rewrite(cq, buf, n);
		th_cq_mask(cq, buf, n);
	}
	return n;
}

static ssize_t th_cq_sread(struct fid_cq *cq_fid, void *buf, size_t count, const void *cond,
			   int timeout)
{
	return th_cq_sreadfrom(cq_fid, buf, count, NULL, cond, timeout);
}

static ssize_t th_cq_readerr_unlocked(struct fid_cq *cq_fid, struct fi_cq_err_entry *buf,
				      uint64_t flags);

static ssize_t th_cq_readerr(struct fid_cq *cq_fid, struct fi_cq_err_entry *buf,
			     uint64_t flags)
{
	struct th_cq *cq = container_of(cq_fid, struct th_cq, cq_fid);
	struct th_domain *dom = cq->domain;
	th_serial_enter(dom);
	ssize_t n = th_cq_readerr_unlocked(cq_fid, buf, flags);
	if (n == 1)
		th_q_done_err(cq, buf);
	th_serial_leave(dom);
	return n;
}

static ssize_t th_cq_readerr_unlocked(struct fid_cq *cq_fid, struct fi_cq_err_entry *buf,
				      uint64_t flags)
{
	struct th_cq *cq = container_of(cq_fid, struct th_cq, cq_fid);
	struct th_copy_err cerr;
	struct th_op *op, info;
	ssize_t ret;
	int copy, failed;

	if (!buf)
		return -FI_EINVAL;
	ret = th_cq_pop_err(cq, buf);
	if (ret)
		return ret; /* traced when it was queued */
	ret = fi_cq_readerr(cq->base, buf, flags);
	if (ret <= 0)
		return ret;
	th_remote_ctx_clear_err(cq->domain, buf);
	/* the base's err_data (perhaps in the caller's buffer that held ours before) */
	pthread_mutex_lock(&cq->err_lock);
	cq->err_data_ours = NULL;
	pthread_mutex_unlock(&cq->err_lock);
	switch (th_rma_comp_err(cq, buf)) {
	case 1:
		return -FI_EAGAIN; /* nothing for the caller */
	case 2:
		th_trace_comp(cq, NULL, buf->op_context, buf->flags, buf->len, buf->tag, buf->err);
		return ret;
	default:
		break;
	}
	op = cq->translate ? th_op_from_ctx(cq->domain, buf->op_context) : NULL;
	if (!op) {
		th_trace_comp(cq, NULL, buf->op_context, buf->flags, buf->len, buf->tag, buf->err);
		return ret;
	}
	info = *op;
	if (buf->buf)
		buf->buf = op->iov_count ? op->iov[0].iov_base : NULL;
	buf->op_context = op->user_ctx;
	/* a truncated receive still delivers the bytes that fit (shm of libfabric 1.17
	 * reports err = -FI_ETRUNC, and len 0) */
	copy = (buf->err == FI_ETRUNC || buf->err == -FI_ETRUNC) && op->kind == TH_OP_RECV;
	failed = th_op_finish(cq->domain, op, buf->len, copy, &cerr);
	if (failed) {
		buf->err = FI_EIO;
		buf->prov_errno = cerr.result;
		pthread_mutex_lock(&cq->err_lock);
		th_cq_set_err_data(cq, buf, cerr.text);
		pthread_mutex_unlock(&cq->err_lock);
	}
	th_trace_comp(cq, &info, buf->op_context, buf->flags, buf->len, buf->tag, buf->err);
	return ret;
}

static int th_cq_signal(struct fid_cq *cq_fid)
{
	struct th_cq *cq = container_of(cq_fid, struct th_cq, cq_fid);

	return fi_cq_signal(cq->base);
}

static const char *th_cq_strerror(struct fid_cq *cq_fid, int prov_errno, const void *err_data,
				  char *buf, size_t len)
{
	struct th_cq *cq = container_of(cq_fid, struct th_cq, cq_fid);

	if (err_data && err_data == cq->err_data_ours) {
		/* one of ours: err_data holds the sentence */
		if (buf && len) {
			snprintf(buf, len, "%s", (const char *)err_data);
			return buf;
		}
		return err_data;
	}
	return fi_cq_strerror(cq->base, prov_errno, err_data, buf, len);
}

static int th_cq_close(struct fid *fid)
{
	struct th_cq *cq = container_of(fid, struct th_cq, cq_fid.fid);
	int ret;

	if (atomic_load(&cq->ref))
		return -FI_EBUSY;
	ret = fi_close(&cq->base->fid);
	if (ret)
		return ret;
	while (cq->errs) {
		struct th_cq_err *q = cq->errs;

		cq->errs = q->next;
		free(q);
	}
	pthread_mutex_destroy(&cq->err_lock);
	th_rules_cq_close(cq);
	atomic_fetch_sub(&cq->domain->ref, 1);
	free(cq);
	return 0;
}

static int th_cq_control(struct fid *fid, int command, void *arg)
{
	struct th_cq *cq = container_of(fid, struct th_cq, cq_fid.fid);

	return fi_control(&cq->base->fid, command, arg);
}

static struct fi_ops th_cq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = th_cq_close,
	.bind = th_no_bind,
	.control = th_cq_control,
	.ops_open = th_no_ops_open,
	.tostr = th_no_tostr,
	.ops_set = th_no_ops_set,
};

static struct fi_ops_cq th_cq_ops = {
	.size = sizeof(struct fi_ops_cq),
	.read = th_cq_read,
	.readfrom = th_cq_readfrom,
	.readerr = th_cq_readerr,
	.sread = th_cq_sread,
	.sreadfrom = th_cq_sreadfrom,
	.signal = th_cq_signal,
	.strerror = th_cq_strerror,
};

static int th_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq_fid,
		      void *context)
{
	struct th_domain *dom = container_of(domain, struct th_domain, domain_fid);
	struct fi_cq_attr battr;
	struct th_cq *cq;
	int ret;

	if (!attr || !cq_fid)
		return -FI_EINVAL;
	if (attr->wait_obj == FI_WAIT_SET)
		return -FI_ENOSYS;
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -FI_ENOMEM;
	cq->domain = dom;
	pthread_mutex_init(&cq->err_lock, NULL);
	cq->format = attr->format == FI_CQ_FORMAT_UNSPEC ? FI_CQ_FORMAT_CONTEXT : attr->format;
	battr = *attr;
	if (dom->cuda) {
		/* the widest format carries everything any caller format needs */
		cq->translate = 1;
		battr.format = FI_CQ_FORMAT_TAGGED;
	}
	ret = fi_cq_open(dom->base, &battr, &cq->base, context);
	if (ret) {
		pthread_mutex_destroy(&cq->err_lock);
		free(cq);
		return ret;
	}
	th_rules_cq_open(cq);
	cq->cq_fid.fid.fclass = FI_CLASS_CQ;
	cq->cq_fid.fid.context = context;
	cq->cq_fid.fid.ops = &th_cq_fi_ops;
	cq->cq_fid.ops = &th_cq_ops;
	atomic_fetch_add(&dom->ref, 1);
	*cq_fid = &cq->cq_fid;
	return 0;
}

/* ---- counters ---- */

static uint64_t th_cntr_read(struct fid_cntr *cntr_fid)
{
	return fi_cntr_read(container_of(cntr_fid, struct th_cntr, cntr_fid)->base);
}

static uint64_t th_cntr_readerr(struct fid_cntr *cntr_fid)
{
	return fi_cntr_readerr(container_of(cntr_fid, struct th_cntr, cntr_fid)->base);
}

static int th_cntr_add(struct fid_cntr *cntr_fid, uint64_t value)
{
	return fi_cntr_add(container_of(cntr_fid, struct th_cntr, cntr_fid)->base, value);
}

static int th_cntr_set(struct fid_cntr *cntr_fid, uint64_t value)
{
	return fi_cntr_set(container_of(cntr_fid, struct th_cntr, cntr_fid)->base, value);
}

static int th_cntr_wait(struct fid_cntr *cntr_fid, uint64_t threshold, int timeout)
{
	return fi_cntr_wait(container_of(cntr_fid, struct th_cntr, cntr_fid)->base, threshold,
			    timeout);
}

static int th_cntr_adderr(struct fid_cntr *cntr_fid, uint64_t value)
{
	return fi_cntr_adderr(container_of(cntr_fid, struct th_cntr, cntr_fid)->base, value);
}

static int th_cntr_seterr(struct fid_cntr *cntr_fid, uint64_t value)
{
	return fi_cntr_seterr(container_of(cntr_fid, struct th_cntr, cntr_fid)->base, value);
}

static int th_cntr_close(struct fid *fid)
{
	struct th_cntr *cntr = container_of(fid, struct th_cntr, cntr_fid.fid);
	int ret;

	if (atomic_load(&cntr->ref))
		return -FI_EBUSY;
	ret = fi_close(&cntr->base->fid);
	if (ret)
		return ret;
	atomic_fetch_sub(&cntr->domain->ref, 1);
	free(cntr);
	return 0;
}

static int th_cntr_control(struct fid *fid, int command, void *arg)
{
	struct th_cntr *cntr = container_of(fid, struct th_cntr, cntr_fid.fid);

	return fi_control(&cntr->base->fid, command, arg);
}

static struct fi_ops th_cntr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = th_cntr_close,
	.bind = th_no_bind,
	.control = th_cntr_control,
	.ops_open = th_no_ops_open,
	.tostr = th_no_tostr,
	.ops_set = th_no_ops_set,
};

static struct fi_ops_cntr th_cntr_ops = {
	.size = sizeof(struct fi_ops_cntr),
	.read = th_cntr_read,
	.readerr = th_cntr_readerr,
	.add = th_cntr_add,
	.set = th_cntr_set,
	.wait = th_cntr_wait,
	.adderr = th_cntr_adderr,
	.seterr = th_cntr_seterr,
};

static int th_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr,
			struct fid_cntr **cntr_fid, void *context)
{
	struct th_domain *dom = container_of(domain, struct th_domain, domain_fid);
	struct th_cntr *cntr;
	int ret;

	if (attr && attr->wait_obj == FI_WAIT_SET)
		return -FI_ENOSYS;
	cntr = calloc(1, sizeof(*cntr));
	if (!cntr)
		return -FI_ENOMEM;
	ret = fi_cntr_open(dom->base, attr, &cntr->base, context);
	if (ret) {
		free(cntr);
		return ret;
	}
	cntr->domain = dom;
	cntr->cntr_fid.fid.fclass = FI_CLASS_CNTR;
	cntr->cntr_fid.fid.context = context;
	cntr->cntr_fid.fid.ops = &th_cntr_fi_ops;
	cntr->cntr_fid.ops = &th_cntr_ops;
	atomic_fetch_add(&dom->ref, 1);
	*cntr_fid = &cntr->cntr_fid;
	return 0;
}

/* ---- domain ---- */

static int th_domain_close(struct fid *fid)
{
	struct th_domain *dom = container_of(fid, struct th_domain, domain_fid.fid);
	int ret;

	if (atomic_load(&dom->ref))
		return -FI_EBUSY;
	th_log_summary(dom);
	th_rma_domain_fini(dom);
	th_cuda_domain_fini(dom); /* bounce buffers are registered with the base domain */
	ret = fi_close(&dom->base->fid);
	if (ret)
		return ret;
	th_log("domain close mode=%s dom=%u pid=%d", dom->mode == TH_MODE_CUDA ? "cuda" : "host",
	       dom->id, (int)getpid());
	atomic_fetch_sub(&dom->fabric->ref, 1);
	pthread_mutex_destroy(&dom->lock);
	pthread_mutex_destroy(&dom->serial);
	th_rules_domain_fini(dom);
	free(dom);
	return 0;
}

static int th_domain_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct th_domain *dom = container_of(fid, struct th_domain, domain_fid.fid);

	if (bfid->fclass != FI_CLASS_EQ)
		return -FI_EINVAL;
	return fi_domain_bind(dom->base, &container_of(bfid, struct th_eq, eq_fid.fid)->base->fid,
			      flags);
}

static int th_domain_control(struct fid *fid, int command, void *arg)
{
	struct th_domain *dom = container_of(fid, struct th_domain, domain_fid.fid);

	return fi_control(&dom->base->fid, command, arg);
}

static int th_no_scalable_ep(struct fid_domain *domain, struct fi_info *info,
			     struct fid_ep **sep, void *context)
{
	return -FI_ENOSYS;
}

static int th_no_poll_open(struct fid_domain *domain, struct fi_poll_attr *attr,
			   struct fid_poll **pollset)
{
	return -FI_ENOSYS;
}

static int th_no_stx_ctx(struct fid_domain *domain, struct fi_tx_attr *attr,
			 struct fid_stx **stx, void *context)
{
	return -FI_ENOSYS;
}

static int th_no_srx_ctx(struct fid_domain *domain, struct fi_rx_attr *attr,
			 struct fid_ep **rx_ep, void *context)
{
	return -FI_ENOSYS;
}

static int th_no_query_atomic(struct fid_domain *domain, enum fi_datatype datatype,
			      enum fi_op op, struct fi_atomic_attr *attr, uint64_t flags)
{
	return -FI_ENOSYS;
}

static int th_no_query_collective(struct fid_domain *domain, enum fi_collective_op coll,
				  struct fi_collective_attr *attr, uint64_t flags)
{
	return -FI_ENOSYS;
}

static int th_endpoint2(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
			uint64_t flags, void *context)
{
	if (flags)
		return -FI_EINVAL;
	return th_endpoint_open(domain, info, ep, context);
}

static struct fi_ops th_domain_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = th_domain_close,
	.bind = th_domain_bind,
	.control = th_domain_control,
	.ops_open = th_no_ops_open,
	.tostr = th_no_tostr,
	.ops_set = th_no_ops_set,
};

static struct fi_ops_domain th_domain_ops = {
	.size = sizeof(struct fi_ops_domain),
	.av_open = th_av_open,
	.cq_open = th_cq_open,
	.endpoint = th_endpoint_open,
	.scalable_ep = th_no_scalable_ep,
	.cntr_open = th_cntr_open,
	.poll_open = th_no_poll_open,
	.stx_ctx = th_no_stx_ctx,
	.srx_ctx = th_no_srx_ctx,
	.query_atomic = th_no_query_atomic,
	.query_collective = th_no_query_collective,
	.endpoint2 = th_endpoint2,
};

int th_domain_open(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain,
		   void *context)
{
	struct th_fabric *fab = container_of(fabric, struct th_fabric, fabric_fid);
	struct fi_info *binfo;
	struct th_domain *dom;
	int ret;

	if (!info || !domain)
		return -FI_EINVAL;
	dom = calloc(1, sizeof(*dom));
	if (!dom)
		return -FI_ENOMEM;
	binfo = th_base_entry(info, fab->base_name, th_mode_from_env());
	if (!binfo) {
		free(dom);
		return -FI_ENOMEM;
	}
	ret = fi_domain(fab->base, binfo, &dom->base, context);
	dom->base_mr_mode = binfo->domain_attr ? (uint64_t)binfo->domain_attr->mr_mode : 0;
	dom->base_rx_cq_data = !!(binfo->mode & FI_RX_CQ_DATA);
	fi_freeinfo(binfo);
	if (ret) {
		FI_WARN(&th_prov, FI_LOG_DOMAIN, "fi_domain(%s): %s\n", fab->base_name,
			fi_strerror(-ret));
		free(dom);
		return ret;
	}
	dom->fabric = fab;
	dom->id = atomic_fetch_add(&th_next_domain_id, 1) + 1;
	dom->mode = th_mode_from_env();
	dom->trace = th_trace_level();
	{
		size_t cqd = th_cq_data_size_from_env();

		dom->profile = th_profile();
		if (dom->profile)
			cqd = info->domain_attr ? info->domain_attr->cq_data_size : 0;
		dom->cq_data_mask = cqd && cqd < 8 ? (1ULL << (8 * cqd)) - 1 : ~0ULL;
		if (dom->profile && !cqd)
			dom->cq_data_mask = 0; /* psm3's tag64 instance: none arrives */
	}
	if (dom->profile) {
		const struct th_profile *p = dom->profile;
		uint64_t fmt = info->ep_attr ? info->ep_attr->mem_tag_format : 0;

		dom->mr_mode = info->domain_attr ? info->domain_attr->mr_mode : p->mr_mode;
		dom->tagged = !!(info->caps & FI_TAGGED);
		dom->tag_mask = !fmt || fmt == 0xaaaaaaaaaaaaaaaaULL || fmt == 0x5555555555555555ULL
					? ~0ULL
					: (fmt & (1ULL << 63)) ? ~0ULL
							       : (1ULL << (64 - __builtin_clzll(fmt))) - 1;
		dom->ctx_bytes = (info->mode & FI_CONTEXT2) ? sizeof(struct fi_context2)
				 : (info->mode & FI_CONTEXT) ? sizeof(struct fi_context)
							     : 0;
		dom->inject_size = p->inject_size;
		dom->rma_max = p->max_msg_size;
		dom->msg_max = p->msg_mtu ? p->msg_mtu : p->max_msg_size;
		dom->iov_limit = p->iov_limit;
		dom->rma_iov_limit = p->rma_iov_limit;
		dom->virt_xlate = (dom->mr_mode & FI_MR_VIRT_ADDR) &&
				  !(dom->base_mr_mode & FI_MR_VIRT_ADDR);
	}
	pthread_mutex_init(&dom->lock, NULL);
	th_rules_domain_init(dom, info);
	dom->serialize = !strcmp(fab->base_name, "shm");
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&dom->serial, &ma);
	pthread_mutexattr_destroy(&ma);
	if (dom->mode == TH_MODE_CUDA) {
		ret = th_cuda_domain_init(dom);
		if (!ret) {
			ret = th_rma_domain_init(dom);
			if (ret)
				th_cuda_domain_fini(dom);
		}
		if (ret) {
			th_log("error domain-open mode=cuda ret=%d", ret);
			fi_close(&dom->base->fid);
			pthread_mutex_destroy(&dom->lock);
			free(dom);
			return ret;
		}
	}
	dom->domain_fid.fid.fclass = FI_CLASS_DOMAIN;
	dom->domain_fid.fid.context = context;
	dom->domain_fid.fid.ops = &th_domain_fi_ops;
	dom->domain_fid.ops = &th_domain_ops;
	dom->domain_fid.mr = &th_mr_ops;
	atomic_fetch_add(&fab->ref, 1);
	if (dom->cuda)
		th_log("domain open mode=cuda base=%s dom=%u pid=%d devices=%d bounce=%s trace=%d",
		       fab->base_name, dom->id, (int)getpid(), th_cuda_ndev(dom),
		       th_cuda_bounce_mode(dom), dom->trace);
	else
		th_log("domain open mode=host base=%s dom=%u pid=%d trace=%d", fab->base_name,
		       dom->id, (int)getpid(), dom->trace);
	if (dom->profile)
		th_log("domain profile=%s mr_mode=0x%x cq_data=%zu tags=%d ctx=%zu virt_xlate=%d "
		       "dom=%u",
		       dom->profile->name, dom->mr_mode,
		       info->domain_attr ? info->domain_attr->cq_data_size : 0, dom->tagged,
		       dom->ctx_bytes, dom->virt_xlate, dom->id);
	*domain = &dom->domain_fid;
	return 0;
}
