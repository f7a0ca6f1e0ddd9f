/*
 * perf_raw.c - the raw libfabric baseline: one RDM endpoint per rank, tagged
 * sends and receives (or RMA writes with CQ data and credit messages),
 * completions read from one CQ. The only file of the tool that calls
 * libfabric (the plugin path reaches libfabric through the plugin).
 *
 * What it supports of the provider's requirements:
 *   mode     FI_CONTEXT, FI_CONTEXT2: every operation owns a struct fi_context2;
 *            FI_ASYNC_IOV: no call takes an iov array; FI_RX_CQ_DATA: the
 *            write target keeps a receive posted per window slot.
 *            Anything else (FI_MSG_PREFIX, ...) is refused at fi_getinfo.
 *   mr_mode  FI_MR_LOCAL: buffers are registered and their descriptors passed;
 *            FI_MR_ENDPOINT: registrations are bound to the endpoint and enabled;
 *            FI_MR_PROV_KEY: the provider's keys are used (no key is requested);
 *            FI_MR_VIRT_ADDR: a write's target address is the peer's virtual
 *            address, else an offset into its registration;
 *            FI_MR_ALLOCATED: nothing to do for mapped memory. Other bits are
 *            refused with a clear message.
 */
#include "perf_raw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#define PF_RAW_NAME_MAX 256 /* endpoint names exchanged out of band */
#define PF_RAW_API FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION)
#define PF_RAW_MODES (FI_CONTEXT | FI_CONTEXT2 | FI_ASYNC_IOV | FI_RX_CQ_DATA)
#define PF_RAW_MR_MODES \
	(FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT)
#define PF_RAW_CQ_BATCH 16

struct pf_raw {
	struct fi_info *list; /* fi_getinfo's answer; info is its first entry */
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	fi_addr_t peer;
	uint64_t next_key;
	int domain_fallback; /* the plugin's domain was not offered */
	struct fi_context2 ctx[PF_RAW_MAX_OPS];
	/* PF_RAW_WRITE: credits (writer: received into credit.in; target: sent
	 * from credit.out) and, where writes take posted receives, the target's
	 * receives (into credit.in, never read) */
	enum pf_raw_op op;
	int window, writer, rx_cq_data;
	struct {
		uint32_t in[PF_RAW_MAX_OPS], out[PF_RAW_MAX_OPS];
	} credit; /* one registration */
	unsigned char cout_busy[PF_RAW_MAX_OPS];
	unsigned char cin_due[PF_RAW_MAX_OPS]; /* a receive to post again (it met -FI_EAGAIN) */
	int cin_ndue;                          /* how many of them */
	struct fid_mr *ctl_mr;
	void *ctl_desc;
	struct fi_context2 cctx[PF_RAW_MAX_OPS]; /* credit receives or FI_RX_CQ_DATA receives */
	struct fi_context2 octx[PF_RAW_MAX_OPS]; /* credit sends */
};

/* What goes to the peer: the provider (to catch a mismatch) and the name. */
struct pf_raw_addr {
	uint32_t len;
	char prov[128];
	unsigned char name[PF_RAW_NAME_MAX];
};

static const char *pf_err(long rc)
{
	return fi_strerror((int)(rc < 0 ? -rc : rc));
}

static const char *pf_threading(enum fi_threading t)
{
	switch (t) {
	case FI_THREAD_SAFE: return "safe";
	case FI_THREAD_FID: return "fid";
	case FI_THREAD_DOMAIN: return "domain";
	case FI_THREAD_COMPLETION: return "completion";
	case FI_THREAD_ENDPOINT: return "endpoint";
	default: return "unspecified";
	}
}

static int pf_raw_getinfo(fh_rank_t *r, pf_raw_t *raw, const char *prov, const char *domain,
			  int missing_skips)
{
	struct fi_info *hints = fi_allocinfo();
	if (!hints)
		return fh_fail(r, "raw: fi_allocinfo: out of memory");
	int write = raw->op == PF_RAW_WRITE;
	hints->caps = write ? FI_MSG | FI_RMA : FI_TAGGED | FI_MSG;
	if (write)
		hints->domain_attr->cq_data_size = 4; /* what every RDMA fabric carries */
	hints->mode = PF_RAW_MODES;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = PF_RAW_MR_MODES;
	/* The plugin asks for FI_THREAD_SAFE (NCCL calls it from several
	 * threads); the same here, so the two paths differ by the plugin only. */
	hints->domain_attr->threading = FI_THREAD_SAFE;
	hints->fabric_attr->prov_name = strdup(prov); /* fi_freeinfo frees them */
	if (domain && *domain)
		hints->domain_attr->name = strdup(domain);
	if (!hints->fabric_attr->prov_name || (domain && *domain && !hints->domain_attr->name)) {
		fi_freeinfo(hints);
		return fh_fail(r, "raw: out of memory");
	}
	int rc = fi_getinfo(PF_RAW_API, NULL, NULL, 0, hints, &raw->list);
	if (rc == -FI_ENODATA && hints->domain_attr->name) {
		free(hints->domain_attr->name);
		hints->domain_attr->name = NULL;
		raw->domain_fallback = 1;
		rc = fi_getinfo(PF_RAW_API, NULL, NULL, 0, hints, &raw->list);
	}
	fi_freeinfo(hints);
	if (rc) {
		raw->list = NULL;
		const char *caps = write ? "FI_MSG|FI_RMA, 4 bytes of CQ data" : "FI_TAGGED|FI_MSG";
		if (rc == -FI_ENODATA && missing_skips)
			return fh_skip(r, "raw: libfabric offers no RDM endpoint with %s for provider "
					  "\"%s\" here (fi_info -l lists the providers)",
				       caps, prov);
		return fh_fail(r,
			       "raw: fi_getinfo(provider \"%s\", FI_EP_RDM, %s, mr_mode <= 0x%x, "
			       "mode <= FI_CONTEXT|FI_CONTEXT2|FI_ASYNC_IOV|FI_RX_CQ_DATA) failed: %s%s",
			       prov, caps, (unsigned)PF_RAW_MR_MODES, pf_err(rc),
			       rc == -FI_ENODATA && !write ? " (a provider without tags, such as "
							     "efa-direct: --raw-op write)" : "");
	}
	raw->info = raw->list;
	const struct fi_info *i = raw->info;
	/* The hints bound both, but a provider that ignores them must fail here,
	 * not corrupt memory later. */
	if (i->mode & ~(uint64_t)PF_RAW_MODES)
		return fh_fail(r, "raw: provider %s requires mode bits 0x%llx this tool does not "
				  "implement (only FI_CONTEXT, FI_CONTEXT2, FI_ASYNC_IOV, FI_RX_CQ_DATA)",
			       i->fabric_attr->prov_name,
			       (unsigned long long)(i->mode & ~(uint64_t)PF_RAW_MODES));
	if (i->domain_attr->mr_mode & ~PF_RAW_MR_MODES)
		return fh_fail(r, "raw: provider %s requires mr_mode bits 0x%x this tool does not "
				  "implement (only LOCAL, VIRT_ADDR, ALLOCATED, PROV_KEY, ENDPOINT)",
			       i->fabric_attr->prov_name,
			       (unsigned)(i->domain_attr->mr_mode & ~PF_RAW_MR_MODES));
	return FH_OK;
}

static int pf_raw_exchange(fh_rank_t *r, pf_raw_t *raw, int peer)
{
	struct pf_raw_addr mine, theirs;
	memset(&mine, 0, sizeof(mine));
	size_t len = sizeof(mine.name);
	int rc = fi_getname(&raw->ep->fid, mine.name, &len);
	if (rc)
		return fh_fail(r, "raw: fi_getname failed: %s%s", pf_err(rc),
			       rc == -FI_ETOOSMALL ? " (the name is longer than this tool carries)"
						   : "");
	mine.len = (uint32_t)len;
	snprintf(mine.prov, sizeof(mine.prov), "%s", raw->info->fabric_attr->prov_name);
	/* Both send first: the socketpair buffers a few hundred bytes easily. */
	if (fh_oob_send(r, peer, &mine, sizeof(mine)) || fh_oob_recv(r, peer, &theirs, sizeof(theirs)))
		return FH_FAIL;
	theirs.prov[sizeof(theirs.prov) - 1] = '\0';
	if (strcmp(mine.prov, theirs.prov))
		return fh_fail(r, "raw: this rank opened provider %s, rank %d opened %s", mine.prov,
			       peer, theirs.prov);
	if (theirs.len == 0 || theirs.len > sizeof(theirs.name))
		return fh_fail(r, "raw: rank %d sent an endpoint name of %u bytes", peer, theirs.len);
	rc = fi_av_insert(raw->av, theirs.name, 1, &raw->peer, 0, NULL);
	if (rc != 1)
		return fh_fail(r, "raw: fi_av_insert of rank %d's address failed: %s", peer,
			       rc < 0 ? pf_err(rc) : "not inserted");
	return FH_OK;
}

/* PF_RAW_WRITE: the writer's credit receive k, or the target's receive k
 * that a write with CQ data takes (FI_RX_CQ_DATA). 0 posted, 1 the provider
 * asks to retry (pf_raw_poll does), -1 after fh_fail(). */
static int pf_raw_post_ctl(fh_rank_t *r, pf_raw_t *raw, int k)
{
	ssize_t rc = fi_recv(raw->ep, &raw->credit.in[k], sizeof(raw->credit.in[k]),
			     raw->ctl_desc, FI_ADDR_UNSPEC, &raw->cctx[k]);
	if (rc == -FI_EAGAIN) {
		raw->cin_ndue += !raw->cin_due[k];
		raw->cin_due[k] = 1;
		return 1;
	}
	raw->cin_ndue -= raw->cin_due[k];
	raw->cin_due[k] = 0;
	if (rc) {
		fh_fail(r, "raw: fi_recv (%s %d) failed: %s",
			raw->writer ? "credit receive" : "receive for a write's CQ data", k,
			pf_err(rc));
		return -1;
	}
	return 0;
}

static int pf_raw_open_write(fh_rank_t *r, pf_raw_t *raw)
{
	const struct fi_info *i = raw->info;
	raw->rx_cq_data = ((i->mode | i->rx_attr->mode) & FI_RX_CQ_DATA) != 0;
	if (i->domain_attr->mr_mode & FI_MR_LOCAL) {
		void *mr = NULL;
		/* the credits are the only messages: both arrays, one registration */
		if (pf_raw_reg(r, raw, &raw->credit, sizeof(raw->credit), &mr, &raw->ctl_desc))
			return FH_FAIL;
		raw->ctl_mr = mr;
	}
	if (!raw->writer && !raw->rx_cq_data)
		return FH_OK;
	for (int k = 0; k < raw->window; k++)
		if (pf_raw_post_ctl(r, raw, k) < 0)
			return FH_FAIL;
	return FH_OK;
}

int pf_raw_open(fh_rank_t *r, int peer, const char *prov, const char *domain, int missing_skips,
		enum pf_raw_op op, int window, pf_raw_t **out)
{
	*out = NULL;
	if (window < 1 || window > PF_RAW_MAX_OPS)
		return fh_fail(r, "raw: window %d out of range (1..%d)", window, PF_RAW_MAX_OPS);
	pf_raw_t *raw = calloc(1, sizeof(*raw));
	if (!raw)
		return fh_fail(r, "raw: out of memory");
	raw->peer = FI_ADDR_UNSPEC;
	raw->next_key = 1;
	raw->op = op;
	raw->window = window;
	raw->writer = !(r->rank & 1);
	*out = raw; /* the caller closes it, also after a failure */
	int st = pf_raw_getinfo(r, raw, prov, domain, missing_skips);
	if (st)
		return st;
	struct fi_info *info = raw->info;
	int rc = fi_fabric(info->fabric_attr, &raw->fabric, NULL);
	if (rc)
		return fh_fail(r, "raw: fi_fabric(%s) failed: %s", info->fabric_attr->name,
			       pf_err(rc));
	rc = fi_domain(raw->fabric, info, &raw->domain, NULL);
	if (rc)
		return fh_fail(r, "raw: fi_domain(%s) failed: %s", info->domain_attr->name,
			       pf_err(rc));
	struct fi_cq_attr cq_attr = {
		.format = FI_CQ_FORMAT_TAGGED,
		.wait_obj = FI_WAIT_NONE,
		.size = 0, /* the provider's default: far more than 2 x PF_RAW_MAX_OPS */
	};
	rc = fi_cq_open(raw->domain, &cq_attr, &raw->cq, NULL);
	if (rc)
		return fh_fail(r, "raw: fi_cq_open failed: %s", pf_err(rc));
	struct fi_av_attr av_attr = {.type = info->domain_attr->av_type, .count = 4};
	rc = fi_av_open(raw->domain, &av_attr, &raw->av, NULL);
	if (rc)
		return fh_fail(r, "raw: fi_av_open failed: %s", pf_err(rc));
	rc = fi_endpoint(raw->domain, info, &raw->ep, NULL);
	if (rc)
		return fh_fail(r, "raw: fi_endpoint failed: %s", pf_err(rc));
	rc = fi_ep_bind(raw->ep, &raw->av->fid, 0);
	if (rc)
		return fh_fail(r, "raw: fi_ep_bind(AV) failed: %s", pf_err(rc));
	rc = fi_ep_bind(raw->ep, &raw->cq->fid, FI_TRANSMIT | FI_RECV);
	if (rc)
		return fh_fail(r, "raw: fi_ep_bind(CQ) failed: %s", pf_err(rc));
	rc = fi_enable(raw->ep);
	if (rc)
		return fh_fail(r, "raw: fi_enable failed: %s", pf_err(rc));
	if (pf_raw_exchange(r, raw, peer))
		return FH_FAIL;
	return op == PF_RAW_WRITE ? pf_raw_open_write(r, raw) : FH_OK;
}

int pf_raw_close(fh_rank_t *r, pf_raw_t *raw)
{
	if (!raw)
		return FH_OK;
	/* Endpoint first (it holds the AV, the CQ and the posted credit
	 * receives), the fabric last. */
	struct fid *order[] = {
		raw->ep ? &raw->ep->fid : NULL,
		raw->ctl_mr ? &raw->ctl_mr->fid : NULL,
		raw->av ? &raw->av->fid : NULL,
		raw->cq ? &raw->cq->fid : NULL,
		raw->domain ? &raw->domain->fid : NULL,
		raw->fabric ? &raw->fabric->fid : NULL,
	};
	static const char *const what[] = {"endpoint", "credit registration", "AV", "CQ", "domain",
					   "fabric"};
	int status = FH_OK;
	for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++) {
		if (!order[k])
			continue;
		int rc = fi_close(order[k]);
		if (rc && status == FH_OK)
			status = fh_fail(r, "raw: closing the %s failed: %s", what[k], pf_err(rc));
	}
	if (raw->list)
		fi_freeinfo(raw->list);
	free(raw);
	return status;
}

void pf_raw_describe(const pf_raw_t *raw, char *buf, size_t len)
{
	const struct fi_info *i = raw->info;
	uint32_t v = fi_version();
	int mr_local = (i->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
	snprintf(buf, len,
		 "libfabric %u.%u (API %u.%u), provider %s, domain %s%s, mr_mode 0x%x (%s), "
		 "mode 0x%llx, threading %s, inject %zu, max_msg_size %zu%s",
		 FI_MAJOR(v), FI_MINOR(v), FI_MAJOR(PF_RAW_API), FI_MINOR(PF_RAW_API),
		 i->fabric_attr->prov_name, i->domain_attr->name,
		 raw->domain_fallback ? " (the plugin's domain was not offered)" : "",
		 (unsigned)i->domain_attr->mr_mode,
		 mr_local ? "buffers registered" : "no registration needed",
		 (unsigned long long)i->mode, pf_threading(i->domain_attr->threading),
		 i->tx_attr->inject_size, i->ep_attr->max_msg_size,
		 raw->op == PF_RAW_WRITE ? (raw->rx_cq_data ? "; fi_writedata, 4-byte credits, "
							      "writes take posted receives" :
							      "; fi_writedata, 4-byte credits") :
					   "; fi_tsend");
}

const char *pf_raw_provider(const pf_raw_t *raw)
{
	return raw->info->fabric_attr->prov_name;
}

const char *pf_raw_domain(const pf_raw_t *raw)
{
	return raw->info->domain_attr->name;
}

size_t pf_raw_max_msg_size(const pf_raw_t *raw)
{
	return raw->info->ep_attr->max_msg_size;
}

/* Registers [buf, buf+len) with access, a key of the tool's where the
 * provider takes one, bound to the endpoint and enabled where it asks
 * (FI_MR_ENDPOINT). what names the registration in the failure. */
static int pf_raw_mr_open(fh_rank_t *r, pf_raw_t *raw, void *buf, size_t len, uint64_t access,
			  const char *what, struct fid_mr **out)
{
	uint64_t mode = raw->info->domain_attr->mr_mode;
	struct fid_mr *m = NULL;
	uint64_t key = (mode & FI_MR_PROV_KEY) ? 0 : raw->next_key++;
	int rc = fi_mr_reg(raw->domain, buf, len, access, 0, key, 0, &m, NULL);
	if (rc)
		return fh_fail(r, "raw: fi_mr_reg(%zu bytes%s) failed: %s", len, what, pf_err(rc));
	if (mode & FI_MR_ENDPOINT) {
		rc = fi_mr_bind(m, &raw->ep->fid, 0);
		if (!rc)
			rc = fi_mr_enable(m);
		if (rc) {
			fi_close(&m->fid);
			return fh_fail(r, "raw: binding a registration to the endpoint "
					  "(FI_MR_ENDPOINT) failed: %s", pf_err(rc));
		}
	}
	*out = m;
	return FH_OK;
}

int pf_raw_reg(fh_rank_t *r, pf_raw_t *raw, void *buf, size_t len, void **mr, void **desc)
{
	*mr = NULL;
	*desc = NULL;
	if (!(raw->info->domain_attr->mr_mode & FI_MR_LOCAL))
		return FH_OK;
	struct fid_mr *m = NULL;
	/* Send/receive only: no remote access, so the key and the address mode
	 * (FI_MR_VIRT_ADDR) never leave this process. */
	if (pf_raw_mr_open(r, raw, buf, len, FI_SEND | FI_RECV, "", &m))
		return FH_FAIL;
	*mr = m;
	*desc = fi_mr_desc(m);
	return FH_OK;
}

int pf_raw_dereg(fh_rank_t *r, pf_raw_t *raw, void *mr)
{
	if (!mr)
		return FH_OK;
	int rc = fi_close(&((struct fid_mr *)mr)->fid);
	if (rc)
		return fh_fail(r, "raw: closing a registration failed: %s", pf_err(rc));
	return FH_OK;
}

int pf_raw_expose(fh_rank_t *r, pf_raw_t *raw, void *buf, size_t len, void **mr, void **desc,
		  pf_raw_target_t *target)
{
	*mr = NULL;
	*desc = NULL;
	memset(target, 0, sizeof(*target));
	uint64_t mode = raw->info->domain_attr->mr_mode;
	struct fid_mr *m = NULL;
	if (pf_raw_mr_open(r, raw, buf, len, FI_SEND | FI_RECV | FI_WRITE | FI_REMOTE_WRITE,
			   ", remote writes", &m))
		return FH_FAIL;
	*mr = m;
	*desc = (mode & FI_MR_LOCAL) ? fi_mr_desc(m) : NULL;
	target->key = fi_mr_key(m);
	target->addr = (mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)buf : 0;
	return FH_OK;
}

int pf_raw_write(fh_rank_t *r, pf_raw_t *raw, int slot, void *buf, size_t len, void *desc,
		 const pf_raw_target_t *target, size_t off, uint32_t data)
{
	if (slot < 0 || slot >= PF_RAW_MAX_OPS) {
		fh_fail(r, "raw: slot %d out of range", slot);
		return -1;
	}
	ssize_t rc = fi_writedata(raw->ep, buf, len, desc, data, raw->peer, target->addr + off,
				  target->key, &raw->ctx[slot]);
	if (rc == 0)
		return 0;
	if (rc == -FI_EAGAIN)
		return 1;
	fh_fail(r, "raw: fi_writedata(%zu bytes at offset %zu) failed: %s", len, off, pf_err(rc));
	return -1;
}

int pf_raw_credit(fh_rank_t *r, pf_raw_t *raw, int slot)
{
	if (slot < 0 || slot >= raw->window) {
		fh_fail(r, "raw: credit for slot %d out of range", slot);
		return -1;
	}
	if (raw->cout_busy[slot])
		return 1; /* the slot's last credit is still going out */
	raw->credit.out[slot] = (uint32_t)slot;
	ssize_t rc = fi_send(raw->ep, &raw->credit.out[slot], sizeof(raw->credit.out[slot]),
			     raw->ctl_desc, raw->peer, &raw->octx[slot]);
	if (rc == -FI_EAGAIN)
		return 1;
	if (rc) {
		fh_fail(r, "raw: fi_send (credit for slot %d) failed: %s", slot, pf_err(rc));
		return -1;
	}
	raw->cout_busy[slot] = 1;
	return 0;
}

int pf_raw_post(fh_rank_t *r, pf_raw_t *raw, int is_send, int slot, void *buf, size_t len,
		void *desc, uint64_t tag)
{
	if (slot < 0 || slot >= PF_RAW_MAX_OPS) {
		fh_fail(r, "raw: slot %d out of range", slot);
		return -1;
	}
	void *ctx = &raw->ctx[slot];
	ssize_t rc = is_send ? fi_tsend(raw->ep, buf, len, desc, raw->peer, tag, ctx)
			     : fi_trecv(raw->ep, buf, len, desc, FI_ADDR_UNSPEC, tag, 0, ctx);
	if (rc == 0)
		return 0;
	if (rc == -FI_EAGAIN)
		return 1;
	fh_fail(r, "raw: %s(%zu bytes, tag %llu) failed: %s", is_send ? "fi_tsend" : "fi_trecv",
		len, (unsigned long long)tag, pf_err(rc));
	return -1;
}

/* Index of an operation context in the array ctxs of n, -1 if it is not one. */
static int pf_raw_index(const struct fi_context2 *ctxs, int n, const void *ctx)
{
	uintptr_t base = (uintptr_t)ctxs, at = (uintptr_t)ctx;
	if (at < base || at >= base + (size_t)n * sizeof(ctxs[0]) || (at - base) % sizeof(ctxs[0]))
		return -1;
	return (int)((at - base) / sizeof(ctxs[0]));
}

static int pf_raw_slot(const pf_raw_t *raw, const void *ctx)
{
	return pf_raw_index(raw->ctx, PF_RAW_MAX_OPS, ctx);
}

int pf_raw_poll(fh_rank_t *r, pf_raw_t *raw, pf_raw_done_t *done, int max)
{
	struct fi_cq_tagged_entry e[PF_RAW_CQ_BATCH];
	if (max > PF_RAW_CQ_BATCH)
		max = PF_RAW_CQ_BATCH;
	if (max < 1)
		return 0;
	if (raw->cin_ndue)
		for (int k = 0; k < raw->window; k++)
			if (raw->cin_due[k] && pf_raw_post_ctl(r, raw, k) < 0)
				return -1;
	ssize_t n = fi_cq_read(raw->cq, e, (size_t)max);
	if (n == -FI_EAGAIN)
		return 0;
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err;
		memset(&err, 0, sizeof(err));
		ssize_t en = fi_cq_readerr(raw->cq, &err, 0);
		if (en < 0) {
			fh_fail(r, "raw: fi_cq_readerr failed: %s", pf_err(en));
			return -1;
		}
		const char *prov = fi_cq_strerror(raw->cq, err.prov_errno, err.err_data, NULL, 0);
		int slot = (err.flags & FI_REMOTE_CQ_DATA) ? -1 : pf_raw_slot(raw, err.op_context);
		fh_fail(r, "raw: operation in slot %d failed: %s (provider: %s)%s", slot,
			pf_err(err.err), prov ? prov : "-",
			err.err == FI_ETRUNC ? " - a message larger than the posted receive" : "");
		return -1;
	}
	if (n < 0) {
		fh_fail(r, "raw: fi_cq_read failed: %s", pf_err(n));
		return -1;
	}
	int out = 0;
	for (ssize_t k = 0; k < n; k++) {
		pf_raw_done_t *d = &done[out];
		memset(d, 0, sizeof(*d));
		if (raw->op == PF_RAW_WRITE && (e[k].flags & FI_REMOTE_CQ_DATA)) {
			/* A write landed. Its context is ours only where it took a
			 * posted receive (FI_RX_CQ_DATA); elsewhere it is not read. */
			int c = raw->rx_cq_data ? pf_raw_index(raw->cctx, raw->window, e[k].op_context)
						: -1;
			if (c >= 0 && pf_raw_post_ctl(r, raw, c) < 0)
				return -1;
			d->kind = PF_RAW_LANDED;
			d->slot = -1;
			d->data = (uint32_t)e[k].data;
			out++;
			continue;
		}
		int c = raw->op == PF_RAW_WRITE ? pf_raw_index(raw->cctx, raw->window, e[k].op_context)
						: -1;
		if (c >= 0 && raw->writer) {
			uint32_t slot = raw->credit.in[c];
			if (pf_raw_post_ctl(r, raw, c) < 0)
				return -1;
			if (slot >= (uint32_t)raw->window) {
				fh_fail(r, "raw: a credit named slot %u, outside the window of %d", slot,
					raw->window);
				return -1;
			}
			d->kind = PF_RAW_CREDIT;
			d->slot = (int)slot;
			out++;
			continue;
		}
		c = raw->op == PF_RAW_WRITE ? pf_raw_index(raw->octx, raw->window, e[k].op_context) : -1;
		if (c >= 0) {
			raw->cout_busy[c] = 0; /* a credit went out: nothing to report */
			continue;
		}
		int slot = pf_raw_slot(raw, e[k].op_context);
		if (slot < 0) {
			fh_fail(r, "raw: completion with a context (%p) this tool never posted",
				e[k].op_context);
			return -1;
		}
		d->kind = PF_RAW_DONE;
		d->slot = slot;
		d->len = e[k].len;
		d->tag = e[k].tag;
		out++;
	}
	return out;
}
