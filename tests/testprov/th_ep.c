/*
 * testhmem endpoint: options, binding, and data operations.
 *
 * Every data operation translates the caller's descriptors (our MR wrappers) to the
 * base provider's, checks that each buffer lies inside the MR its desc names, and
 * counts the operation under the MR's iface. In host mode the same call is made on
 * the base endpoint. In cuda mode an operation touching CUDA memory goes through a
 * bounce buffer and the base *msg call with one of our ops as context; the CQ
 * wrapper finishes it (th_domain.c).
 */
#include "testhmem.h"

#include <stdarg.h>
#include <stdio.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static struct th_ep *th_ep_of(struct fid_ep *ep_fid)
{
	return container_of(ep_fid, struct th_ep, ep_fid);
}

/* ---- option answers ---- */

struct th_answer {
	int code;
	const char *name;
};

static struct th_answer th_cuda_answer(const struct th_domain *dom)
{
	static const struct th_answer answers[] = {
		{ 0, "ok" },
		{ -FI_EOPNOTSUPP, "eopnotsupp" },
		{ -FI_EINVAL, "einval" },
		{ -FI_ENOPROTOOPT, "enoprotoopt" },
	};
	const char *env = getenv("TESTHMEM_CUDA_API_PERMITTED");
	size_t i;

	if (env && *env) {
		for (i = 0; i < sizeof(answers) / sizeof(answers[0]); i++)
			if (!strcmp(env, answers[i].name))
				return answers[i];
		FI_WARN(&th_prov, FI_LOG_EP_CTRL,
			"TESTHMEM_CUDA_API_PERMITTED=%s unknown (ok|eopnotsupp|einval|"
			"enoprotoopt): using the mode's default\n",
			env);
	}
	if (dom->profile && dom->mode != TH_MODE_CUDA) {
		/* the real provider's answer */
		for (i = 0; i < sizeof(answers) / sizeof(answers[0]); i++)
			if (!strcmp(dom->profile->cuda_api, answers[i].name))
				return answers[i];
	}
	/* cuda mode calls CUDA itself, so it cannot promise not to */
	return dom->mode == TH_MODE_CUDA ? answers[1] : answers[0];
}

static const char *const th_p2p_names[] = { "enabled", "required", "preferred", "disabled" };

/* The FI_OPT_FI_HMEM_P2P stance (FI_HMEM_P2P_*), or -FI_ENOPROTOOPT. */
static int th_p2p_answer(const struct th_domain *dom)
{
	const char *env = getenv("TESTHMEM_P2P");
	int i;

	if (env && *env) {
		if (!strcmp(env, "enoprotoopt"))
			return -FI_ENOPROTOOPT;
		for (i = 0; i < 4; i++)
			if (!strcmp(env, th_p2p_names[i]))
				return FI_HMEM_P2P_ENABLED + i;
		FI_WARN(&th_prov, FI_LOG_EP_CTRL,
			"TESTHMEM_P2P=%s unknown (enabled|required|preferred|disabled|"
			"enoprotoopt): using the mode's default\n",
			env);
	}
	/* host mode: the "device" memory is reached directly, as by GPUDirect */
	return dom->mode == TH_MODE_CUDA ? FI_HMEM_P2P_DISABLED : FI_HMEM_P2P_ENABLED;
}

static const char *th_p2p_name(int v)
{
	return v >= FI_HMEM_P2P_ENABLED && v <= FI_HMEM_P2P_DISABLED
		       ? th_p2p_names[v - FI_HMEM_P2P_ENABLED]
		       : "invalid";
}

static int th_ep_setopt(fid_t fid, int level, int optname, const void *optval, size_t optlen)
{
	struct th_ep *ep = container_of(fid, struct th_ep, ep_fid.fid);
	int p2p;

	if (level == FI_OPT_ENDPOINT && optname == TH_OPT_CUDA_API_PERMITTED) {
		struct th_answer a = th_cuda_answer(ep->domain);

		if (!optval || optlen != sizeof(bool)) {
			th_log("setopt cuda_api_permitted=invalid-arg optlen=%zu dom=%u", optlen,
			       ep->domain->id);
			return -FI_EINVAL;
		}
		if (ep->enabled) {
			/* libfabric >= 1.21 documents: set before fi_enable */
			th_log("setopt cuda_api_permitted=eopbadstate reason=after-enable dom=%u",
			       ep->domain->id);
			return -FI_EOPBADSTATE;
		}
		th_log("setopt cuda_api_permitted=%s value=%d dom=%u", a.name,
		       *(const bool *)optval, ep->domain->id);
		return a.code;
	}
	if (level == FI_OPT_ENDPOINT && optname == FI_OPT_FI_HMEM_P2P) {
		if (th_p2p_answer(ep->domain) == -FI_ENOPROTOOPT) {
			th_log("setopt hmem_p2p=enoprotoopt dom=%u", ep->domain->id);
			return -FI_ENOPROTOOPT;
		}
		if (!optval || optlen != sizeof(int))
			return -FI_EINVAL;
		p2p = *(const int *)optval;
		if (p2p < FI_HMEM_P2P_ENABLED || p2p > FI_HMEM_P2P_DISABLED)
			return -FI_EINVAL;
		ep->p2p_set = 1;
		ep->p2p_value = p2p;
		th_log("setopt hmem_p2p=%s dom=%u", th_p2p_name(p2p), ep->domain->id);
		return 0;
	}
	return fi_setopt(&ep->base->fid, level, optname, optval, optlen);
}

static int th_ep_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	struct th_ep *ep = container_of(fid, struct th_ep, ep_fid.fid);
	int p2p;

	if (level == FI_OPT_ENDPOINT && optname == TH_OPT_CUDA_API_PERMITTED)
		return -FI_ENOPROTOOPT; /* the option is set-only */
	if (level == FI_OPT_ENDPOINT && optname == FI_OPT_FI_HMEM_P2P) {
		p2p = th_p2p_answer(ep->domain);
		if (p2p == -FI_ENOPROTOOPT) {
			th_log("getopt hmem_p2p=enoprotoopt dom=%u", ep->domain->id);
			return -FI_ENOPROTOOPT;
		}
		if (!optval || !optlen || *optlen < sizeof(int))
			return -FI_ETOOSMALL;
		if (ep->p2p_set)
			p2p = ep->p2p_value;
		*(int *)optval = p2p;
		*optlen = sizeof(int);
		th_log("getopt hmem_p2p=%s dom=%u", th_p2p_name(p2p), ep->domain->id);
		return 0;
	}
	return fi_getopt(&ep->base->fid, level, optname, optval, optlen);
}

/* ---- profile rules ---- */

#define TH_RULE_LOG_MAX 64

/* A call a profile's rule refuses: counted, logged ("error rule=NAME"). */
__attribute__((format(printf, 4, 5))) static int th_rule(struct th_domain *dom, int ret,
							 const char *rule, const char *fmt, ...)
{
	char detail[160];
	va_list ap;

	if (atomic_fetch_add(&dom->rule_errors, 1) < TH_RULE_LOG_MAX) {
		va_start(ap, fmt);
		vsnprintf(detail, sizeof(detail), fmt, ap);
		va_end(ap);
		th_log("error rule=%s profile=%s %s dom=%u", rule, dom->profile->name, detail,
		       dom->id);
	}
	return ret;
}

/* The provider owns the context's words from the post to the completion
 * (FI_CONTEXT, FI_CONTEXT2): a real one writes its state there. */
static void th_ctx_claim(struct th_domain *dom, void *context)
{
	if (dom->profile && dom->ctx_bytes && context)
		memset(context, 0xa5, dom->ctx_bytes);
}

static int th_rules_msg(struct th_domain *dom, const char *op, int tagged, int is_recv,
			uint64_t tag, size_t count, size_t total, int inject)
{
	if (!dom->profile)
		return 0;
	if (tagged && !dom->tagged)
		return th_rule(dom, -FI_ENOSYS, "no-tags", "op=%s", op);
	if (tagged && (tag & ~dom->tag_mask))
		return th_rule(dom, -FI_EINVAL, "tag-width", "op=%s tag=0x%llx", op,
			       (unsigned long long)tag);
	if (count > dom->iov_limit)
		return th_rule(dom, -FI_EINVAL, "iov-limit", "op=%s count=%zu limit=%zu", op, count,
			       dom->iov_limit);
	if (!is_recv && total > dom->msg_max)
		return th_rule(dom, -FI_EINVAL, "msg-size", "op=%s len=%zu max=%zu", op, total,
			       dom->msg_max);
	if (inject && total > dom->inject_size)
		return th_rule(dom, -FI_EINVAL, "inject-size", "op=%s len=%zu max=%zu", op, total,
			       dom->inject_size);
	return 0;
}

static int th_rules_rma(struct th_domain *dom, const char *op, size_t count, size_t rma_count,
			size_t total, int has_data, int inject)
{
	if (!dom->profile)
		return 0;
	if (count > dom->iov_limit)
		return th_rule(dom, -FI_EINVAL, "iov-limit", "op=%s count=%zu limit=%zu", op, count,
			       dom->iov_limit);
	if (rma_count > dom->rma_iov_limit)
		return th_rule(dom, -FI_EINVAL, "rma-iov-limit", "op=%s count=%zu limit=%zu", op,
			       rma_count, dom->rma_iov_limit);
	if (total > dom->rma_max)
		return th_rule(dom, -FI_EINVAL, "msg-size", "op=%s len=%zu max=%zu", op, total,
			       dom->rma_max);
	if (inject && total > dom->inject_size)
		return th_rule(dom, -FI_EINVAL, "inject-size", "op=%s len=%zu max=%zu", op, total,
			       dom->inject_size);
	if (has_data && !th_profile_writedata_ok(dom->profile))
		return th_rule(dom, -FI_ENOSYS, "writedata-disabled", "op=%s needs=%s=1", op,
			       dom->profile->writedata_env);
	return 0;
}

/* Virtual addresses over a base that takes offsets: the offset into the
 * target's registration, found under its key. An address outside the
 * registration (an offset where a VA is due, say) becomes one no registration
 * holds, and fails at the target. */
static void th_virt_to_offset(struct th_domain *dom, const struct fi_rma_iov *in, size_t n,
			      struct fi_rma_iov *out)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t va, len;

		out[i] = in[i];
		if (th_profile_key_va(dom->profile, in[i].key, &va, &len) && in[i].addr >= va &&
		    in[i].addr - va <= len)
			out[i].addr = in[i].addr - va;
		else
			out[i].addr = UINT64_MAX / 2;
	}
}

/* Where the keys are the provider's (the host's table knows each
 * registration), a remote range outside the registration its key names is
 * what a NIC answers with a remote access error: the operation completes in
 * error (FI_EACCES) on cq (NULL: an inject, which has no completion). Returns
 * 1 when it was refused so. */
static int th_remote_refused(struct th_ep *ep, struct th_cq *cq, const char *op,
			     const struct fi_rma_iov *riov, size_t n, size_t total, void *context,
			     int is_read)
{
	struct th_domain *dom = ep->domain;

	if (!dom->profile || !(dom->mr_mode & FI_MR_PROV_KEY))
		return 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t va, len, off;
		size_t want = n == 1 ? total : riov[i].len;

		if (!th_profile_key_va(dom->profile, riov[i].key, &va, &len)) {
			th_rule(dom, 0, "remote-key", "op=%s key=0x%llx", op,
				(unsigned long long)riov[i].key);
		} else {
			off = (dom->mr_mode & FI_MR_VIRT_ADDR) ? riov[i].addr - va : riov[i].addr;
			if ((dom->mr_mode & FI_MR_VIRT_ADDR) && riov[i].addr < va)
				off = UINT64_MAX;
			if (off <= len && want <= len - off)
				continue;
			th_rule(dom, 0, "remote-range", "op=%s addr=0x%llx len=%zu mr_len=%llu", op,
				(unsigned long long)riov[i].addr, want, (unsigned long long)len);
		}
		struct fi_cq_err_entry e;

		memset(&e, 0, sizeof(e));
		e.op_context = context;
		e.flags = FI_RMA | (is_read ? FI_READ : FI_WRITE);
		e.err = FI_EACCES;
		if (cq)
			th_cq_push_err(cq, &e,
				       "testhmem: remote access error (the key names no registration "
				       "holding that range)");
		return 1;
	}
	return 0;
}

/* ---- descriptors ---- */

static int th_mr_holds(const struct th_mr *mr, const void *buf, size_t len)
{
	uintptr_t p = (uintptr_t)buf;
	size_t i;

	for (i = 0; i < mr->iov_count; i++) {
		uintptr_t s = (uintptr_t)mr->iov[i].iov_base;

		if (p >= s && p - s <= mr->iov[i].iov_len && len <= mr->iov[i].iov_len - (p - s))
			return 1;
	}
	return 0;
}

#define TH_NODESC_LOG_MAX 16

/* Translates the caller's desc for [buf, buf+len). A desc that is not one of this
 * domain's MRs, or an MR that does not hold the buffer, fails with -FI_EINVAL (and
 * is logged): a caller bug a real provider may only catch by faulting. A NULL desc
 * on memory of a registered CUDA MR is tolerated but counted (nodesc_cuda). */
static int th_desc(struct th_ep *ep, const char *op, const void *buf, size_t len, void *desc,
		   void **bdesc, struct th_mr **mrp)
{
	struct th_domain *dom = ep->domain;
	struct th_mr *mr = desc;

	*bdesc = NULL;
	*mrp = NULL;
	if (!mr && len && dom->profile && (dom->mr_mode & FI_MR_LOCAL))
		return th_rule(dom, -FI_EINVAL, "mr-local", "op=%s len=%zu desc=none", op, len);
	if (!mr) {
		mr = len ? th_domain_find_cuda(dom, buf, len) : NULL;
		if (mr) {
			if (atomic_fetch_add(&dom->nodesc_cuda, 1) < TH_NODESC_LOG_MAX)
				th_log("error nodesc-cuda op=%s len=%zu dom=%u", op, len, dom->id);
			*bdesc = fi_mr_desc(mr->base);
			*mrp = mr;
		}
		return 0;
	}
	if (mr->magic != TH_MR_MAGIC || mr->domain != dom) {
		atomic_fetch_add(&dom->bad_desc, 1);
		th_log("error bad-desc op=%s len=%zu dom=%u", op, len, dom->id);
		return -FI_EINVAL;
	}
	if (mr->pending)
		return th_rule(dom, -FI_EINVAL, "mr-endpoint-not-enabled", "op=%s len=%zu", op, len);
	if (len && !th_mr_holds(mr, buf, len)) {
		atomic_fetch_add(&dom->bad_desc, 1);
		th_log("error desc-range op=%s len=%zu iface=%s mr_len=%zu dom=%u", op, len,
		       th_iface_name(mr->iface), mr->len, dom->id);
		return -FI_EINVAL;
	}
	*bdesc = fi_mr_desc(mr->base);
	*mrp = mr;
	return 0;
}

/* ---- messages (tagged and untagged) ---- */

enum th_call { TH_CALL_PLAIN, TH_CALL_V, TH_CALL_MSG, TH_CALL_DATA };

struct th_xfer {
	const char *name;
	int tagged;
	int is_recv;
	enum th_call call;
	const struct iovec *iov;
	void **desc;
	size_t count;
	fi_addr_t addr;
	uint64_t tag, ignore, data;
	void *context;
	uint64_t flags; /* TH_CALL_MSG: the caller's */
};

/* The flags a converted (msg) call carries, and whether the caller gets the
 * completion. Non-msg calls take the endpoint's default op flags. */
static uint64_t th_xfer_flags(const struct th_ep *ep, const struct th_xfer *x, int *want_comp)
{
	uint64_t flags = x->call == TH_CALL_MSG ? x->flags
				: (x->is_recv ? ep->rx_op_flags : ep->tx_op_flags);
	int selective = x->is_recv ? ep->rx_selective : ep->tx_selective;

	if (x->call == TH_CALL_DATA)
		flags |= FI_REMOTE_CQ_DATA;
	*want_comp = !selective || (flags & FI_COMPLETION);
	return flags | FI_COMPLETION; /* we need every completion to free the bounce */
}

/* Gathers the caller's buffers into dst (device ones through CUDA copies). */
static int th_gather(struct th_domain *dom, const struct iovec *iov, const int *dev,
		     size_t count, char *dst, const char *name, uint64_t tag,
		     struct th_copy_err *err)
{
	size_t i;
	int ret;

	for (i = 0; i < count; i++) {
		if (dev[i] >= 0) {
			ret = th_cuda_copy(dom, dev[i], dst, iov[i].iov_base, iov[i].iov_len, 0,
					   name, tag, err);
			if (ret)
				return ret;
		} else {
			memcpy(dst, iov[i].iov_base, iov[i].iov_len);
		}
		dst += iov[i].iov_len;
	}
	return 0;
}

static const char *th_comp_name(uint64_t flags)
{
	if (flags & FI_RMA)
		return "write";
	return flags & FI_TAGGED ? "tsend" : "send";
}

/* A transmit whose copy from the device failed: it completes in error on the
 * transmit CQ (the base never saw it). Returns 0, or the error when there is no
 * CQ to carry it. */
static int th_tx_copy_failed(struct th_ep *ep, void *context, uint64_t flags, uint64_t tag,
			     int dev, const struct th_copy_err *cerr)
{
	struct fi_cq_err_entry e;

	if (!ep->tx_cq)
		return -FI_EIO;
	memset(&e, 0, sizeof(e));
	e.op_context = context;
	e.flags = flags;
	e.tag = tag;
	e.err = FI_EIO;
	e.prov_errno = cerr->result;
	if (th_cq_push_err(ep->tx_cq, &e, cerr->text))
		return -FI_EIO;
	TH_TRACE(ep->domain, 1,
		 "trace comp op=%s iface=cuda dev=%d len=0 tag=0x%llx ctx=%p err=%d dom=%u",
		 th_comp_name(flags), dev, (unsigned long long)tag, context, FI_EIO,
		 ep->domain->id);
	return 0;
}

static uint64_t th_xfer_comp_flags(const struct th_xfer *x)
{
	return (x->is_recv ? FI_RECV : FI_SEND) | (x->tagged ? FI_TAGGED : FI_MSG);
}

/* cuda mode, an operation on CUDA memory: one bounce buffer, one base msg call. */
static ssize_t th_xfer_bounce(struct th_ep *ep, const struct th_xfer *x, const int *dev,
			      int first_dev, size_t total)
{
	struct th_domain *dom = ep->domain;
	struct th_copy_err cerr;
	struct th_bounce *b;
	struct iovec biov;
	struct th_op *op;
	uint64_t flags;
	int want;
	ssize_t ret;
	size_t i;

	flags = th_xfer_flags(ep, x, &want);
	/* also when they come from the endpoint's default op flags */
	if (flags & (FI_MULTI_RECV | FI_PEEK | FI_CLAIM)) {
		th_log("error unsupported op=%s flags=multi_recv|peek|claim on cuda memory "
		       "dom=%u",
		       x->name, dom->id);
		return -FI_EOPNOTSUPP;
	}
	op = th_op_get(dom);
	if (!op)
		return -FI_EAGAIN;
	b = th_bounce_get(dom, total ? total : 1, first_dev);
	if (!b) {
		th_op_put(dom, op);
		return -FI_ENOMEM;
	}
	op->kind = x->is_recv ? TH_OP_RECV : TH_OP_SEND;
	op->user_ctx = x->context;
	op->name = x->name;
	op->tag = x->tag;
	op->dev = first_dev;
	op->want_comp = want;
	op->bounce = b;
	op->len = total;
	op->iov_count = x->count;
	for (i = 0; i < x->count; i++) {
		op->iov[i] = x->iov[i];
		op->iov_dev[i] = dev[i];
	}
	if (!x->is_recv) {
		ret = th_gather(dom, x->iov, dev, x->count, b->buf, x->name, x->tag, &cerr);
		if (ret) {
			th_bounce_put(dom, b);
			th_op_put(dom, op);
			return th_tx_copy_failed(ep, x->context, th_xfer_comp_flags(x), x->tag,
						 first_dev, &cerr);
		}
	}
	biov.iov_base = b->buf;
	biov.iov_len = total;
	if (x->tagged) {
		struct fi_msg_tagged m = { &biov, &b->desc, 1, x->addr, x->tag, x->ignore, op,
					   x->data };

		ret = x->is_recv ? fi_trecvmsg(ep->base, &m, flags) : fi_tsendmsg(ep->base, &m, flags);
	} else {
		struct fi_msg m = { &biov, &b->desc, 1, x->addr, op, x->data };

		ret = x->is_recv ? fi_recvmsg(ep->base, &m, flags) : fi_sendmsg(ep->base, &m, flags);
	}
	if (ret) {
		th_bounce_put(dom, b);
		th_op_put(dom, op);
	}
	return ret;
}

/* TESTHMEM_TRACE: one line per data operation posted (-FI_EAGAIN only at level 2). */
static void th_trace_post(struct th_domain *dom, const char *name, int cuda, int dev,
			  size_t len, uint64_t tag, void *ctx, ssize_t ret)
{
	TH_TRACE(dom, ret == -FI_EAGAIN ? 2 : 1,
		 "trace op=%s iface=%s dev=%d len=%zu tag=0x%llx ctx=%p ret=%zd dom=%u", name,
		 cuda ? "cuda" : "system", cuda ? dev : -1, len, (unsigned long long)tag, ctx, ret,
		 dom->id);
}

static ssize_t th_xfer_unlocked(struct th_ep *ep, const struct th_xfer *x);

/* Over shm: one call at a time per domain (th_domain.serialize). */
static ssize_t th_xfer(struct th_ep *ep, const struct th_xfer *x)
{
	struct th_domain *sd = ep->domain;
	struct th_xfer own;
	int want, counted = 0;
	uint64_t flags = th_xfer_flags(ep, x, &want);

	th_serial_enter(sd);
	/* the queue depth: what will complete to the consumer takes a slot */
	if (want && !(flags & FI_PEEK)) {
		counted = th_q_take(ep, x->is_recv, x->context,
				    x->is_recv && (flags & FI_MULTI_RECV));
		if (counted < 0) {
			th_trace_post(sd, x->name, 0, -1, 0, x->tag, x->context, counted);
			th_serial_leave(sd);
			return counted;
		}
	}
	if (sd->rx_cq_data && !x->tagged && !x->is_recv && (flags & FI_REMOTE_CQ_DATA)) {
		/* FI_RX_CQ_DATA: only write notices carry the mark (bytes past the
		 * CQ data size never arrive anyway) */
		own = *x;
		own.data &= ~TH_NOTICE_MARK;
		x = &own;
	}
	ssize_t ret = th_xfer_unlocked(ep, x);
	if (ret && counted > 0)
		th_q_undo(ep, x->is_recv, x->context);
	th_serial_leave(sd);
	return ret;
}

/* cuda mode keeps TH_NOTICE_TAG for its notices: a caller's send may not carry
 * it, a caller's receive never matches it. Returns 0 or -FI_EINVAL. */
static int th_tag_guard(struct th_ep *ep, const struct th_xfer *x, struct th_xfer *own)
{
	if (!ep->domain->rma || !x->tagged)
		return 0;
	if (!x->is_recv) {
		if (x->tag & TH_NOTICE_TAG) {
			th_log("error tag-reserved op=%s tag=0x%llx dom=%u", x->name,
			       (unsigned long long)x->tag, ep->domain->id);
			return -FI_EINVAL;
		}
		return 0;
	}
	*own = *x;
	own->tag &= ~TH_NOTICE_TAG;
	own->ignore &= ~TH_NOTICE_TAG;
	return 0;
}

static ssize_t th_xfer_unlocked(struct th_ep *ep, const struct th_xfer *xin)
{
	struct th_domain *dom = ep->domain;
	void *bdesc[TH_IOV_MAX];
	int dev[TH_IOV_MAX], first_dev = -1;
	struct th_mr *mr, *cmr = NULL;
	size_t i, total = 0;
	struct th_xfer own;
	const struct th_xfer *x = xin;
	ssize_t ret;

	own.name = NULL;
	ret = th_tag_guard(ep, xin, &own);
	if (ret)
		return ret;
	if (own.name)
		x = &own;

	if (x->count > TH_IOV_MAX || (x->count && !x->iov))
		return -FI_EINVAL;
	if (dom->profile) {
		size_t sum = 0;

		for (i = 0; i < x->count; i++)
			sum += x->iov[i].iov_len;
		ret = th_rules_msg(dom, x->name, x->tagged, x->is_recv, x->tag, x->count, sum,
				   x->call == TH_CALL_MSG && (x->flags & FI_INJECT));
		if (ret)
			return ret;
	}
	for (i = 0; i < x->count; i++) {
		ret = th_desc(ep, x->name, x->iov[i].iov_base, x->iov[i].iov_len,
			      x->desc ? x->desc[i] : NULL, &bdesc[i], &mr);
		if (ret)
			return ret;
		dev[i] = th_mr_is_cuda(mr) ? mr->cuda_dev : -1;
		if (dev[i] >= 0 && !cmr) {
			cmr = mr;
			first_dev = dev[i];
		}
		total += x->iov[i].iov_len;
	}

	th_ctx_claim(dom, x->context);
	if (dom->cuda && cmr) {
		ret = th_xfer_bounce(ep, x, dev, first_dev, total);
	} else if ((dom->reorder & TH_REORDER_SENDS) && !x->is_recv && !(x->call == TH_CALL_MSG && (x->flags & FI_INJECT))) {
		/* no ordering: the send may be held back to follow the next one */
		uint64_t flags = x->call == TH_CALL_MSG ? x->flags : ep->tx_op_flags;

		if (x->call == TH_CALL_DATA)
			flags |= FI_REMOTE_CQ_DATA;
		ret = th_reorder_send(ep, x->tagged, x->iov, bdesc, x->count, x->addr, x->tag,
				      x->data, x->context, flags);
	} else if (x->tagged && x->is_recv) {
		if (x->call == TH_CALL_PLAIN)
			ret = fi_trecv(ep->base, x->iov[0].iov_base, x->iov[0].iov_len, bdesc[0],
				       x->addr, x->tag, x->ignore, x->context);
		else if (x->call == TH_CALL_V)
			ret = fi_trecvv(ep->base, x->iov, bdesc, x->count, x->addr, x->tag,
					x->ignore, x->context);
		else {
			struct fi_msg_tagged m = { x->iov, bdesc, x->count, x->addr, x->tag,
						   x->ignore, x->context, x->data };

			ret = fi_trecvmsg(ep->base, &m, x->flags);
		}
	} else if (x->tagged) {
		if (x->call == TH_CALL_PLAIN)
			ret = fi_tsend(ep->base, x->iov[0].iov_base, x->iov[0].iov_len, bdesc[0],
				       x->addr, x->tag, x->context);
		else if (x->call == TH_CALL_V)
			ret = fi_tsendv(ep->base, x->iov, bdesc, x->count, x->addr, x->tag,
					x->context);
		else if (x->call == TH_CALL_DATA)
			ret = fi_tsenddata(ep->base, x->iov[0].iov_base, x->iov[0].iov_len,
					   bdesc[0], x->data, x->addr, x->tag, x->context);
		else {
			struct fi_msg_tagged m = { x->iov, bdesc, x->count, x->addr, x->tag,
						   x->ignore, x->context, x->data };

			ret = fi_tsendmsg(ep->base, &m, x->flags);
		}
	} else if (x->is_recv) {
		if (x->call == TH_CALL_PLAIN)
			ret = fi_recv(ep->base, x->iov[0].iov_base, x->iov[0].iov_len, bdesc[0],
				      x->addr, x->context);
		else if (x->call == TH_CALL_V)
			ret = fi_recvv(ep->base, x->iov, bdesc, x->count, x->addr, x->context);
		else {
			struct fi_msg m = { x->iov, bdesc, x->count, x->addr, x->context, x->data };

			ret = fi_recvmsg(ep->base, &m, x->flags);
		}
	} else {
		if (x->call == TH_CALL_PLAIN)
			ret = fi_send(ep->base, x->iov[0].iov_base, x->iov[0].iov_len, bdesc[0],
				      x->addr, x->context);
		else if (x->call == TH_CALL_V)
			ret = fi_sendv(ep->base, x->iov, bdesc, x->count, x->addr, x->context);
		else if (x->call == TH_CALL_DATA)
			ret = fi_senddata(ep->base, x->iov[0].iov_base, x->iov[0].iov_len, bdesc[0],
					  x->data, x->addr, x->context);
		else {
			struct fi_msg m = { x->iov, bdesc, x->count, x->addr, x->context, x->data };

			ret = fi_sendmsg(ep->base, &m, x->flags);
		}
	}
	if (!ret && !(x->call == TH_CALL_MSG && (x->flags & FI_PEEK)))
		th_count(dom, cmr, x->is_recv, total);
	th_trace_post(dom, x->name, cmr != NULL, first_dev, total, x->tag, x->context, ret);
	return ret;
}

/* inject: no desc, no completion; device memory found by address. A failed copy
 * from the device has no completion to carry it: the call fails (-FI_EIO). */
static ssize_t th_inject_unlocked(struct th_ep *ep, const char *name, int tagged,
				  const void *buf, size_t len, int has_data, uint64_t data,
				  fi_addr_t dest, uint64_t tag);

static ssize_t th_inject(struct th_ep *ep, const char *name, int tagged, const void *buf,
			 size_t len, int has_data, uint64_t data, fi_addr_t dest, uint64_t tag)
{
	struct th_domain *sd = ep->domain;
	th_serial_enter(sd);
	ssize_t ret = th_inject_unlocked(ep, name, tagged, buf, len, has_data, data, dest, tag);
	th_serial_leave(sd);
	return ret;
}

static ssize_t th_inject_unlocked(struct th_ep *ep, const char *name, int tagged,
				  const void *buf, size_t len, int has_data, uint64_t data,
				  fi_addr_t dest, uint64_t tag)
{
	struct th_domain *dom = ep->domain;
	struct th_mr *mr = len ? th_domain_find_cuda(dom, buf, len) : NULL;
	void *tmp = NULL;
	ssize_t ret;

	if (dom->rma && tagged && (tag & TH_NOTICE_TAG)) {
		th_log("error tag-reserved op=%s tag=0x%llx dom=%u", name, (unsigned long long)tag,
		       dom->id);
		return -FI_EINVAL;
	}
	ret = th_rules_msg(dom, name, tagged, 0, tag, 1, len, 1);
	if (ret)
		return ret;
	if (mr && dom->cuda) {
		if (len > 65536)
			return -FI_EINVAL; /* larger than any inject_size here */
		tmp = malloc(len);
		if (!tmp)
			return -FI_ENOMEM;
		ret = th_cuda_copy(dom, mr->cuda_dev, tmp, buf, len, 0, name, tag, NULL);
		if (ret) {
			free(tmp);
			th_trace_post(dom, name, 1, mr->cuda_dev, len, tag, NULL, ret);
			return ret;
		}
		buf = tmp;
	}
	if (dom->rx_cq_data && !tagged)
		data &= ~TH_NOTICE_MARK; /* only write notices carry it */
	if (tagged)
		ret = has_data ? fi_tinjectdata(ep->base, buf, len, data, dest, tag)
			       : fi_tinject(ep->base, buf, len, dest, tag);
	else
		ret = has_data ? fi_injectdata(ep->base, buf, len, data, dest)
			       : fi_inject(ep->base, buf, len, dest);
	free(tmp);
	if (!ret) {
		th_count(dom, mr, 0, len);
		atomic_fetch_add(&dom->counts[mr ? TH_IF_CUDA : TH_IF_SYSTEM].injects, 1);
	}
	th_trace_post(dom, name, mr != NULL, mr ? mr->cuda_dev : -1, len, tag, NULL, ret);
	return ret;
}

/* ---- tagged ops ---- */

/* TESTHMEM_FAIL_TRECV_MIN=N: a tagged receive of N bytes or more (N at least
 * 64 KiB) is refused with -FI_EIO, a hard error, as a NIC out of resources
 * would refuse it. Read at each such post, so a test may set it between
 * operations; receives below 64 KiB (control pools) never read it. */
static int th_fail_trecv(size_t len)
{
	if (len < 65536)
		return 0;
	const char *v = getenv("TESTHMEM_FAIL_TRECV_MIN");
	unsigned long long min = v && *v ? strtoull(v, NULL, 0) : 0;
	return min >= 65536 && len >= min;
}

static ssize_t th_trecv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
			uint64_t tag, uint64_t ignore, void *context)
{
	if (th_fail_trecv(len)) {
		th_log("refused trecv len=%zu (TESTHMEM_FAIL_TRECV_MIN)", len);
		return -FI_EIO;
	}
	struct iovec iov = { buf, len };
	struct th_xfer x = { "trecv", 1, 1, TH_CALL_PLAIN, &iov, &desc, 1, src, tag, ignore, 0,
			     context, 0 };

	return th_xfer(th_ep_of(ep), &x);
}

static ssize_t th_trecvv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
			 fi_addr_t src, uint64_t tag, uint64_t ignore, void *context)
{
	struct th_xfer x = { "trecvv", 1, 1, TH_CALL_V, iov, desc, count, src, tag, ignore, 0,
			     context, 0 };

	return th_xfer(th_ep_of(ep), &x);
}

static ssize_t th_trecvmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg, uint64_t flags)
{
	struct th_xfer x = { "trecvmsg", 1, 1, TH_CALL_MSG, msg->msg_iov, msg->desc,
			     msg->iov_count, msg->addr, msg->tag, msg->ignore, msg->data,
			     msg->context, flags };

	return th_xfer(th_ep_of(ep), &x);
}

static ssize_t th_tsend(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			fi_addr_t dest, uint64_t tag, void *context)
{
	struct iovec iov = { (void *)buf, len };
	struct th_xfer x = { "tsend", 1, 0, TH_CALL_PLAIN, &iov, &desc, 1, dest, tag, 0, 0,
			     context, 0 };

	return th_xfer(th_ep_of(ep), &x);
}

static ssize_t th_tsendv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
			 fi_addr_t dest, uint64_t tag, void *context)
{
	struct th_xfer x = { "tsendv", 1, 0, TH_CALL_V, iov, desc, count, dest, tag, 0, 0,
			     context, 0 };

	return th_xfer(th_ep_of(ep), &x);
}

static ssize_t th_tsendmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg, uint64_t flags)
{
	struct th_xfer x = { "tsendmsg", 1, 0, TH_CALL_MSG, msg->msg_iov, msg->desc,
			     msg->iov_count, msg->addr, msg->tag, 0, msg->data, msg->context,
			     flags };

	return th_xfer(th_ep_of(ep), &x);
}

static ssize_t th_tinject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest,
			  uint64_t tag)
{
	return th_inject(th_ep_of(ep), "tinject", 1, buf, len, 0, 0, dest, tag);
}

static ssize_t th_tsenddata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			    uint64_t data, fi_addr_t dest, uint64_t tag, void *context)
{
	struct iovec iov = { (void *)buf, len };
	struct th_xfer x = { "tsenddata", 1, 0, TH_CALL_DATA, &iov, &desc, 1, dest, tag, 0,
			     data, context, 0 };

	return th_xfer(th_ep_of(ep), &x);
}

static ssize_t th_tinjectdata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
			      fi_addr_t dest, uint64_t tag)
{
	return th_inject(th_ep_of(ep), "tinjectdata", 1, buf, len, 1, data, dest, tag);
}

static struct fi_ops_tagged th_tagged_ops = {
	.size = sizeof(struct fi_ops_tagged),
	.recv = th_trecv,
	.recvv = th_trecvv,
	.recvmsg = th_trecvmsg,
	.send = th_tsend,
	.sendv = th_tsendv,
	.sendmsg = th_tsendmsg,
	.inject = th_tinject,
	.senddata = th_tsenddata,
	.injectdata = th_tinjectdata,
};

/* ---- msg ops ---- */

static ssize_t th_recv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
		       void *context)
{
	struct iovec iov = { buf, len };
	struct th_xfer x = { "recv", 0, 1, TH_CALL_PLAIN, &iov, &desc, 1, src, 0, 0, 0,
			     context, 0 };

	return th_xfer(th_ep_of(ep), &x);
}

static ssize_t th_recvv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
			fi_addr_t src, void *context)
{
	struct th_xfer x = { "recvv", 0, 1, TH_CALL_V, iov, desc, count, src, 0, 0, 0,
			     context, 0 };

	return th_xfer(th_ep_of(ep), &x);
}

static ssize_t th_recvmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
	struct th_xfer x = { "recvmsg", 0, 1, TH_CALL_MSG, msg->msg_iov, msg->desc,
			     msg->iov_count, msg->addr, 0, 0, msg->data, msg->context, flags };

	return th_xfer(th_ep_of(ep), &x);
}

static ssize_t th_send(struct fid_ep *ep, const void *buf, size_t len, void *desc,
		       fi_addr_t dest, void *context)
{
	struct iovec iov = { (void *)buf, len };
	struct th_xfer x = { "send", 0, 0, TH_CALL_PLAIN, &iov, &desc, 1, dest, 0, 0, 0,
			     context, 0 };

	return th_xfer(th_ep_of(ep), &x);
}

static ssize_t th_sendv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
			fi_addr_t dest, void *context)
{
	struct th_xfer x = { "sendv", 0, 0, TH_CALL_V, iov, desc, count, dest, 0, 0, 0,
			     context, 0 };

	return th_xfer(th_ep_of(ep), &x);
}

static ssize_t th_sendmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
	struct th_xfer x = { "sendmsg", 0, 0, TH_CALL_MSG, msg->msg_iov, msg->desc,
			     msg->iov_count, msg->addr, 0, 0, msg->data, msg->context, flags };

	return th_xfer(th_ep_of(ep), &x);
}

static ssize_t th_msg_inject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest)
{
	return th_inject(th_ep_of(ep), "inject", 0, buf, len, 0, 0, dest, 0);
}

static ssize_t th_senddata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			   uint64_t data, fi_addr_t dest, void *context)
{
	struct iovec iov = { (void *)buf, len };
	struct th_xfer x = { "senddata", 0, 0, TH_CALL_DATA, &iov, &desc, 1, dest, 0, 0, data,
			     context, 0 };

	return th_xfer(th_ep_of(ep), &x);
}

static ssize_t th_injectdata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
			     fi_addr_t dest)
{
	return th_inject(th_ep_of(ep), "injectdata", 0, buf, len, 1, data, dest, 0);
}

static struct fi_ops_msg th_msg_ops = {
	.size = sizeof(struct fi_ops_msg),
	.recv = th_recv,
	.recvv = th_recvv,
	.recvmsg = th_recvmsg,
	.send = th_send,
	.sendv = th_sendv,
	.sendmsg = th_sendmsg,
	.inject = th_msg_inject,
	.senddata = th_senddata,
	.injectdata = th_injectdata,
};

/* ---- RMA ---- */

struct th_rma {
	const char *name;
	int is_read;
	enum th_call call;
	const struct iovec *iov;
	void **desc;
	size_t count;
	fi_addr_t addr;
	const struct fi_rma_iov *rma_iov;
	size_t rma_count;
	uint64_t data;
	void *context;
	uint64_t flags; /* TH_CALL_MSG: the caller's */
	int inject;	/* an inject: no completion, any size the bounce takes */
};

static ssize_t th_rma_bounce(struct th_ep *ep, const struct th_rma *r, const int *dev,
			     int first_dev, size_t total)
{
	struct th_domain *dom = ep->domain;
	/* RMA completions are transmit completions */
	struct th_xfer x = { r->name, 0, 0, r->call, NULL, NULL, 0, r->addr, 0, 0, r->data,
			     r->context, r->flags };
	struct th_copy_err cerr;
	struct fi_msg_rma m;
	struct th_bounce *b;
	struct iovec biov;
	struct th_op *op;
	uint64_t flags;
	int want;
	ssize_t ret;
	size_t i;

	flags = th_xfer_flags(ep, &x, &want);
	if (r->inject)
		want = 0;
	op = th_op_get(dom);
	if (!op)
		return -FI_EAGAIN;
	b = th_bounce_get(dom, total ? total : 1, first_dev);
	if (!b) {
		th_op_put(dom, op);
		return -FI_ENOMEM;
	}
	op->kind = r->is_read ? TH_OP_READ : TH_OP_WRITE;
	op->user_ctx = r->context;
	op->name = r->name;
	op->dev = first_dev;
	op->want_comp = want;
	op->bounce = b;
	op->len = total;
	op->iov_count = r->count;
	for (i = 0; i < r->count; i++) {
		op->iov[i] = r->iov[i];
		op->iov_dev[i] = dev[i];
	}
	if (!r->is_read) {
		ret = th_gather(dom, r->iov, dev, r->count, b->buf, r->name, 0, &cerr);
		if (ret) {
			th_bounce_put(dom, b);
			th_op_put(dom, op);
			return th_tx_copy_failed(ep, r->context, FI_RMA | FI_WRITE, 0, first_dev,
						 &cerr);
		}
	}
	biov.iov_base = b->buf;
	biov.iov_len = total;
	m.msg_iov = &biov;
	m.desc = &b->desc;
	m.iov_count = 1;
	m.addr = r->addr;
	m.rma_iov = r->rma_iov;
	m.rma_iov_count = r->rma_count;
	m.context = op;
	m.data = r->data;
	if (dom->rma)
		ret = th_rma_post(ep, op, r->is_read, r->addr, r->rma_iov, r->data,
				  !!(flags & FI_REMOTE_CQ_DATA), flags);
	else
		ret = r->is_read ? fi_readmsg(ep->base, &m, flags) : fi_writemsg(ep->base, &m, flags);
	if (ret) {
		th_bounce_put(dom, b);
		th_op_put(dom, op);
	}
	return ret;
}

static ssize_t th_rma_unlocked(struct th_ep *ep, const struct th_rma *r);

/* Over shm: one call at a time per domain (th_domain.serialize). */
static ssize_t th_rma(struct th_ep *ep, const struct th_rma *r)
{
	struct th_domain *sd = ep->domain;
	uint64_t flags = r->call == TH_CALL_MSG ? r->flags : ep->tx_op_flags;
	int counted = 0;

	th_serial_enter(sd);
	/* the transmit queue's depth, for what completes to the consumer */
	if (!ep->tx_selective || (flags & FI_COMPLETION)) {
		counted = th_q_take(ep, 0, r->context, 0);
		if (counted < 0) {
			th_trace_post(sd, r->name, 0, -1, 0, 0, r->context, counted);
			th_serial_leave(sd);
			return counted;
		}
	}
	ssize_t ret = th_rma_unlocked(ep, r);
	if (ret && counted > 0)
		th_q_undo(ep, 0, r->context);
	th_serial_leave(sd);
	return ret;
}

static ssize_t th_rma_unlocked(struct th_ep *ep, const struct th_rma *r)
{
	struct th_domain *dom = ep->domain;
	void *bdesc[TH_IOV_MAX];
	int dev[TH_IOV_MAX], first_dev = -1;
	struct th_mr *mr, *cmr = NULL;
	size_t i, total = 0;
	ssize_t ret;

	if (r->count > TH_IOV_MAX || (r->count && !r->iov) || !r->rma_iov)
		return -FI_EINVAL;
	struct th_rma xl;
	struct fi_rma_iov xl_iov[TH_IOV_MAX];
	if (dom->profile) {
		size_t sum = 0;

		for (i = 0; i < r->count; i++)
			sum += r->iov[i].iov_len;
		ret = th_rules_rma(dom, r->name, r->count, r->rma_count, sum,
				   !r->is_read && (r->call == TH_CALL_DATA ||
						   (r->call == TH_CALL_MSG &&
						    (r->flags & FI_REMOTE_CQ_DATA))),
				   r->call == TH_CALL_MSG && (r->flags & FI_INJECT));
		if (ret)
			return ret;
		if (th_remote_refused(ep, ep->tx_cq, r->name, r->rma_iov, r->rma_count, sum,
				      r->context, r->is_read)) {
			th_ctx_claim(dom, r->context);
			return 0;
		}
		if (dom->virt_xlate && r->rma_count <= TH_IOV_MAX) {
			th_virt_to_offset(dom, r->rma_iov, r->rma_count, xl_iov);
			xl = *r;
			xl.rma_iov = xl_iov;
			r = &xl;
		}
		th_ctx_claim(dom, r->context);
	}
	for (i = 0; i < r->count; i++) {
		ret = th_desc(ep, r->name, r->iov[i].iov_base, r->iov[i].iov_len,
			      r->desc ? r->desc[i] : NULL, &bdesc[i], &mr);
		if (ret)
			return ret;
		dev[i] = th_mr_is_cuda(mr) ? mr->cuda_dev : -1;
		if (dev[i] >= 0 && !cmr) {
			cmr = mr;
			first_dev = dev[i];
		}
		total += r->iov[i].iov_len;
	}
	/* TESTHMEM_BUSY_WRITES: a transmit queue full for a moment, as a NIC's
	 * is under load; the consumer posts the write again later */
	if (!r->is_read && !r->inject && dom->busy_writes &&
	    !(r->call == TH_CALL_MSG && (r->flags & FI_INJECT)) &&
	    atomic_fetch_add(&dom->writes_seen, 1) % dom->busy_writes == dom->busy_writes - 1)
		return -FI_EAGAIN;

	struct th_rma own;
	if (!dom->rma && dom->cq_data_mask != ~0ULL &&
	    (r->call == TH_CALL_DATA || (r->call == TH_CALL_MSG && (r->flags & FI_REMOTE_CQ_DATA)))) {
		/* TESTHMEM_CQ_DATA_SIZE: the caller's low bytes travel, and the
		 * write's length above them for the target's entry (th_cq_mask) */
		own = *r;
		own.data = (r->data & dom->cq_data_mask) | (uint64_t)(uint32_t)total << 32;
		r = &own;
	}
	if (dom->rma) {
		/* every RMA: the target may be device memory (th_rma.c) */
		if (r->rma_count != 1) {
			th_log("error rma-segments op=%s count=%zu dom=%u", r->name, r->rma_count,
			       dom->id);
			return -FI_EINVAL;
		}
		ret = th_rma_bounce(ep, r, dev, first_dev, total);
	} else if (dom->cuda && cmr) {
		ret = th_rma_bounce(ep, r, dev, first_dev, total);
	} else if (r->is_read) {
		if (r->call == TH_CALL_PLAIN)
			ret = fi_read(ep->base, r->iov[0].iov_base, r->iov[0].iov_len, bdesc[0],
				      r->addr, r->rma_iov[0].addr, r->rma_iov[0].key, r->context);
		else if (r->call == TH_CALL_V)
			ret = fi_readv(ep->base, r->iov, bdesc, r->count, r->addr,
				       r->rma_iov[0].addr, r->rma_iov[0].key, r->context);
		else {
			struct fi_msg_rma m = { r->iov, bdesc, r->count, r->addr, r->rma_iov,
						r->rma_count, r->context, r->data };

			ret = fi_readmsg(ep->base, &m, r->flags);
		}
	} else {
		if (r->call == TH_CALL_PLAIN)
			ret = fi_write(ep->base, r->iov[0].iov_base, r->iov[0].iov_len, bdesc[0],
				       r->addr, r->rma_iov[0].addr, r->rma_iov[0].key, r->context);
		else if (r->call == TH_CALL_V)
			ret = fi_writev(ep->base, r->iov, bdesc, r->count, r->addr,
					r->rma_iov[0].addr, r->rma_iov[0].key, r->context);
		else if (dom->rx_cq_data &&
			 (r->call == TH_CALL_DATA || (r->flags & FI_REMOTE_CQ_DATA))) {
			/* FI_RX_CQ_DATA: the write, then its notice, which
			 * consumes a receive at the target (th_rules.c) */
			uint64_t f = (r->call == TH_CALL_MSG ? r->flags : ep->tx_op_flags) &
				     ~FI_REMOTE_CQ_DATA;
			struct fi_msg_rma m = { r->iov, bdesc, r->count, r->addr, r->rma_iov,
						r->rma_count, r->context, 0 };

			ret = fi_writemsg(ep->base, &m, f);
			if (!ret)
				th_notice_send(ep, r->addr, r->data, total);
		} else if (r->call == TH_CALL_DATA)
			ret = fi_writedata(ep->base, r->iov[0].iov_base, r->iov[0].iov_len,
					   bdesc[0], r->data, r->addr, r->rma_iov[0].addr,
					   r->rma_iov[0].key, r->context);
		else {
			struct fi_msg_rma m = { r->iov, bdesc, r->count, r->addr, r->rma_iov,
						r->rma_count, r->context, r->data };

			ret = fi_writemsg(ep->base, &m, r->flags);
		}
	}
	if (!ret) {
		struct th_counters *c = &dom->counts[cmr ? TH_IF_CUDA : TH_IF_SYSTEM];

		atomic_fetch_add(r->is_read ? &c->reads : &c->writes, 1);
		atomic_fetch_add(&c->rma_bytes, total);
	}
	th_trace_post(dom, r->name, cmr != NULL, first_dev, total, 0, r->context, ret);
	return ret;
}

static ssize_t th_read(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
		       uint64_t addr, uint64_t key, void *context)
{
	struct iovec iov = { buf, len };
	struct fi_rma_iov riov = { addr, len, key };
	struct th_rma r = { "read", 1, TH_CALL_PLAIN, &iov, &desc, 1, src, &riov, 1, 0,
			    context, 0, 0 };

	return th_rma(th_ep_of(ep), &r);
}

static ssize_t th_readv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
			fi_addr_t src, uint64_t addr, uint64_t key, void *context)
{
	struct fi_rma_iov riov = { addr, 0, key };
	struct th_rma r = { "readv", 1, TH_CALL_V, iov, desc, count, src, &riov, 1, 0,
			    context, 0, 0 };
	size_t i;

	for (i = 0; iov && i < count; i++)
		riov.len += iov[i].iov_len;
	return th_rma(th_ep_of(ep), &r);
}

static ssize_t th_readmsg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags)
{
	struct th_rma r = { "readmsg", 1, TH_CALL_MSG, msg->msg_iov, msg->desc, msg->iov_count,
			    msg->addr, msg->rma_iov, msg->rma_iov_count, msg->data,
			    msg->context, flags, 0 };

	return th_rma(th_ep_of(ep), &r);
}

static ssize_t th_write(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			fi_addr_t dest, uint64_t addr, uint64_t key, void *context)
{
	struct iovec iov = { (void *)buf, len };
	struct fi_rma_iov riov = { addr, len, key };
	struct th_rma r = { "write", 0, TH_CALL_PLAIN, &iov, &desc, 1, dest, &riov, 1, 0,
			    context, 0, 0 };

	return th_rma(th_ep_of(ep), &r);
}

static ssize_t th_writev(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
			 fi_addr_t dest, uint64_t addr, uint64_t key, void *context)
{
	struct fi_rma_iov riov = { addr, 0, key };
	struct th_rma r = { "writev", 0, TH_CALL_V, iov, desc, count, dest, &riov, 1, 0,
			    context, 0, 0 };
	size_t i;

	for (i = 0; iov && i < count; i++)
		riov.len += iov[i].iov_len;
	return th_rma(th_ep_of(ep), &r);
}

static ssize_t th_writemsg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags)
{
	struct th_rma r = { "writemsg", 0, TH_CALL_MSG, msg->msg_iov, msg->desc, msg->iov_count,
			    msg->addr, msg->rma_iov, msg->rma_iov_count, msg->data,
			    msg->context, flags, 0 };

	return th_rma(th_ep_of(ep), &r);
}

static ssize_t th_writedata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			    uint64_t data, fi_addr_t dest, uint64_t addr, uint64_t key,
			    void *context)
{
	struct iovec iov = { (void *)buf, len };
	struct fi_rma_iov riov = { addr, len, key };
	struct th_rma r = { "writedata", 0, TH_CALL_DATA, &iov, &desc, 1, dest, &riov, 1, data,
			    context, 0, 0 };

	return th_rma(th_ep_of(ep), &r);
}

static ssize_t th_rma_inject_unlocked(struct th_ep *ep, const void *buf, size_t len,
				      int has_data, uint64_t data, fi_addr_t dest, uint64_t addr,
				      uint64_t key);

static ssize_t th_rma_inject(struct th_ep *ep, const void *buf, size_t len, int has_data,
			     uint64_t data, fi_addr_t dest, uint64_t addr, uint64_t key)
{
	struct th_domain *sd = ep->domain;
	th_serial_enter(sd);
	ssize_t ret = th_rma_inject_unlocked(ep, buf, len, has_data, data, dest, addr, key);
	th_serial_leave(sd);
	return ret;
}

static ssize_t th_rma_inject_unlocked(struct th_ep *ep, const void *buf, size_t len,
				      int has_data, uint64_t data, fi_addr_t dest, uint64_t addr,
				      uint64_t key)
{
	struct th_domain *dom = ep->domain;
	struct th_mr *mr = len ? th_domain_find_cuda(dom, buf, len) : NULL;
	void *tmp = NULL;
	ssize_t ret;

	ret = th_rules_rma(dom, "inject_write", 1, 1, len, has_data, 1);
	if (ret)
		return ret;
	{
		/* no completion to carry the error: the call fails */
		struct fi_rma_iov in = { addr, len, key };

		if (th_remote_refused(ep, NULL, "inject_write", &in, 1, len, NULL, 0))
			return -FI_EACCES;
	}
	if (dom->virt_xlate) {
		struct fi_rma_iov in = { addr, len, key }, out;

		th_virt_to_offset(dom, &in, 1, &out);
		addr = out.addr;
	}
	if (dom->rma) {
		/* as a write with no completion (th_rma.c) */
		struct iovec iov = { (void *)buf, len };
		struct fi_rma_iov riov = { addr, len, key };
		struct th_rma r = { "inject_write", 0, has_data ? TH_CALL_DATA : TH_CALL_PLAIN,
				    &iov, NULL, 1, dest, &riov, 1, data, NULL, 0, 1 };
		int dev = mr ? mr->cuda_dev : -1;

		ret = th_rma_bounce(ep, &r, &dev, dev, len);
		if (!ret) {
			struct th_counters *c = &dom->counts[mr ? TH_IF_CUDA : TH_IF_SYSTEM];

			atomic_fetch_add(&c->writes, 1);
			atomic_fetch_add(&c->rma_bytes, len);
			atomic_fetch_add(&c->injects, 1);
		}
		th_trace_post(dom, "inject_write", mr != NULL, dev, len, 0, NULL, ret);
		return ret;
	}
	if (mr && dom->cuda) {
		if (len > 65536)
			return -FI_EINVAL;
		tmp = malloc(len);
		if (!tmp)
			return -FI_ENOMEM;
		ret = th_cuda_copy(dom, mr->cuda_dev, tmp, buf, len, 0, "inject_write", 0, NULL);
		if (ret) {
			free(tmp);
			th_trace_post(dom, "inject_write", 1, mr->cuda_dev, len, 0, NULL, ret);
			return ret;
		}
		buf = tmp;
	}
	if (has_data && dom->cq_data_mask != ~0ULL)
		data = (data & dom->cq_data_mask) | (uint64_t)(uint32_t)len << 32; /* as th_rma_unlocked */
	if (has_data && dom->rx_cq_data) {
		/* FI_RX_CQ_DATA: the write, then its notice (th_rules.c) */
		ret = fi_inject_write(ep->base, buf, len, dest, addr, key);
		if (!ret)
			th_notice_send(ep, dest, data, len);
	} else {
		ret = has_data ? fi_inject_writedata(ep->base, buf, len, data, dest, addr, key)
			       : fi_inject_write(ep->base, buf, len, dest, addr, key);
	}
	free(tmp);
	if (!ret) {
		struct th_counters *c = &dom->counts[mr ? TH_IF_CUDA : TH_IF_SYSTEM];

		atomic_fetch_add(&c->writes, 1);
		atomic_fetch_add(&c->rma_bytes, len);
		atomic_fetch_add(&c->injects, 1);
	}
	th_trace_post(dom, "inject_write", mr != NULL, mr ? mr->cuda_dev : -1, len, 0, NULL, ret);
	return ret;
}

static ssize_t th_inject_write(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest,
			       uint64_t addr, uint64_t key)
{
	return th_rma_inject(th_ep_of(ep), buf, len, 0, 0, dest, addr, key);
}

static ssize_t th_inject_writedata(struct fid_ep *ep, const void *buf, size_t len,
				   uint64_t data, fi_addr_t dest, uint64_t addr, uint64_t key)
{
	return th_rma_inject(th_ep_of(ep), buf, len, 1, data, dest, addr, key);
}

static struct fi_ops_rma th_rma_ops = {
	.size = sizeof(struct fi_ops_rma),
	.read = th_read,
	.readv = th_readv,
	.readmsg = th_readmsg,
	.write = th_write,
	.writev = th_writev,
	.writemsg = th_writemsg,
	.inject = th_inject_write,
	.writedata = th_writedata,
	.injectdata = th_inject_writedata,
};

/* ---- atomics and collectives: not offered (caps are stripped) ---- */

static ssize_t th_no_atomic_write(struct fid_ep *ep, const void *buf, size_t count, void *desc,
				  fi_addr_t dest_addr, uint64_t addr, uint64_t key,
				  enum fi_datatype datatype, enum fi_op op, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t th_no_atomic_writev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
				   size_t count, fi_addr_t dest_addr, uint64_t addr,
				   uint64_t key, enum fi_datatype datatype, enum fi_op op,
				   void *context)
{
	return -FI_ENOSYS;
}

static ssize_t th_no_atomic_writemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
				     uint64_t flags)
{
	return -FI_ENOSYS;
}

static ssize_t th_no_atomic_inject(struct fid_ep *ep, const void *buf, size_t count,
				   fi_addr_t dest_addr, uint64_t addr, uint64_t key,
				   enum fi_datatype datatype, enum fi_op op)
{
	return -FI_ENOSYS;
}

static ssize_t th_no_atomic_readwrite(struct fid_ep *ep, const void *buf, size_t count,
				      void *desc, void *result, void *result_desc,
				      fi_addr_t dest_addr, uint64_t addr, uint64_t key,
				      enum fi_datatype datatype, enum fi_op op, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t th_no_atomic_readwritev(struct fid_ep *ep, const struct fi_ioc *iov,
				       void **desc, size_t count, struct fi_ioc *resultv,
				       void **result_desc, size_t result_count,
				       fi_addr_t dest_addr, uint64_t addr, uint64_t key,
				       enum fi_datatype datatype, enum fi_op op, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t th_no_atomic_readwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
					 struct fi_ioc *resultv, void **result_desc,
					 size_t result_count, uint64_t flags)
{
	return -FI_ENOSYS;
}

static ssize_t th_no_atomic_compwrite(struct fid_ep *ep, const void *buf, size_t count,
				      void *desc, const void *compare, void *compare_desc,
				      void *result, void *result_desc, fi_addr_t dest_addr,
				      uint64_t addr, uint64_t key, enum fi_datatype datatype,
				      enum fi_op op, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t th_no_atomic_compwritev(struct fid_ep *ep, const struct fi_ioc *iov,
				       void **desc, size_t count, const struct fi_ioc *comparev,
				       void **compare_desc, size_t compare_count,
				       struct fi_ioc *resultv, void **result_desc,
				       size_t result_count, fi_addr_t dest_addr, uint64_t addr,
				       uint64_t key, enum fi_datatype datatype, enum fi_op op,
				       void *context)
{
	return -FI_ENOSYS;
}

static ssize_t th_no_atomic_compwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
					 const struct fi_ioc *comparev, void **compare_desc,
					 size_t compare_count, struct fi_ioc *resultv,
					 void **result_desc, size_t result_count,
					 uint64_t flags)
{
	return -FI_ENOSYS;
}

static int th_no_atomic_valid(struct fid_ep *ep, enum fi_datatype datatype, enum fi_op op,
			      size_t *count)
{
	return -FI_ENOSYS;
}

static struct fi_ops_atomic th_atomic_ops = {
	.size = sizeof(struct fi_ops_atomic),
	.write = th_no_atomic_write,
	.writev = th_no_atomic_writev,
	.writemsg = th_no_atomic_writemsg,
	.inject = th_no_atomic_inject,
	.readwrite = th_no_atomic_readwrite,
	.readwritev = th_no_atomic_readwritev,
	.readwritemsg = th_no_atomic_readwritemsg,
	.compwrite = th_no_atomic_compwrite,
	.compwritev = th_no_atomic_compwritev,
	.compwritemsg = th_no_atomic_compwritemsg,
	.writevalid = th_no_atomic_valid,
	.readwritevalid = th_no_atomic_valid,
	.compwritevalid = th_no_atomic_valid,
};

static ssize_t th_no_barrier(struct fid_ep *ep, fi_addr_t coll_addr, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t th_no_broadcast(struct fid_ep *ep, void *buf, size_t count, void *desc,
			       fi_addr_t coll_addr, fi_addr_t root_addr,
			       enum fi_datatype datatype, uint64_t flags, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t th_no_alltoall(struct fid_ep *ep, const void *buf, size_t count, void *desc,
			      void *result, void *result_desc, fi_addr_t coll_addr,
			      enum fi_datatype datatype, uint64_t flags, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t th_no_allreduce(struct fid_ep *ep, const void *buf, size_t count, void *desc,
			       void *result, void *result_desc, fi_addr_t coll_addr,
			       enum fi_datatype datatype, enum fi_op op, uint64_t flags,
			       void *context)
{
	return -FI_ENOSYS;
}

static ssize_t th_no_reduce(struct fid_ep *ep, const void *buf, size_t count, void *desc,
			    void *result, void *result_desc, fi_addr_t coll_addr,
			    fi_addr_t root_addr, enum fi_datatype datatype, enum fi_op op,
			    uint64_t flags, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t th_no_scatter(struct fid_ep *ep, const void *buf, size_t count, void *desc,
			     void *result, void *result_desc, fi_addr_t coll_addr,
			     fi_addr_t root_addr, enum fi_datatype datatype, uint64_t flags,
			     void *context)
{
	return -FI_ENOSYS;
}

static ssize_t th_no_coll_msg(struct fid_ep *ep, const struct fi_msg_collective *msg,
			      struct fi_ioc *resultv, void **result_desc, size_t result_count,
			      uint64_t flags)
{
	return -FI_ENOSYS;
}

static ssize_t th_no_barrier2(struct fid_ep *ep, fi_addr_t coll_addr, uint64_t flags,
			      void *context)
{
	return -FI_ENOSYS;
}

static struct fi_ops_collective th_collective_ops = {
	.size = sizeof(struct fi_ops_collective),
	.barrier = th_no_barrier,
	.broadcast = th_no_broadcast,
	.alltoall = th_no_alltoall,
	.allreduce = th_no_allreduce,
	.allgather = th_no_alltoall,
	.reduce_scatter = th_no_allreduce,
	.reduce = th_no_reduce,
	.scatter = th_no_scatter,
	.gather = th_no_scatter,
	.msg = th_no_coll_msg,
	.barrier2 = th_no_barrier2,
};

/* ---- CM: RDM endpoints only name themselves ---- */

static int th_setname(fid_t fid, void *addr, size_t addrlen)
{
	struct th_ep *ep = container_of(fid, struct th_ep, ep_fid.fid);

	return fi_setname(&ep->base->fid, addr, addrlen);
}

static int th_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct th_ep *ep = container_of(fid, struct th_ep, ep_fid.fid);

	return fi_getname(&ep->base->fid, addr, addrlen);
}

static int th_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen)
{
	return fi_getpeer(th_ep_of(ep)->base, addr, addrlen);
}

static int th_no_connect(struct fid_ep *ep, const void *addr, const void *param,
			 size_t paramlen)
{
	return -FI_ENOSYS;
}

static int th_no_listen(struct fid_pep *pep)
{
	return -FI_ENOSYS;
}

static int th_no_accept(struct fid_ep *ep, const void *param, size_t paramlen)
{
	return -FI_ENOSYS;
}

static int th_no_reject(struct fid_pep *pep, fid_t handle, const void *param, size_t paramlen)
{
	return -FI_ENOSYS;
}

static int th_no_shutdown(struct fid_ep *ep, uint64_t flags)
{
	return -FI_ENOSYS;
}

static int th_no_join(struct fid_ep *ep, const void *addr, uint64_t flags, struct fid_mc **mc,
		      void *context)
{
	return -FI_ENOSYS;
}

static struct fi_ops_cm th_cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.setname = th_setname,
	.getname = th_getname,
	.getpeer = th_getpeer,
	.connect = th_no_connect,
	.listen = th_no_listen,
	.accept = th_no_accept,
	.reject = th_no_reject,
	.shutdown = th_no_shutdown,
	.join = th_no_join,
};

/* ---- endpoint ops ---- */

static ssize_t th_ep_cancel(fid_t fid, void *context)
{
	struct th_ep *ep = container_of(fid, struct th_ep, ep_fid.fid);
	struct th_op *op = th_op_find_user(ep->domain, context);
	ssize_t ret;

	th_rules_cancel(ep, context);
	ret = fi_cancel(&ep->base->fid, op ? (void *)op : context);

	TH_TRACE(ep->domain, 1, "trace cancel iface=%s ctx=%p ret=%zd dom=%u",
		 op ? "cuda" : "system", context, ret, ep->domain->id);
	return ret;
}

static int th_no_tx_ctx(struct fid_ep *sep, int index, struct fi_tx_attr *attr,
			struct fid_ep **tx_ep, void *context)
{
	return -FI_ENOSYS;
}

static int th_no_rx_ctx(struct fid_ep *sep, int index, struct fi_rx_attr *attr,
			struct fid_ep **rx_ep, void *context)
{
	return -FI_ENOSYS;
}

/* fi_rx/tx_size_left are deprecated wrappers of these slots: call the slots */
static ssize_t th_rx_size_left(struct fid_ep *ep)
{
	struct fid_ep *base = th_ep_of(ep)->base;
	ssize_t left = th_q_left(th_ep_of(ep), 1);

	return left >= 0 ? left : base->ops->rx_size_left(base);
}

static ssize_t th_tx_size_left(struct fid_ep *ep)
{
	struct fid_ep *base = th_ep_of(ep)->base;
	ssize_t left = th_q_left(th_ep_of(ep), 0);

	return left >= 0 ? left : base->ops->tx_size_left(base);
}

static struct fi_ops_ep th_ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = th_ep_cancel,
	.getopt = th_ep_getopt,
	.setopt = th_ep_setopt,
	.tx_ctx = th_no_tx_ctx,
	.rx_ctx = th_no_rx_ctx,
	.rx_size_left = th_rx_size_left,
	.tx_size_left = th_tx_size_left,
};

static int th_ep_close(struct fid *fid)
{
	struct th_ep *ep = container_of(fid, struct th_ep, ep_fid.fid);
	size_t i;
	int ret;

	th_rma_ep_close(ep);
	th_rules_ep_close(ep);
	ret = fi_close(&ep->base->fid);
	if (ret)
		return ret;
	if (ep->tx_cq)
		atomic_fetch_sub(&ep->tx_cq->ref, 1);
	if (ep->rx_cq)
		atomic_fetch_sub(&ep->rx_cq->ref, 1);
	if (ep->av)
		atomic_fetch_sub(&ep->av->ref, 1);
	if (ep->eq)
		atomic_fetch_sub(&ep->eq->ref, 1);
	for (i = 0; i < ep->ncntrs; i++)
		atomic_fetch_sub(&ep->cntrs[i]->ref, 1);
	atomic_fetch_sub(&ep->domain->ref, 1);
	free(ep);
	return 0;
}

static int th_ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct th_ep *ep = container_of(fid, struct th_ep, ep_fid.fid);
	int ret;

	switch (bfid->fclass) {
	case FI_CLASS_CQ: {
		struct th_cq *cq = container_of(bfid, struct th_cq, cq_fid.fid);

		if (((flags & FI_TRANSMIT) && ep->tx_cq) || ((flags & FI_RECV) && ep->rx_cq))
			return -FI_EINVAL;
		ret = fi_ep_bind(ep->base, &cq->base->fid, flags);
		if (ret)
			return ret;
		if (flags & FI_TRANSMIT) {
			ep->tx_cq = cq;
			ep->tx_selective = !!(flags & FI_SELECTIVE_COMPLETION);
			atomic_fetch_add(&cq->ref, 1);
		}
		if (flags & FI_RECV) {
			ep->rx_cq = cq;
			ep->rx_selective = !!(flags & FI_SELECTIVE_COMPLETION);
			atomic_fetch_add(&cq->ref, 1);
		}
		return 0;
	}
	case FI_CLASS_AV: {
		struct th_av *av = container_of(bfid, struct th_av, av_fid.fid);

		if (ep->av)
			return -FI_EINVAL;
		ret = fi_ep_bind(ep->base, &av->base->fid, flags);
		if (ret)
			return ret;
		ep->av = av;
		atomic_fetch_add(&av->ref, 1);
		return 0;
	}
	case FI_CLASS_CNTR: {
		struct th_cntr *cntr = container_of(bfid, struct th_cntr, cntr_fid.fid);

		if (ep->ncntrs == sizeof(ep->cntrs) / sizeof(ep->cntrs[0]))
			return -FI_ENOSPC;
		ret = fi_ep_bind(ep->base, &cntr->base->fid, flags);
		if (ret)
			return ret;
		ep->cntrs[ep->ncntrs++] = cntr;
		atomic_fetch_add(&cntr->ref, 1);
		return 0;
	}
	case FI_CLASS_EQ: {
		struct th_eq *eq = container_of(bfid, struct th_eq, eq_fid.fid);

		if (ep->eq)
			return -FI_EINVAL;
		ret = fi_ep_bind(ep->base, &eq->base->fid, flags);
		if (ret)
			return ret;
		ep->eq = eq;
		atomic_fetch_add(&eq->ref, 1);
		return 0;
	}
	default:
		return -FI_EINVAL;
	}
}

static int th_ep_control(struct fid *fid, int command, void *arg)
{
	struct th_ep *ep = container_of(fid, struct th_ep, ep_fid.fid);
	uint64_t flags;
	int ret;

	switch (command) {
	case FI_ENABLE:
		ret = fi_enable(ep->base);
		/* shm refuses a region of the endpoint's name that a dead process
		 * of this pid left (pids wrap within a test run), removing it as it
		 * refuses; a NIC has no such state, so enable once more */
		if (ret == -FI_EBUSY)
			ret = fi_enable(ep->base);
		if (!ret) {
			ep->enabled = 1;
			th_rma_ep_enable(ep);
		}
		return ret;
	case FI_SETOPSFLAG:
		ret = fi_control(&ep->base->fid, command, arg);
		if (!ret && arg) {
			flags = *(uint64_t *)arg;
			if (flags & FI_TRANSMIT)
				ep->tx_op_flags = flags & ~(FI_TRANSMIT | FI_RECV);
			if (flags & FI_RECV)
				ep->rx_op_flags = flags & ~(FI_TRANSMIT | FI_RECV);
		}
		return ret;
	case FI_ALIAS:
		return -FI_ENOSYS;
	default:
		return fi_control(&ep->base->fid, command, arg);
	}
}

static struct fi_ops th_ep_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = th_ep_close,
	.bind = th_ep_bind,
	.control = th_ep_control,
	.ops_open = th_no_ops_open,
	.tostr = th_no_tostr,
	.ops_set = th_no_ops_set,
};

int th_endpoint_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep_fid,
		     void *context)
{
	struct th_domain *dom = container_of(domain, struct th_domain, domain_fid);
	struct fi_info *binfo;
	struct th_ep *ep;
	int ret;

	if (!info || !ep_fid)
		return -FI_EINVAL;
	if (info->ep_attr && info->ep_attr->type != FI_EP_RDM &&
	    info->ep_attr->type != FI_EP_UNSPEC)
		return -FI_EINVAL;
	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -FI_ENOMEM;
	binfo = th_base_entry(info, dom->fabric->base_name, dom->mode);
	if (!binfo) {
		free(ep);
		return -FI_ENOMEM;
	}
	ret = fi_endpoint(dom->base, binfo, &ep->base, context);
	fi_freeinfo(binfo);
	if (ret) {
		free(ep);
		return ret;
	}
	ep->domain = dom;
	ep->tx_op_flags = info->tx_attr ? info->tx_attr->op_flags : 0;
	ep->rx_op_flags = info->rx_attr ? info->rx_attr->op_flags : 0;
	ep->ep_fid.fid.fclass = FI_CLASS_EP;
	ep->ep_fid.fid.context = context;
	ep->ep_fid.fid.ops = &th_ep_fi_ops;
	ep->ep_fid.ops = &th_ep_ops;
	ep->ep_fid.cm = &th_cm_ops;
	ep->ep_fid.msg = &th_msg_ops;
	ep->ep_fid.rma = &th_rma_ops;
	ep->ep_fid.tagged = &th_tagged_ops;
	ep->ep_fid.atomic = &th_atomic_ops;
	ep->ep_fid.collective = &th_collective_ops;
	th_rules_ep_open(ep);
	atomic_fetch_add(&dom->ref, 1);
	*ep_fid = &ep->ep_fid;
	return 0;
}
