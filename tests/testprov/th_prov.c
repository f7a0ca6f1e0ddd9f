/*
 * testhmem provider entry, configuration, log, getinfo, fabric and EQ.
 *
 * libfabric facts this file relies on (1.17, src/fabric.c):
 *  - fi_getinfo() names each returned entry itself: an entry whose
 *    fabric_attr->prov_name is NULL gets our name ("testhmem"); a non-NULL one gets
 *    ";testhmem" appended (as for utility providers). So entries copied from the base
 *    must have prov_name cleared.
 *  - fi_getinfo() with hints->fabric_attr->prov_name = "tcp;ofi_rxm" asks only the
 *    top provider of that list, so our nested call never reaches us again.
 *  - ofi_rxm/ofi_rxd stack on any core provider whose getinfo accepts MSG/DGRAM
 *    hints: we answer only RDM.
 *  - a positive FI_PROVIDER filter hides core providers it does not name: with
 *    FI_PROVIDER=testhmem the base (tcp, shm) is hidden and cannot be opened.
 */
#include "testhmem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int th_getinfo(uint32_t version, const char *node, const char *service,
		      uint64_t flags, const struct fi_info *hints, struct fi_info **info);
static int th_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
			  void *context);
static void th_cleanup(void);

struct fi_provider th_prov = {
	.version = TH_PROV_VERSION,
	.fi_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
	.name = TH_PROV_NAME,
	.getinfo = th_getinfo,
	.fabric = th_fabric_open,
	.cleanup = th_cleanup,
};

/* the entry point libfabric looks up after dlopen; declared first for
 * -Wmissing-prototypes */
FI_EXT_INI;

FI_EXT_INI
{
	return &th_prov;
}

static void th_cleanup(void)
{
}

/* ---- configuration ---- */

/* TESTHMEM_BASE, core provider first ("ofi_rxm;tcp" is accepted and turned round,
 * because fi_fabric() opens the last name of the list). */
void th_base_name(char *buf, size_t len)
{
	const char *env = getenv("TESTHMEM_BASE");
	const char *semi;

	if (!env || !*env)
		env = "tcp;ofi_rxm";
	semi = strchr(env, ';');
	if (semi && !strncmp(env, "ofi_", 4) && strncmp(semi + 1, "ofi_", 4))
		snprintf(buf, len, "%s;%.*s", semi + 1, (int)(semi - env), env);
	else
		snprintf(buf, len, "%s", env);
}

enum th_mode th_mode_from_env(void)
{
	const char *env = getenv("TESTHMEM_MODE");

	if (!env || !*env || !strcmp(env, "host"))
		return TH_MODE_HOST;
	if (!strcmp(env, "cuda"))
		return TH_MODE_CUDA;
	FI_WARN(&th_prov, FI_LOG_CORE, "TESTHMEM_MODE=%s unknown (host|cuda): using host\n",
		env);
	return TH_MODE_HOST;
}

size_t th_cq_data_size_from_env(void)
{
	const char *env = getenv("TESTHMEM_CQ_DATA_SIZE");
	long v = env && *env ? strtol(env, NULL, 10) : 0;

	if (v < 0 || v > 8) {
		FI_WARN(&th_prov, FI_LOG_CORE, "TESTHMEM_CQ_DATA_SIZE=%s: 0..8 (0: the base's)\n",
			env);
		return 0;
	}
	return (size_t)v;
}

int th_trace_level(void)
{
	const char *env = getenv("TESTHMEM_TRACE");

	return env && *env ? atoi(env) : 0;
}

const char *th_iface_name(enum fi_hmem_iface iface)
{
	switch (iface) {
	case FI_HMEM_SYSTEM:
		return "system";
	case FI_HMEM_CUDA:
		return "cuda";
	case FI_HMEM_ROCR:
		return "rocr";
	case FI_HMEM_ZE:
		return "ze";
	case FI_HMEM_NEURON:
		return "neuron";
	case FI_HMEM_SYNAPSEAI:
		return "synapseai";
	}
	return "unknown";
}

void th_log(const char *fmt, ...)
{
	const char *path = getenv("TESTHMEM_LOG");
	char line[512];
	va_list ap;
	int fd, n;

	if (!path || !*path)
		return;
	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0) {
		FI_WARN(&th_prov, FI_LOG_CORE, "TESTHMEM_LOG=%s: %s\n", path, strerror(errno));
		return;
	}
	if (write(fd, line, (size_t)n) != n)
		FI_WARN(&th_prov, FI_LOG_CORE, "TESTHMEM_LOG=%s: short write\n", path);
	close(fd);
}

/* ---- shared fid stubs ---- */

int th_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	return -FI_ENOSYS;
}

int th_no_control(struct fid *fid, int command, void *arg)
{
	return -FI_ENOSYS;
}

int th_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
		   void *context)
{
	return -FI_ENOSYS;
}

int th_no_tostr(const struct fid *fid, char *buf, size_t len)
{
	return -FI_ENOSYS;
}

int th_no_ops_set(struct fid *fid, const char *name, uint64_t flags, void *ops,
		  void *context)
{
	return -FI_ENOSYS;
}

/* ---- getinfo ---- */

/* Capabilities the wrapper does not forward (no atomic/collective ops behind it). */
#define TH_UNSUPPORTED_CAPS (FI_ATOMIC | FI_COLLECTIVE | FI_NAMED_RX_CTX)

static uint64_t th_all_caps(const struct fi_info *info)
{
	uint64_t caps = info->caps;

	if (info->tx_attr)
		caps |= info->tx_attr->caps;
	if (info->rx_attr)
		caps |= info->rx_attr->caps;
	return caps;
}

static void th_caps_edit(struct fi_info *info, uint64_t clear, uint64_t set)
{
	info->caps = (info->caps & ~clear) | set;
	if (info->tx_attr)
		info->tx_attr->caps = (info->tx_attr->caps & ~clear) | set;
	if (info->rx_attr)
		info->rx_attr->caps = (info->rx_attr->caps & ~clear) | set;
}

static int th_set_prov_name(struct fi_info *info, const char *name)
{
	if (!info->fabric_attr) {
		info->fabric_attr = calloc(1, sizeof(*info->fabric_attr));
		if (!info->fabric_attr)
			return -FI_ENOMEM;
	}
	free(info->fabric_attr->prov_name);
	info->fabric_attr->prov_name = NULL;
	info->fabric_attr->prov_version = 0;
	if (!name)
		return 0;
	info->fabric_attr->prov_name = strdup(name);
	return info->fabric_attr->prov_name ? 0 : -FI_ENOMEM;
}

/* A copy of one of our entries (or hints) as the base provider must see it:
 * without FI_HMEM/FI_MR_HMEM, named after the base. */
struct fi_info *th_info_to_base(const struct fi_info *info, const char *base_name,
				enum th_mode mode)
{
	struct fi_info *b = fi_dupinfo(info);

	if (!b)
		return NULL;
	th_caps_edit(b, FI_HMEM, 0);
	if (mode == TH_MODE_CUDA && b->caps)
		b->caps |= FI_SOURCE;
	if (b->domain_attr)
		b->domain_attr->mr_mode &= ~FI_MR_HMEM;
	/* cuda mode: remote RMA reaches a device buffer's shadow by offset, which
	 * the initiator can give without knowing where the shadow is */
	if (mode == TH_MODE_CUDA && b->domain_attr)
		b->domain_attr->mr_mode &= ~FI_MR_VIRT_ADDR;
	if (b->ep_attr && b->ep_attr->type == FI_EP_UNSPEC)
		b->ep_attr->type = FI_EP_RDM;
	const struct th_profile *p = th_profile();
	if (p) {
		/* the wrapper keeps the profile's rules itself; the base is asked
		 * only for what it must do: addressing by VA where the profile
		 * does (tcp;ofi_rxm never does: th_rma_unlocked translates) */
		if (b->domain_attr) {
			b->domain_attr->mr_mode =
				(p->mr_mode & FI_MR_VIRT_ADDR) && mode != TH_MODE_CUDA ? FI_MR_VIRT_ADDR : 0;
			b->domain_attr->mr_key_size = 0;
			b->domain_attr->cq_data_size = 0;
		}
		b->mode = 0;
		th_caps_edit(b, FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM,
			     b->caps ? (mode == TH_MODE_CUDA ? FI_SOURCE : 0) : 0);
		if (b->caps)
			th_caps_edit(b, 0, FI_MSG | FI_TAGGED | (b->caps & FI_RMA ? FI_RMA : 0));
		if (b->ep_attr) {
			b->ep_attr->max_msg_size = 0;
			b->ep_attr->mem_tag_format = 0;
		}
		if (b->tx_attr) {
			b->tx_attr->mode = 0;
			b->tx_attr->inject_size = 0;
			b->tx_attr->iov_limit = 0;
			b->tx_attr->rma_iov_limit = 0;
			b->tx_attr->size = 0;
			b->tx_attr->msg_order = 0;
		}
		if (b->rx_attr) {
			b->rx_attr->mode = 0;
			b->rx_attr->iov_limit = 0;
			b->rx_attr->size = 0;
			b->rx_attr->msg_order = 0;
		}
	}
	if (th_set_prov_name(b, base_name)) {
		fi_freeinfo(b);
		return NULL;
	}
	return b;
}

static _Thread_local int th_in_getinfo;

struct fi_info *th_base_entry(const struct fi_info *info, const char *base_name,
			      enum th_mode mode)
{
	struct fi_info *h, *list = NULL, *cur, *pick = NULL;
	const char *dn = info->domain_attr ? info->domain_attr->name : NULL;
	uint32_t version = info->fabric_attr && info->fabric_attr->api_version
				   ? info->fabric_attr->api_version
				   : FI_VERSION(1, 17);
	int ret;

	if (!th_profile())
		return th_info_to_base(info, base_name, mode);
	h = th_info_to_base(info, base_name, mode);
	if (!h)
		return NULL;
	if (h->domain_attr) {
		/* any domain of the base's: ours is picked by name below */
		free(h->domain_attr->name);
		h->domain_attr->name = NULL;
	}
	if (h->fabric_attr) {
		free(h->fabric_attr->name);
		h->fabric_attr->name = NULL;
	}
	th_in_getinfo = 1;
	ret = fi_getinfo(version, NULL, NULL, 0, h, &list);
	th_in_getinfo = 0;
	fi_freeinfo(h);
	if (ret)
		return NULL;
	for (cur = list; cur && !pick; cur = cur->next)
		if (!dn || (cur->domain_attr && cur->domain_attr->name &&
			    !strcmp(cur->domain_attr->name, dn)))
			pick = cur;
	if (!pick)
		pick = list;
	struct fi_info *next = pick->next;
	pick->next = NULL;
	struct fi_info *dup = fi_dupinfo(pick);
	pick->next = next;
	fi_freeinfo(list);
	if (dup && info->src_addr && info->src_addrlen) {
		/* the address the consumer's entry names, as fi_endpoint would use it */
		free(dup->src_addr);
		dup->src_addr = malloc(info->src_addrlen);
		if (dup->src_addr) {
			memcpy(dup->src_addr, info->src_addr, info->src_addrlen);
			dup->src_addrlen = info->src_addrlen;
		} else {
			dup->src_addrlen = 0;
		}
	}
	return dup;
}

/* What cuda mode changes in an entry we offer: FI_SOURCE, which it asks of the
 * base, only if the caller asked too; and the tag format one bit narrower, the
 * top bit being the notices' (TH_NOTICE_TAG, th_rma.c). */
static void th_cuda_mode_info(struct fi_info *info, const struct fi_info *hints)
{
	uint64_t fmt;

	if (hints && hints->caps && !(hints->caps & FI_SOURCE))
		th_caps_edit(info, FI_SOURCE, 0);
	if (!info->ep_attr || !(info->caps & FI_TAGGED))
		return;
	fmt = info->ep_attr->mem_tag_format;
	/* 0 and the "generic" patterns leave all 64 bits to the caller */
	if (!fmt || fmt == 0xaaaaaaaaaaaaaaaaULL || fmt == 0x5555555555555555ULL)
		fmt = ~0ULL;
	info->ep_attr->mem_tag_format = fmt & ~TH_NOTICE_TAG;
}

static int th_getinfo(uint32_t version, const char *node, const char *service,
		      uint64_t flags, const struct fi_info *hints, struct fi_info **info)
{
	struct fi_info *bhints, *binfo = NULL, *cur, *out = NULL, **tail = &out;
	char base[TH_NAME_MAX];
	int want_hmem = 0, want_mr_hmem = 0, plain = 0, ret;
	int cuda = th_mode_from_env() == TH_MODE_CUDA;
	const struct th_profile *prof = th_profile();
	size_t cq_data = prof ? 0 : th_cq_data_size_from_env();

	*info = NULL;
	/* belt and braces: the nested fi_getinfo names the base, never us */
	if (th_in_getinfo)
		return -FI_ENODATA;
	if (hints && hints->ep_attr && hints->ep_attr->type != FI_EP_UNSPEC &&
	    hints->ep_attr->type != FI_EP_RDM)
		return -FI_ENODATA; /* keeps ofi_rxm (MSG) and ofi_rxd (DGRAM) off us */
	if (hints && (th_all_caps(hints) & TH_UNSUPPORTED_CAPS))
		return -FI_ENODATA;

	/* libfabric's rule: a hint asking for more CQ data than offered finds nothing */
	if (cq_data && hints && hints->domain_attr && hints->domain_attr->cq_data_size > cq_data)
		return -FI_ENODATA;
	th_base_name(base, sizeof(base));
	if (hints) {
		want_hmem = !!(th_all_caps(hints) & FI_HMEM);
		want_mr_hmem = want_hmem && hints->domain_attr &&
			       (hints->domain_attr->mr_mode & FI_MR_HMEM);
		bhints = th_info_to_base(hints, base, th_mode_from_env());
	} else {
		bhints = fi_allocinfo();
		if (bhints && th_set_prov_name(bhints, base)) {
			fi_freeinfo(bhints);
			bhints = NULL;
		}
	}
	if (bhints && !bhints->ep_attr)
		bhints->ep_attr = calloc(1, sizeof(*bhints->ep_attr));
	if (!bhints || !bhints->ep_attr) {
		fi_freeinfo(bhints);
		return -FI_ENOMEM;
	}
	bhints->ep_attr->type = FI_EP_RDM;

	th_in_getinfo = 1;
	ret = fi_getinfo(version, node, service, flags & (FI_SOURCE | FI_NUMERICHOST), bhints,
			 &binfo);
	th_in_getinfo = 0;
	fi_freeinfo(bhints);
	if (ret) {
		const char *filter = getenv("FI_PROVIDER");

		if (filter && *filter)
			FI_WARN(&th_prov, FI_LOG_CORE,
				"base \"%s\" found nothing (%s); note FI_PROVIDER=%s must "
				"also name the base core provider (e.g. testhmem,tcp)\n",
				base, fi_strerror(-ret), filter);
		else
			FI_INFO(&th_prov, FI_LOG_CORE, "base \"%s\": %s\n", base,
				fi_strerror(-ret));
		return ret;
	}

	/* shm offers a second, FI_HMEM entry of its own: keep the plain ones */
	for (cur = binfo; cur; cur = cur->next)
		plain += !(th_all_caps(cur) & FI_HMEM);

	for (cur = binfo; cur; cur = cur->next) {
		struct fi_info *dup, *next = cur->next;

		if (plain && (th_all_caps(cur) & FI_HMEM))
			continue;
		cur->next = NULL;
		if (prof) {
			struct fi_info **first = tail;

			ret = th_profile_entries(prof, hints, cur, &tail);
			cur->next = next;
			if (ret) {
				fi_freeinfo(out);
				fi_freeinfo(binfo);
				return ret;
			}
			for (struct fi_info *e = *first; e && cuda; e = e->next)
				th_cuda_mode_info(e, hints);
			continue;
		}
		dup = fi_dupinfo(cur);
		cur->next = next;
		if (!dup || th_set_prov_name(dup, NULL)) {
			fi_freeinfo(dup);
			fi_freeinfo(out);
			fi_freeinfo(binfo);
			return -FI_ENOMEM;
		}
		th_caps_edit(dup, FI_HMEM | TH_UNSUPPORTED_CAPS, want_hmem ? FI_HMEM : 0);
		if (cuda)
			th_cuda_mode_info(dup, hints);
		if (cq_data && dup->domain_attr && dup->domain_attr->cq_data_size > cq_data)
			dup->domain_attr->cq_data_size = cq_data;
		if (want_mr_hmem)
			dup->domain_attr->mr_mode |= FI_MR_HMEM;
		*tail = dup;
		tail = &dup->next;
	}
	fi_freeinfo(binfo);
	*info = out;
	return out ? 0 : -FI_ENODATA;
}

/* ---- fabric ---- */

static int th_fabric_close(struct fid *fid)
{
	struct th_fabric *fab = container_of(fid, struct th_fabric, fabric_fid.fid);
	int ret;

	if (atomic_load(&fab->ref))
		return -FI_EBUSY;
	ret = fi_close(&fab->base->fid);
	if (ret)
		return ret;
	free(fab);
	return 0;
}

static int th_fabric_control(struct fid *fid, int command, void *arg)
{
	struct th_fabric *fab = container_of(fid, struct th_fabric, fabric_fid.fid);

	return fi_control(&fab->base->fid, command, arg);
}

static int th_domain2(struct fid_fabric *fabric, struct fi_info *info,
		      struct fid_domain **domain, uint64_t flags, void *context)
{
	if (flags)
		return -FI_EINVAL;
	return th_domain_open(fabric, info, domain, context);
}

static int th_no_passive_ep(struct fid_fabric *fabric, struct fi_info *info,
			    struct fid_pep **pep, void *context)
{
	return -FI_ENOSYS;
}

static int th_no_wait_open(struct fid_fabric *fabric, struct fi_wait_attr *attr,
			   struct fid_wait **waitset)
{
	return -FI_ENOSYS;
}

/* Our wait-capable objects and the base object each stands for. */
static struct fid *th_base_fid(struct fid *fid)
{
	switch (fid->fclass) {
	case FI_CLASS_CQ:
		return &container_of(fid, struct th_cq, cq_fid.fid)->base->fid;
	case FI_CLASS_EQ:
		return &container_of(fid, struct th_eq, eq_fid.fid)->base->fid;
	case FI_CLASS_CNTR:
		return &container_of(fid, struct th_cntr, cntr_fid.fid)->base->fid;
	default:
		return NULL;
	}
}

static int th_trywait(struct fid_fabric *fabric, struct fid **fids, int count)
{
	struct th_fabric *fab = container_of(fabric, struct th_fabric, fabric_fid);
	struct fid *bfids[64];
	int i;

	if (count < 0 || count > 64)
		return -FI_EINVAL;
	for (i = 0; i < count; i++) {
		bfids[i] = th_base_fid(fids[i]);
		if (!bfids[i])
			return -FI_EINVAL;
	}
	return fi_trywait(fab->base, bfids, count);
}

static struct fi_ops th_fabric_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = th_fabric_close,
	.bind = th_no_bind,
	.control = th_fabric_control,
	.ops_open = th_no_ops_open,
	.tostr = th_no_tostr,
	.ops_set = th_no_ops_set,
};

static struct fi_ops_fabric th_fabric_ops = {
	.size = sizeof(struct fi_ops_fabric),
	.domain = th_domain_open,
	.passive_ep = th_no_passive_ep,
	.eq_open = th_eq_open,
	.wait_open = th_no_wait_open,
	.trywait = th_trywait,
	.domain2 = th_domain2,
};

static int th_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
			  void *context)
{
	struct fi_fabric_attr battr;
	struct th_fabric *fab;
	int ret;

	if (!attr || !attr->name || !fabric)
		return -FI_EINVAL;
	fab = calloc(1, sizeof(*fab));
	if (!fab)
		return -FI_ENOMEM;
	th_base_name(fab->base_name, sizeof(fab->base_name));

	/* the base checks prov_version against its own: 0 passes */
	battr = *attr;
	battr.prov_name = fab->base_name;
	battr.prov_version = 0;
	ret = fi_fabric(&battr, &fab->base, context);
	if (ret) {
		FI_WARN(&th_prov, FI_LOG_FABRIC, "fi_fabric(%s, %s): %s\n", fab->base_name,
			attr->name, fi_strerror(-ret));
		free(fab);
		return ret;
	}
	fab->fabric_fid.fid.fclass = FI_CLASS_FABRIC;
	fab->fabric_fid.fid.context = context;
	fab->fabric_fid.fid.ops = &th_fabric_fi_ops;
	fab->fabric_fid.ops = &th_fabric_ops;
	fab->fabric_fid.api_version = attr->api_version;
	*fabric = &fab->fabric_fid;
	return 0;
}

/* ---- EQ: forwarded as is (events carrying fids name the base objects) ---- */

static int th_eq_close(struct fid *fid)
{
	struct th_eq *eq = container_of(fid, struct th_eq, eq_fid.fid);
	int ret;

	if (atomic_load(&eq->ref))
		return -FI_EBUSY;
	ret = fi_close(&eq->base->fid);
	if (ret)
		return ret;
	atomic_fetch_sub(&eq->fabric->ref, 1);
	free(eq);
	return 0;
}

static int th_eq_control(struct fid *fid, int command, void *arg)
{
	struct th_eq *eq = container_of(fid, struct th_eq, eq_fid.fid);

	return fi_control(&eq->base->fid, command, arg);
}

static ssize_t th_eq_read(struct fid_eq *eq_fid, uint32_t *event, void *buf, size_t len,
			  uint64_t flags)
{
	struct th_eq *eq = container_of(eq_fid, struct th_eq, eq_fid);

	return fi_eq_read(eq->base, event, buf, len, flags);
}

static ssize_t th_eq_readerr(struct fid_eq *eq_fid, struct fi_eq_err_entry *buf,
			     uint64_t flags)
{
	struct th_eq *eq = container_of(eq_fid, struct th_eq, eq_fid);

	return fi_eq_readerr(eq->base, buf, flags);
}

static ssize_t th_eq_write(struct fid_eq *eq_fid, uint32_t event, const void *buf,
			   size_t len, uint64_t flags)
{
	struct th_eq *eq = container_of(eq_fid, struct th_eq, eq_fid);

	return fi_eq_write(eq->base, event, buf, len, flags);
}

static ssize_t th_eq_sread(struct fid_eq *eq_fid, uint32_t *event, void *buf, size_t len,
			   int timeout, uint64_t flags)
{
	struct th_eq *eq = container_of(eq_fid, struct th_eq, eq_fid);

	return fi_eq_sread(eq->base, event, buf, len, timeout, flags);
}

static const char *th_eq_strerror(struct fid_eq *eq_fid, int prov_errno, const void *err_data,
				  char *buf, size_t len)
{
	struct th_eq *eq = container_of(eq_fid, struct th_eq, eq_fid);

	return fi_eq_strerror(eq->base, prov_errno, err_data, buf, len);
}

static struct fi_ops th_eq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = th_eq_close,
	.bind = th_no_bind,
	.control = th_eq_control,
	.ops_open = th_no_ops_open,
	.tostr = th_no_tostr,
	.ops_set = th_no_ops_set,
};

static struct fi_ops_eq th_eq_ops = {
	.size = sizeof(struct fi_ops_eq),
	.read = th_eq_read,
	.readerr = th_eq_readerr,
	.write = th_eq_write,
	.sread = th_eq_sread,
	.strerror = th_eq_strerror,
};

int th_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **eq_fid,
	       void *context)
{
	struct th_fabric *fab = container_of(fabric, struct th_fabric, fabric_fid);
	struct th_eq *eq;
	int ret;

	if (attr && attr->wait_obj == FI_WAIT_SET)
		return -FI_ENOSYS; /* no wait sets behind the wrapper */
	eq = calloc(1, sizeof(*eq));
	if (!eq)
		return -FI_ENOMEM;
	ret = fi_eq_open(fab->base, attr, &eq->base, context);
	if (ret) {
		free(eq);
		return ret;
	}
	eq->fabric = fab;
	eq->eq_fid.fid.fclass = FI_CLASS_EQ;
	eq->eq_fid.fid.context = context;
	eq->eq_fid.fid.ops = &th_eq_fi_ops;
	eq->eq_fid.ops = &th_eq_ops;
	atomic_fetch_add(&fab->ref, 1);
	*eq_fid = &eq->eq_fid;
	return 0;
}
