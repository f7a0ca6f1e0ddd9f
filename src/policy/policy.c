/*
 * policy.c - provider selection and the GPU-memory decision. Pure: see policy.h.
 */
#include "policy/policy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "nccl/nccl_net.h"
#include "util/util.h"

/* NCCL_FABRIC_PROVIDER split into include (in preference order) and exclude lists. */
struct name_list {
	int ninc, nexc;
	char inc[16][POLICY_NAME_LEN];
	char exc[16][POLICY_NAME_LEN];
	bool inc_exact[16], exc_exact[16]; /* the item is some listed provider's full name */
};

static void parse_names(const char *text, struct name_list *l)
{
	memset(l, 0, sizeof(*l));
	const char *p = text;
	while (*p) {
		size_t len = strcspn(p, ",");
		char item[POLICY_NAME_LEN];
		size_t s = 0, e = len;
		while (s < e && (p[s] == ' ' || p[s] == '\t'))
			s++;
		while (e > s && (p[e - 1] == ' ' || p[e - 1] == '\t'))
			e--;
		if (e > s && e - s < sizeof(item)) {
			memcpy(item, p + s, e - s);
			item[e - s] = '\0';
			if (item[0] == '^' && item[1] && l->nexc < 16)
				util_strlcpy(l->exc[l->nexc++], item + 1, POLICY_NAME_LEN);
			else if (item[0] != '^' && l->ninc < 16)
				util_strlcpy(l->inc[l->ninc++], item, POLICY_NAME_LEN);
		}
		p += len;
		if (*p == ',')
			p++;
	}
}

/* Newest API version the plugin asks for: its code is written against 1.17
 * structs and knows the 1.18 (CUDA_API_PERMITTED) and 1.20 (DMA-BUF) additions. */
#define POLICY_API_VERSION_MAX FI_VERSION(1, 22)
#define POLICY_API_VERSION_MIN FI_VERSION(1, 17)

static void plan_one(struct policy_attempt_plan *p, bool local, bool hmem, bool rma, uint32_t api,
		     bool legacy)
{
	memset(p, 0, sizeof(*p));
	p->hmem = hmem;
	p->remote = !local;
	p->rma = rma;
	p->legacy = legacy;
	/* No locality bit for the single-host pass: some single-host providers
	 * answer nothing when FI_LOCAL_COMM is asked for (policy_traits.c, "no
	 * FI_LOCAL_COMM"). */
	p->caps = FI_TAGGED | FI_MSG | (local ? 0 : FI_REMOTE_COMM) | (hmem ? FI_HMEM : 0) |
		  (rma ? (FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE) : 0);
	p->mode = POLICY_SUPPORTED_MODE;
	p->mr_mode = POLICY_SUPPORTED_MR_MODE & ~(hmem ? 0 : FI_MR_HMEM);
	p->api_version = api;
	snprintf(p->label, sizeof(p->label), "%s, %s%s%s", hmem ? "FI_HMEM" : "host memory",
		 local ? "single-host allowed" : "FI_REMOTE_COMM", rma ? ", FI_RMA" : "",
		 legacy ? ", API 1.17 (older providers)" : "");
}

int policy_plan(const struct cfg_values *cfg, uint32_t fi_version,
		    struct policy_attempt_plan plan[POLICY_MAX_ATTEMPTS])
{
	uint32_t api = fi_version < POLICY_API_VERSION_MAX ? fi_version : POLICY_API_VERSION_MAX;
	if (api < POLICY_API_VERSION_MIN)
		api = POLICY_API_VERSION_MIN;
	/* Single-host providers never answer FI_REMOTE_COMM; ask for them only when
	 * the user named providers, since they are used only when named. */
	struct name_list names;
	parse_names(cfg->v[CFG_PROVIDER].s, &names);
	bool named = names.ninc > 0;
	/* Each API 1.17 ask follows its newer twin at once, so the order of
	 * preference (remote first, FI_HMEM first, RMA first) holds for providers
	 * of either kind. */
	int n = 0;
	for (int local = 0; local <= (named ? 1 : 0); local++)
		for (int hmem = 1; hmem >= 0; hmem--)
			for (int rma = 1; rma >= 0; rma--)
				for (int legacy = 0; legacy <= (api > POLICY_API_VERSION_MIN ? 1 : 0); legacy++)
					plan_one(&plan[n++], local, hmem, rma,
						 legacy ? POLICY_API_VERSION_MIN : api, legacy);
	/* Last, providers without tags (efa-direct): every message then goes as an
	 * RMA write after the CTS, so FI_RMA is asked for. */
	for (int local = 0; local <= (named ? 1 : 0); local++)
		for (int hmem = 1; hmem >= 0; hmem--)
			for (int legacy = 0; legacy <= (api > POLICY_API_VERSION_MIN ? 1 : 0); legacy++) {
				struct policy_attempt_plan *p = &plan[n++];
				plan_one(p, local, hmem, true, legacy ? POLICY_API_VERSION_MIN : api,
					 legacy);
				p->caps &= ~(uint64_t)FI_TAGGED;
				p->notag = true;
				size_t l = strlen(p->label);
				snprintf(p->label + l, sizeof(p->label) - l, ", no FI_TAGGED");
			}
	return n;
}

unsigned policy_tag_bits(uint64_t fmt)
{
	/* 0 and the "generic" patterns (0xaaaa..., 0x5555...) mean all 64 bits are
	 * the application's. Otherwise the highest set bit bounds the usable tag. */
	if (fmt == 0 || fmt == 0xaaaaaaaaaaaaaaaaULL || fmt == 0x5555555555555555ULL)
		return 64;
	return 64 - (unsigned)__builtin_clzll(fmt);
}

bool policy_name_matches(const char *item, const char *prov)
{
	return item[0] && !strcasecmp(item, prov);
}

bool policy_name_matches_core(const char *item, const char *prov)
{
	/* the core of a layered provider ("tcp" names "tcp;ofi_rxm"), or the
	 * layer on top ("ofi_rxm" names it too; a wrapping provider is found
	 * by its own name over any core) */
	size_t n = strcspn(prov, ";");
	const char *top = strrchr(prov, ';');
	if (prov[n] != ';' || !item[0])
		return false;
	return (strlen(item) == n && !strncasecmp(item, prov, n)) || !strcasecmp(item, top + 1);
}

static bool item_matches(const char *item, bool exact, const char *prov)
{
	return exact ? policy_name_matches(item, prov) : policy_name_matches_core(item, prov);
}

static int include_rank(const struct name_list *l, const char *prov)
{
	for (int i = 0; i < l->ninc; i++)
		if (item_matches(l->inc[i], l->inc_exact[i], prov))
			return i;
	return -1;
}

static bool excluded(const struct name_list *l, const char *prov)
{
	for (int i = 0; i < l->nexc; i++)
		if (item_matches(l->exc[i], l->exc_exact[i], prov))
			return true;
	return false;
}

/* Decides, per item, which rule names its providers: the exact one when any
 * provider libfabric listed has that full name, else the core-name one. */
static void resolve_names(struct name_list *l, const struct policy_selection *sel)
{
	for (int i = 0; i < l->ninc + l->nexc; i++) {
		const char *item = i < l->ninc ? l->inc[i] : l->exc[i - l->ninc];
		bool exact = false;
		for (int k = 0; k < sel->ncands && !exact; k++)
			exact = policy_name_matches(item, sel->cands[k].prov);
		if (i < l->ninc)
			l->inc_exact[i] = exact;
		else
			l->exc_exact[i - l->ninc] = exact;
	}
}

static void describe_names(const struct name_list *l, const struct policy_selection *sel,
			   char *buf, size_t len)
{
	size_t off = 0;
	buf[0] = '\0';
	for (int i = 0; i < l->ninc + l->nexc && off < len; i++) {
		bool inc = i < l->ninc;
		const char *item = inc ? l->inc[i] : l->exc[i - l->ninc];
		bool exact = inc ? l->inc_exact[i] : l->exc_exact[i - l->ninc];
		const char *layered = NULL;
		for (int k = 0; k < sel->ncands && !exact && !layered; k++)
			if (policy_name_matches_core(item, sel->cands[k].prov))
				layered = sel->cands[k].prov;
		int w;
		if (exact)
			w = snprintf(buf + off, len - off, "%s\"%s%s\" names provider %s", off ? "; " : "",
				     inc ? "" : "^", item, item);
		else if (layered)
			w = snprintf(buf + off, len - off,
				     "%s\"%s%s\" names the layered providers with %s in them (%s...): no "
				     "provider is called %s alone here",
				     off ? "; " : "", inc ? "" : "^", item, item, layered, item);
		else
			w = snprintf(buf + off, len - off, "%s\"%s%s\" names no provider listed here",
				     off ? "; " : "", inc ? "" : "^", item);
		if (w < 0)
			break;
		off += (size_t)w;
	}
}

static bool is_loopback(const struct fi_info *info)
{
	if (info->domain_attr && info->domain_attr->name && !strcmp(info->domain_attr->name, "lo"))
		return true;
	if (!info->src_addr)
		return false;
	if (info->addr_format == FI_SOCKADDR_IN && info->src_addrlen >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *sin = info->src_addr;
		return (ntohl(sin->sin_addr.s_addr) >> 24) == 127;
	}
	if (info->addr_format == FI_SOCKADDR_IN6 && info->src_addrlen >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *sin6 = info->src_addr;
		return IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr);
	}
	return false;
}

/* libfabric 2.x answers FI_REMOTE_COMM on a host whose only usable interface
 * is loopback with a bare entry for an IP provider: no address, the generic
 * address format, the provider's own name as domain. fi_enable fails on it
 * (policy_traits.c, "template entry"). */
static bool is_template(const struct fi_info *info, const char *prov)
{
	if (info->src_addr || info->addr_format != FI_SOCKADDR || !info->domain_attr ||
	    !info->domain_attr->name)
		return false;
	size_t n = strcspn(prov, ";");
	return strlen(info->domain_attr->name) == n && !strncasecmp(info->domain_attr->name, prov, n);
}

static void fill_cand(struct policy_cand *c, const struct fi_info *info, int attempt,
		      const struct policy_attempt_plan *plan)
{
	memset(c, 0, sizeof(*c));
	c->info = info;
	c->attempt = attempt;
	util_strlcpy(c->prov, info->fabric_attr && info->fabric_attr->prov_name ?
			     info->fabric_attr->prov_name : "?", sizeof(c->prov));
	util_strlcpy(c->fabric, info->fabric_attr && info->fabric_attr->name ?
			       info->fabric_attr->name : "?", sizeof(c->fabric));
	util_strlcpy(c->domain, info->domain_attr && info->domain_attr->name ?
			       info->domain_attr->name : "?", sizeof(c->domain));
	c->hmem = plan->hmem && (info->caps & FI_HMEM);
	c->remote = plan->remote || (info->caps & FI_REMOTE_COMM);
	c->rma = plan->rma && (info->caps & FI_RMA) && (info->caps & FI_READ);
	c->loopback = is_loopback(info);
	c->template_entry = is_template(info, c->prov);
	c->api_version = plan->api_version;
	c->tag_bits = policy_tag_bits(info->ep_attr ? info->ep_attr->mem_tag_format : 0);
}

static size_t cq_data_of(const struct fi_info *info)
{
	return info->domain_attr ? info->domain_attr->cq_data_size : 0;
}

bool policy_writes_fit(const struct fi_info *info)
{
	uint64_t wcaps = FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
	return (info->caps & wcaps) == wcaps && cq_data_of(info) >= 4 &&
	       !(info->mode & FI_RX_CQ_DATA);
}

/* libfabric lists the same entry several times (one per layering path): an
 * identical entry from the same attempt, or from the same attempt asked again
 * at API 1.17, is counted on the first, not listed. */
static struct policy_cand *find_twin(struct policy_selection *sel, const struct policy_cand *c,
				  const struct policy_attempt_result *attempts)
{
	const struct policy_attempt_plan *cp = &attempts[c->attempt].plan;
	for (int k = 0; k < sel->ncands; k++) {
		struct policy_cand *o = &sel->cands[k];
		const struct policy_attempt_plan *op = &attempts[o->attempt].plan;
		/* the no-tag asks find tagged providers again: counted on the
		 * entry that has the tags */
		if (cp->notag && !op->notag && (o->info->caps & FI_TAGGED) && !strcmp(o->prov, c->prov) &&
		    !strcmp(o->domain, c->domain) && !strcmp(o->fabric, c->fabric) &&
		    o->hmem == c->hmem)
			return o;
		bool same_ask = o->attempt == c->attempt ||
				(op->hmem == cp->hmem && op->remote == cp->remote && op->rma == cp->rma);
		if (same_ask && !strcmp(o->prov, c->prov) &&
		    !strcmp(o->domain, c->domain) && !strcmp(o->fabric, c->fabric) &&
		    o->info->caps == c->info->caps && cq_data_of(o->info) == cq_data_of(c->info) &&
		    o->tag_bits == c->tag_bits)
			return o;
	}
	return NULL;
}

/* Applies the per-entry rules; returns true when the entry is usable. */
static bool judge_cand(struct policy_selection *sel, struct policy_cand *c, const struct name_list *names)
{
	const struct fi_info *info = c->info;
	if (excluded(names, c->prov)) {
		snprintf(c->reason, sizeof(c->reason), "excluded by NCCL_FABRIC_PROVIDER");
		return false;
	}
	if (names->ninc && include_rank(names, c->prov) < 0) {
		snprintf(c->reason, sizeof(c->reason), "not named in NCCL_FABRIC_PROVIDER");
		return false;
	}
	if (c->template_entry) {
		snprintf(c->reason, sizeof(c->reason),
			 "template entry without an interface (libfabric lists %s bare when no "
			 "interface it may use for FI_REMOTE_COMM is up; it drops loopback): name it in "
			 "NCCL_FABRIC_PROVIDER to use it on loopback, or point FI_TCP_IFACE at a real "
			 "interface",
			 c->prov);
		return false;
	}
	if (!c->remote && !names->ninc) {
		snprintf(c->reason, sizeof(c->reason),
			 "single-host provider: used only when named in NCCL_FABRIC_PROVIDER");
		return false;
	}
	if (!info->ep_attr || info->ep_attr->type != FI_EP_RDM) {
		snprintf(c->reason, sizeof(c->reason), "not a reliable-datagram (FI_EP_RDM) endpoint");
		return false;
	}
	if (!(info->caps & FI_MSG)) {
		snprintf(c->reason, sizeof(c->reason), "lacks FI_MSG");
		return false;
	}
	if (!(info->caps & FI_TAGGED) && !policy_writes_fit(info)) {
		snprintf(c->reason, sizeof(c->reason),
			 "lacks FI_TAGGED, and RMA writes with 4 bytes of remote CQ data (that consume "
			 "no receive) to carry every message instead");
		return false;
	}
	if (info->mode & ~(uint64_t)POLICY_SUPPORTED_MODE) {
		snprintf(c->reason, sizeof(c->reason),
			 "requires mode bits 0x%llx the plugin does not implement",
			 (unsigned long long)(info->mode & ~(uint64_t)POLICY_SUPPORTED_MODE));
		return false;
	}
	int mr_mode = info->domain_attr ? info->domain_attr->mr_mode : 0;
	if (mr_mode & ~POLICY_SUPPORTED_MR_MODE) {
		snprintf(c->reason, sizeof(c->reason),
			 "requires mr_mode bits 0x%x the plugin does not implement",
			 mr_mode & ~POLICY_SUPPORTED_MR_MODE);
		return false;
	}
	if ((info->caps & FI_TAGGED) && c->tag_bits < POLICY_MIN_TAG_BITS) {
		snprintf(c->reason, sizeof(c->reason),
			 "offers %u tag bits; the plugin needs %u", c->tag_bits, POLICY_MIN_TAG_BITS);
		return false;
	}
	for (int k = 0; k < sel->ncands; k++) {
		struct policy_cand *o = &sel->cands[k];
		if (o == c || !o->kept || o->hmem != c->hmem)
			continue;
		if (!strcmp(o->prov, c->prov) && !strcmp(o->domain, c->domain)) {
			/* a provider may offer the same domain as several instances
			 * (psm3: one with a 64-bit tag and no CQ data, one with a
			 * 60-bit tag and 4 bytes of it): the one that carries RMA
			 * writes wins */
			if (!policy_writes_fit(o->info) && policy_writes_fit(info)) {
				o->kept = false;
				snprintf(o->reason, sizeof(o->reason),
					 "same provider and domain as candidate %d, which is used: "
					 "its %zu bytes of remote CQ data carry RMA writes",
					 (int)(c - sel->cands), cq_data_of(info));
				continue;
			}
			snprintf(c->reason, sizeof(c->reason),
				 "same provider and domain as candidate %d, which is used", k);
			return false;
		}
	}
	snprintf(c->reason, sizeof(c->reason), "usable");
	return true;
}

/* The traits of a candidate's provider (policy_traits.c). */
static struct policy_traits cand_traits(const struct policy_cand *c, uint32_t fi_version)
{
	struct policy_traits t;
	policy_traits_for(c->info, fi_version, &t);
	return t;
}

/* Without NCCL_FABRIC_PROVIDER: discovery order, except where one provider is
 * known to be slower than another over the same wire: where a preferred
 * provider is usable, one that yields to it comes after every other
 * (policy_traits.c, "ranking"). NCCL_FABRIC_PROVIDER names either. */
static int default_rank(const struct policy_traits *t, bool have_preferred)
{
	return have_preferred && t->yields ? 1 : 0;
}

int policy_select(const struct policy_attempt_result *attempts, int nattempts,
		      const struct cfg_values *cfg, uint32_t fi_version,
		      struct policy_selection *sel)
{
	struct name_list names;
	memset(sel, 0, sizeof(*sel));
	parse_names(cfg->v[CFG_PROVIDER].s, &names);

	int truncated = 0;
	for (int a = 0; a < nattempts; a++) {
		for (const struct fi_info *info = attempts[a].rc ? NULL : attempts[a].infos; info;
		     info = info->next) {
			if (sel->ncands == POLICY_MAX_CANDS) {
				truncated++;
				continue;
			}
			struct policy_cand *c = &sel->cands[sel->ncands];
			fill_cand(c, info, a, &attempts[a].plan);
			struct policy_cand *twin = find_twin(sel, c, attempts);
			if (twin) {
				twin->twins++;
				continue;
			}
			sel->ncands++;
		}
	}
	/* Names are resolved against everything listed, then entries judged in order. */
	resolve_names(&names, sel);
	describe_names(&names, sel, sel->names, sizeof(sel->names));
	for (int k = 0; k < sel->ncands; k++)
		sel->cands[k].kept = judge_cand(sel, &sel->cands[k], &names);

	/* The provider: the first named one that has a usable entry, else the first
	 * usable entry in discovery order (FI_HMEM attempts come first). */
	const struct policy_cand *first = NULL;
	int best_rank = 1 << 30;
	bool have_preferred = false;
	for (int k = 0; k < sel->ncands; k++)
		have_preferred |= sel->cands[k].kept && cand_traits(&sel->cands[k], fi_version).preferred;
	for (int k = 0; k < sel->ncands; k++) {
		const struct policy_cand *c = &sel->cands[k];
		if (!c->kept)
			continue;
		struct policy_traits t = cand_traits(c, fi_version);
		int rank = names.ninc ? include_rank(&names, c->prov) : default_rank(&t, have_preferred);
		if (rank < best_rank) {
			best_rank = rank;
			first = c;
		}
	}
	if (!first) {
		sel->ok = false;
		if (names.ninc)
			snprintf(sel->reason, sizeof(sel->reason),
				 "NCCL_FABRIC_PROVIDER=%s matched no usable provider (see the candidates)",
				 cfg->v[CFG_PROVIDER].s);
		else
			snprintf(sel->reason, sizeof(sel->reason),
				 "no libfabric provider offers RDM endpoints with FI_MSG and FI_TAGGED (or RMA writes) that "
				 "reach other hosts (single-host providers such as shm must be named in "
				 "NCCL_FABRIC_PROVIDER)");
		return -1;
	}
	util_strlcpy(sel->provider, first->prov, sizeof(sel->provider));
	struct policy_traits first_traits = cand_traits(first, fi_version);
	bool reordered = !names.ninc && have_preferred && first_traits.preferred;

	bool any_real = false;
	for (int k = 0; k < sel->ncands; k++) {
		const struct policy_cand *c = &sel->cands[k];
		if (c->kept && !strcmp(c->prov, sel->provider) && !c->loopback)
			any_real = true;
	}
	bool any_remote = false;
	for (int k = 0; k < sel->ncands; k++) {
		struct policy_cand *c = &sel->cands[k];
		if (!c->kept)
			continue;
		if (strcmp(c->prov, sel->provider)) {
			c->kept = false;
			char prov[POLICY_NAME_LEN]; /* a copy: source and target in one struct */
			util_strlcpy(prov, c->prov, sizeof(prov));
			struct policy_traits t = cand_traits(c, fi_version);
			if (!names.ninc && default_rank(&t, have_preferred))
				snprintf(c->reason, sizeof(c->reason),
					 "usable, but %s is preferred by default (measured faster); "
					 "NCCL_FABRIC_PROVIDER=\"%s\" selects it", sel->provider, prov);
			else
				snprintf(c->reason, sizeof(c->reason), "usable, but provider %s comes first",
					 sel->provider);
			continue;
		}
		if (any_real && c->loopback) {
			c->kept = false;
			snprintf(c->reason, sizeof(c->reason),
				 "loopback interface; a real interface of the same provider is used");
			continue;
		}
		any_remote |= c->remote;
		int d;
		for (d = 0; d < sel->ndevs; d++)
			if (!strcmp(sel->devs[d].domain, c->domain))
				break;
		if (d == sel->ndevs) {
			if (sel->ndevs == POLICY_MAX_DEVS) {
				c->kept = false;
				snprintf(c->reason, sizeof(c->reason), "more than %d devices",
					 POLICY_MAX_DEVS);
				continue;
			}
			struct policy_dev_choice *nd = &sel->devs[sel->ndevs++];
			util_strlcpy(nd->domain, c->domain, sizeof(nd->domain));
			util_strlcpy(nd->name, c->domain, sizeof(nd->name));
			nd->loopback = c->loopback;
		}
		struct policy_dev_choice *dev = &sel->devs[d];
		if (c->hmem && !dev->hmem_info) {
			dev->hmem_info = c->info;
			sel->has_hmem = true;
		} else if (!c->hmem && !dev->host_info) {
			dev->host_info = c->info;
		}
	}
	sel->local_only = !any_remote;
	sel->ok = true;
	char why[POLICY_REASON_LEN / 2];
	if (names.ninc)
		snprintf(why, sizeof(why), " (named in NCCL_FABRIC_PROVIDER)");
	else if (reordered)
		snprintf(why, sizeof(why), " (%s)", first_traits.preferred_why);
	else
		snprintf(why, sizeof(why), " (first provider libfabric offers that reaches other hosts)");
	snprintf(sel->reason, sizeof(sel->reason), "%s%s; %d device%s%s%s", sel->provider, why,
		 sel->ndevs, sel->ndevs == 1 ? "" : "s",
		 sel->local_only ? "; single-host provider: ranks must share a host" : "",
		 truncated ? "; candidate list truncated" : "");
	return 0;
}

/* ---------------- GPU-memory decision ---------------- */

/* From 1.18 on, libfabric's core implements the option for its providers and
 * answers -FI_EINVAL itself when its own CUDA support is not running. */
static bool core_knows_option(uint32_t fi_version)
{
	return fi_version >= FI_VERSION(1, 18);
}

const char *policy_cuda_answer(int rc, uint32_t fi_version)
{
	switch (rc) {
	case 0: return "0: promises to make no CUDA API calls";
	case -FI_EOPNOTSUPP: return "-FI_EOPNOTSUPP: its FI_HMEM support needs the CUDA API";
	case -FI_EINVAL:
		return core_knows_option(fi_version) ?
			       "-FI_EINVAL: libfabric's CUDA support is not active (built without "
			       "CUDA, libcudart.so or libcuda.so.1 not found, or no GPU)" :
			       "-FI_EINVAL: no CUDA library or device is available to it";
	case -FI_ENOPROTOOPT:
		return core_knows_option(fi_version) ?
			       "-FI_ENOPROTOOPT: the provider does not know the option (it predates "
			       "it or handles GPU memory on its own), so it cannot promise" :
			       "-FI_ENOPROTOOPT: does not know the option (libfabric < 1.18 has no "
			       "FI_OPT_CUDA_API_PERMITTED), so it cannot promise";
	default: return "an unexpected error: it cannot promise";
	}
}

/* What the user can do about an answer, on this libfabric (never 0: that
 * answer is a promise, and the decision needs no remedy). */
static void cuda_remedy(int rc, uint32_t fi_version, const char *prov, char *buf, size_t len)
{
	switch (rc) {
	case -FI_EOPNOTSUPP:
		snprintf(buf, len,
			 "%s copies GPU memory with the CUDA API, which NCCL forbids under it: "
			 "NCCL stages through host memory, which is safe. NCCL_FABRIC_HMEM=force hands "
			 "it GPU buffers anyway (works, at the risk of deadlocks with NCCL's streams "
			 "and broken CUDA graph capture)",
			 prov);
		break;
	case -FI_EINVAL:
		if (core_knows_option(fi_version))
			snprintf(buf, len,
				 "libfabric's CUDA support is not running, so %s cannot register GPU "
				 "memory at all (NCCL_FABRIC_HMEM=force cannot help). To tell why: "
				 "FI_LOG_LEVEL=info FI_LOG_SUBSYS=core fi_info -p %s 2>&1 | grep -i "
				 "cuda. Use a libfabric built --with-cuda (a vendor's or your own build), "
				 "make libcudart.so (the CUDA runtime) and libcuda.so.1 (the driver) "
				 "findable on LD_LIBRARY_PATH, and check that a GPU is visible",
				 prov, prov);
		else
			snprintf(buf, len,
				 "%s found no CUDA library or device: make libcuda.so.1 findable and "
				 "a GPU visible; if it implements FI_HMEM without CUDA calls, "
				 "NCCL_FABRIC_HMEM=force uses it anyway",
				 prov);
		break;
	case -FI_ENOPROTOOPT:
		if (core_knows_option(fi_version))
			snprintf(buf, len,
				 "ask %s's developers to implement FI_OPT_CUDA_API_PERMITTED; if it "
				 "moves GPU memory without CUDA calls, NCCL_FABRIC_HMEM=force uses it "
				 "(with a WARN)",
				 prov);
		else
			snprintf(buf, len,
				 "libfabric %u.%u predates FI_OPT_CUDA_API_PERMITTED (1.18): use "
				 "libfabric >= 1.18 so the provider can promise; if you know it moves "
				 "GPU memory without CUDA calls, NCCL_FABRIC_HMEM=force uses it (with a "
				 "WARN)",
				 FI_MAJOR(fi_version), FI_MINOR(fi_version));
		break;
	default:
		snprintf(buf, len, "report the answer to %s's developers; NCCL_FABRIC_HMEM=force "
			 "uses GPU memory anyway (with a WARN)", prov);
	}
}

const char *policy_flush_name(enum policy_flush_method m)
{
	switch (m) {
	case POLICY_FLUSH_NONE: return "none";
	case POLICY_FLUSH_RMA_READ: return "rma-read";
	case POLICY_FLUSH_CUDA: return "cuda";
	}
	return "?";
}

const char *policy_verdict_name(enum policy_hmem_verdict v)
{
	switch (v) {
	case POLICY_HMEM_NO_SETTING: return "off (setting)";
	case POLICY_HMEM_NO_PROVIDER: return "host only (provider has no FI_HMEM)";
	case POLICY_HMEM_NO_GPU: return "host only (no GPU)";
	case POLICY_HMEM_PROBE_FAILED: return "host only (probe endpoint failed)";
	case POLICY_HMEM_REFUSED: return "host only (provider did not promise)";
	case POLICY_HMEM_NO_FLUSH: return "host only (no way to flush GPU receives)";
	case POLICY_HMEM_PROMISED: return "GPU memory (provider promised)";
	case POLICY_HMEM_FORCED: return "GPU memory (forced)";
	case POLICY_HMEM_FORCE_REFUSED: return "host only (force refused: libfabric CUDA support inactive)";
	}
	return "?";
}

static void p2p_words(const struct policy_probe *probe, char *buf, size_t len)
{
	if (!probe->attempted || !probe->opened) {
		snprintf(buf, len, "not asked (no probe endpoint)");
		return;
	}
	if (probe->p2p_rc) {
		snprintf(buf, len, "not reported (FI_OPT_FI_HMEM_P2P answered %d)", probe->p2p_rc);
		return;
	}
	switch (probe->p2p) {
	case FI_HMEM_P2P_ENABLED:
		snprintf(buf, len, "GPUDirect enabled: peer-to-peer DMA where possible, else copies");
		break;
	case FI_HMEM_P2P_REQUIRED:
		snprintf(buf, len, "GPUDirect required: GPU memory moves only by peer-to-peer DMA");
		break;
	case FI_HMEM_P2P_PREFERRED:
		snprintf(buf, len, "GPUDirect preferred: peer-to-peer DMA, copies as a fallback");
		break;
	case FI_HMEM_P2P_DISABLED:
		snprintf(buf, len, "no GPUDirect: GPU memory moves by copies");
		break;
	default:
		snprintf(buf, len, "unknown stance %d", probe->p2p);
	}
}

void policy_hmem(const struct policy_selection *sel, const struct policy_probe *probe,
		     const struct policy_cuda_info *cuda, const struct cfg_values *cfg,
		     uint32_t fi_version, struct policy_hmem_decision *out)
{
	memset(out, 0, sizeof(*out));
	int mode = (int)cfg->v[CFG_HMEM].i;
	const char *prov = sel->ok ? sel->provider : "(none)";
	bool gpu = cuda->driver && cuda->ngpus > 0;

	out->expected_cuda_rc = probe->cuda_api_permitted_rc;
	int rc = probe->cuda_api_permitted_rc;
	/* force cannot work where libfabric's own CUDA support answered that it is
	 * not running: every GPU registration would fail */
	bool force_futile = rc == -FI_EINVAL && core_knows_option(fi_version);
	if (probe->attempted && probe->opened)
		snprintf(out->answer, sizeof(out->answer), "%s", policy_cuda_answer(rc, fi_version));
	else if (probe->attempted)
		snprintf(out->answer, sizeof(out->answer), "not asked: probe endpoint failed");
	else
		snprintf(out->answer, sizeof(out->answer), "not asked: provider has no FI_HMEM");
	p2p_words(probe, out->p2p, sizeof(out->p2p));

	if (mode == CFG_HMEM_OFF) {
		out->verdict = POLICY_HMEM_NO_SETTING;
		snprintf(out->reason, sizeof(out->reason),
			 "host memory only: NCCL_FABRIC_HMEM=off");
	} else if (!sel->ok || !sel->has_hmem) {
		out->verdict = POLICY_HMEM_NO_PROVIDER;
		snprintf(out->reason, sizeof(out->reason),
			 "host memory only: provider %s does not advertise FI_HMEM", prov);
	} else if (!gpu) {
		out->verdict = POLICY_HMEM_NO_GPU;
		snprintf(out->reason, sizeof(out->reason),
			 "host memory only: %s advertises FI_HMEM but no GPU is usable here (%s)", prov,
			 cuda->driver ? "the CUDA driver reports 0 GPUs" :
					(cuda->error[0] ? cuda->error : "no CUDA driver"));
	} else if (!probe->opened) {
		out->verdict = POLICY_HMEM_PROBE_FAILED;
		snprintf(out->reason, sizeof(out->reason),
			 "host memory only: the probe endpoint of %s did not open (%s)", prov,
			 probe->error[0] ? probe->error : "unknown error");
	} else if (rc == 0) {
		out->verdict = POLICY_HMEM_PROMISED;
		snprintf(out->reason, sizeof(out->reason),
			 "GPU memory goes to %s: it advertises FI_HMEM and answered "
			 "FI_OPT_CUDA_API_PERMITTED=false with 0 (no CUDA API calls); %s",
			 prov, out->p2p);
	} else if (mode == CFG_HMEM_FORCE && force_futile) {
		out->verdict = POLICY_HMEM_FORCE_REFUSED;
		snprintf(out->reason, sizeof(out->reason),
			 "host memory only: NCCL_FABRIC_HMEM=force is refused because %s answered "
			 "FI_OPT_CUDA_API_PERMITTED with %s: it could not register GPU memory",
			 prov, policy_cuda_answer(rc, fi_version));
		snprintf(out->warning, sizeof(out->warning),
			 "NCCL_FABRIC_HMEM=force ignored: %s answered FI_OPT_CUDA_API_PERMITTED with "
			 "%s, so every GPU registration would fail; NCCL stages through host memory "
			 "instead. Run nccl-fabric-info for the remedy",
			 prov, policy_cuda_answer(rc, fi_version));
	} else if (mode == CFG_HMEM_FORCE) {
		out->verdict = POLICY_HMEM_FORCED;
		snprintf(out->reason, sizeof(out->reason),
			 "GPU memory goes to %s because NCCL_FABRIC_HMEM=force, although it answered "
			 "FI_OPT_CUDA_API_PERMITTED with %s; %s",
			 prov, policy_cuda_answer(rc, fi_version), out->p2p);
		snprintf(out->warning, sizeof(out->warning),
			 "NCCL_FABRIC_HMEM=force: GPU buffers go to %s although it answered "
			 "FI_OPT_CUDA_API_PERMITTED with %s. If the provider calls the CUDA API under "
			 "NCCL it can deadlock or break CUDA graph capture; unset NCCL_FABRIC_HMEM if "
			 "collectives hang",
			 prov, policy_cuda_answer(rc, fi_version));
	} else {
		out->verdict = POLICY_HMEM_REFUSED;
		snprintf(out->reason, sizeof(out->reason),
			 "host memory only: %s advertises FI_HMEM but answered "
			 "FI_OPT_CUDA_API_PERMITTED=false with %s; NCCL forbids CUDA calls under it%s",
			 prov, policy_cuda_answer(rc, fi_version),
			 rc == -FI_EOPNOTSUPP || force_futile ?
				 "" :
				 ". If it implements FI_HMEM without CUDA calls, NCCL_FABRIC_HMEM=force "
				 "uses it anyway");
	}
	/* The remedy for the answer, where the answer decided. */
	if (out->verdict == POLICY_HMEM_REFUSED || out->verdict == POLICY_HMEM_FORCED ||
	    out->verdict == POLICY_HMEM_FORCE_REFUSED)
		cuda_remedy(rc, fi_version, prov, out->remedy, sizeof(out->remedy));
	else if (out->verdict == POLICY_HMEM_PROMISED)
		snprintf(out->remedy, sizeof(out->remedy), "nothing to do");
	else if (out->verdict == POLICY_HMEM_NO_SETTING)
		snprintf(out->remedy, sizeof(out->remedy),
			 "unset NCCL_FABRIC_HMEM to let the plugin decide");
	else if (out->verdict == POLICY_HMEM_NO_PROVIDER)
		snprintf(out->remedy, sizeof(out->remedy),
			 "none needed for correctness: NCCL stages through host memory. For GPUDirect, "
			 "use a provider that advertises FI_HMEM (nccl-fabric-info --candidates lists "
			 "what libfabric offers)");
	else if (out->verdict == POLICY_HMEM_NO_GPU)
		snprintf(out->remedy, sizeof(out->remedy),
			 "make the CUDA driver (libcuda.so.1) findable and a GPU visible to this "
			 "process (CUDA_VISIBLE_DEVICES)");
	else
		snprintf(out->remedy, sizeof(out->remedy),
			 "see the probe error above; FI_LOG_LEVEL=warn shows libfabric's side");
	out->use_hmem = out->verdict == POLICY_HMEM_PROMISED || out->verdict == POLICY_HMEM_FORCED;

	/* GPU buffers must be flushable, or NCCL could read a receive before the
	 * NIC's writes landed: RDMA read where the FI_HMEM entry has FI_RMA|FI_READ,
	 * else the CUDA driver's flush. */
	if (out->use_hmem) {
		const struct fi_info *hi = NULL;
		for (int i = 0; i < sel->ndevs && !hi; i++)
			hi = sel->devs[i].hmem_info;
		bool rma = hi && (hi->caps & (FI_RMA | FI_READ)) == (FI_RMA | FI_READ);
		int fm = (int)cfg->v[CFG_FLUSH].i;
		if (rma && fm != CFG_FLUSH_MODE_CUDA) {
			out->flush = POLICY_FLUSH_RMA_READ;
			snprintf(out->flush_reason, sizeof(out->flush_reason),
				 "RDMA read of the received buffer (the provider has FI_RMA|FI_READ)");
		} else if (cuda->flush && fm != CFG_FLUSH_MODE_RMA) {
			out->flush = POLICY_FLUSH_CUDA;
			snprintf(out->flush_reason, sizeof(out->flush_reason),
				 "cuFlushGPUDirectRDMAWrites%s",
				 rma ? " (NCCL_FABRIC_FLUSH=cuda)" : " (the provider has no FI_RMA|FI_READ)");
		} else {
			char why[POLICY_REASON_LEN];
			snprintf(why, sizeof(why),
				 "GPU receives must be flushed before NCCL reads them, and %s",
				 fm == CFG_FLUSH_MODE_RMA ? "NCCL_FABRIC_FLUSH=rma but the provider has no FI_RMA|FI_READ" :
				 fm == CFG_FLUSH_MODE_CUDA ? "NCCL_FABRIC_FLUSH=cuda but the CUDA driver has no cuFlushGPUDirectRDMAWrites" :
				 "the provider has no FI_RMA|FI_READ and the CUDA driver no cuFlushGPUDirectRDMAWrites");
			out->verdict = POLICY_HMEM_NO_FLUSH;
			out->use_hmem = false;
			snprintf(out->reason, sizeof(out->reason), "host memory only: %s", why);
			snprintf(out->warning, sizeof(out->warning),
				 "%s advertises usable FI_HMEM, but %s: GPU memory is not offered to NCCL",
				 prov, why);
		}
	}
	if (!out->use_hmem) {
		out->flush = POLICY_FLUSH_NONE;
		if (!out->flush_reason[0])
			snprintf(out->flush_reason, sizeof(out->flush_reason),
				 "none needed: host memory only");
	}
	/* Hopper and later order GPUDirect writes for the GPU's own reads; NCCL
	 * then skips iflush unless the plugin asks for it. */
	out->force_flush = out->use_hmem && !cuda->writes_ordered;

	uint32_t hmem_api = 0;
	for (int i = 0; i < sel->ndevs && !hmem_api; i++)
		if (sel->devs[i].hmem_info && sel->devs[i].hmem_info->fabric_attr)
			hmem_api = sel->devs[i].hmem_info->fabric_attr->api_version;
	if (!out->use_hmem)
		snprintf(out->dmabuf_reason, sizeof(out->dmabuf_reason), "no: GPU memory is not used");
	else if (!cfg->v[CFG_DMABUF].i)
		snprintf(out->dmabuf_reason, sizeof(out->dmabuf_reason), "no: NCCL_FABRIC_DMABUF=0");
	else if (fi_version < FI_VERSION(1, 20))
		snprintf(out->dmabuf_reason, sizeof(out->dmabuf_reason),
			 "no: libfabric %u.%u has no FI_MR_DMABUF (needs 1.20)",
			 FI_MAJOR(fi_version), FI_MINOR(fi_version));
	else if (hmem_api && hmem_api < FI_VERSION(1, 20))
		snprintf(out->dmabuf_reason, sizeof(out->dmabuf_reason),
			 "no: %s was found at API %u.%u (built against older headers), which has "
			 "no FI_MR_DMABUF", prov, FI_MAJOR(hmem_api), FI_MINOR(hmem_api));
	else if (!cuda->dmabuf)
		snprintf(out->dmabuf_reason, sizeof(out->dmabuf_reason),
			 "no: the GPU does not report DMA-BUF support");
	else {
		out->dmabuf = true;
		snprintf(out->dmabuf_reason, sizeof(out->dmabuf_reason),
			 "yes: libfabric >= 1.20 and the GPU supports DMA-BUF");
	}

	out->ptr_support = NCCL_PTR_HOST | (out->use_hmem ? NCCL_PTR_CUDA : 0) |
			   (out->dmabuf ? NCCL_PTR_DMABUF : 0);

	if (out->use_hmem)
		snprintf(out->nccl_effect, sizeof(out->nccl_effect),
			 "NCCL may hand GPU buffers to the plugin (NCCL_PTR_CUDA), but does so only "
			 "where the GPU-NIC distance is within NCCL_NET_GDR_LEVEL (default PXB); a NIC "
			 "without a PCI path, such as loopback, counts as far away "
			 "(NCCL_NET_GDR_LEVEL=SYS allows it). Where it does, the provider's FI_HMEM "
			 "path carries NCCL's data.");
	else
		snprintf(out->nccl_effect, sizeof(out->nccl_effect),
			 "NCCL_PTR_CUDA is not advertised, so NCCL stages every transfer through "
			 "pinned host memory: NCCL never exercises the provider's FI_HMEM path, even "
			 "where a test that registers GPU memory with the provider directly does.");
}

size_t policy_eager(const struct policy_traits *traits, long cfg_eager, char *reason,
		    size_t reason_len)
{
	if (cfg_eager >= 0) {
		snprintf(reason, reason_len, "%ld bytes (NCCL_FABRIC_EAGER_MAX)", cfg_eager);
		return (size_t)cfg_eager;
	}
	/* A stream provider takes any message into its stream without the
	 * receiver: NCCL's LL messages then go at once, and their receives need
	 * no CTS (see PROTO_LAZY_CTS_NS). */
	size_t v = traits->eager_default;
	snprintf(reason, reason_len, "%zu bytes (auto: %s)", v,
		 traits->whole_max && v == traits->whole_max ?
			 "the provider's buffer; larger ones wait for the CTS" :
		 traits->stream ? "stream provider, NCCL's LL receive size" :
				  "the provider's inject size");
	return v;
}

void policy_rails(const struct policy_rails_input *in, struct policy_rails_choice *out)
{
	int ncpus = in->ncpus > 0 ? in->ncpus : 1, nprocs = in->nprocs > 0 ? in->nprocs : 1;
	if (in->cfg_rails > 0) {
		out->rails = in->cfg_rails;
		snprintf(out->reason, sizeof(out->reason), "%d (NCCL_FABRIC_RAILS)", in->cfg_rails);
	} else if (in->one_rail_why) {
		out->rails = 1;
		snprintf(out->reason, sizeof(out->reason), "1 (auto: %s)", in->one_rail_why);
	} else {
		/* Each rail's thread copies with a core of its own while a large
		 * message moves, and the rank's own threads need the rest: half the
		 * CPUs each process gets, at most POLICY_AUTO_RAILS_MAX (beyond that
		 * the streams' CPU cost grows faster than the bandwidth). */
		int per = ncpus / nprocs;
		int rails = per / 2;
		rails = rails < 1 ? 1 : rails > POLICY_AUTO_RAILS_MAX ? POLICY_AUTO_RAILS_MAX : rails;
		out->rails = rails;
		snprintf(out->reason, sizeof(out->reason),
			 "%d (auto: %d CPUs for this process, %d plugin process%s on this host: %d "
			 "each, half of them, at most %d)", rails, ncpus, nprocs, nprocs == 1 ? "" : "es",
			 per, POLICY_AUTO_RAILS_MAX);
	}
	out->threads = in->threads_mode == 1 || (in->threads_mode == 0 && out->rails > 1);
	size_t n = strlen(out->reason);
	snprintf(out->reason + n, sizeof(out->reason) - n, "; progress threads %s%s",
		 out->threads ? "on" : "off", in->threads_mode == 0 ? " (auto)" : "");
}

/* ---------------- the data path ---------------- */

/* cxi: the provider's writedata is off unless FI_CXI_ENABLE_WRITEDATA is true
 * (it then fails with -FI_ENOSYS). */
static bool cxi_writedata_off(const char *provider, const char *cxi_writedata)
{
	size_t n = provider ? strcspn(provider, ";") : 0;
	if (n != 3 || strncasecmp(provider, "cxi", 3))
		return false;
	return !cxi_writedata || !(!strcmp(cxi_writedata, "1") || !strcasecmp(cxi_writedata, "true") ||
				   !strcasecmp(cxi_writedata, "yes") || !strcasecmp(cxi_writedata, "on"));
}

void policy_data_path(bool cfg_rma, bool cfg_explicit, const char *no_write_why,
		      const char *provider, const struct fi_info *info, const char *cxi_writedata,
		      struct policy_data_path *out)
{
	const char *prov = provider && provider[0] ? provider : "(none)";
	uint64_t wcaps = FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
	uint64_t caps = info ? info->caps : 0;
	size_t cq_data = info && info->domain_attr ? info->domain_attr->cq_data_size : 0;
	const char *why = NULL;
	if (info && !(caps & FI_TAGGED)) {
		/* judge_cand kept it for its writes: they are the only way */
		out->rma = true;
		snprintf(out->reason, sizeof(out->reason),
			 "every message as an RMA write into the receiver's buffer after its "
			 "clear-to-send (%s has no FI_TAGGED; %zu bytes of remote CQ data%s)%s", prov,
			 cq_data, cq_data < 8 ? ": the receiver sums the size from the completions" : "",
			 cfg_rma ? "" : "; NCCL_FABRIC_RMA=0 cannot apply");
		return;
	}
	if (!cfg_rma)
		why = "NCCL_FABRIC_RMA=0";
	else if ((caps & wcaps) != wcaps)
		why = "the provider has no FI_RMA with remote writes";
	else if (cq_data < 4)
		why = "the provider's remote CQ data is shorter than 4 bytes";
	else if (info->mode & FI_RX_CQ_DATA)
		why = "the provider's remote CQ data consumes a receive (FI_RX_CQ_DATA)";
	else if (cxi_writedata_off(provider, cxi_writedata))
		why = "cxi sends remote CQ data with writes only when FI_CXI_ENABLE_WRITEDATA=1 is "
		      "set (libfabric's default is off, and its writedata then fails): set it for "
		      "every rank to get RMA writes";
	else if (no_write_why && !cfg_explicit)
		why = no_write_why;
	out->rma = why == NULL;
	if (out->rma && no_write_why)
		snprintf(out->reason, sizeof(out->reason),
			 "RMA writes into the receiver's buffer (NCCL_FABRIC_RMA=1, against the "
			 "default here: %s)", no_write_why);
	else if (out->rma)
		snprintf(out->reason, sizeof(out->reason),
			 "RMA writes into the receiver's buffer (%s has FI_RMA and %zu bytes of "
			 "remote CQ data%s; NCCL_FABRIC_RMA=0 sends them tagged)", prov, cq_data,
			 cq_data < 8 ? ": the receiver sums the size from the write completions" : "");
	else if (why == no_write_why)
		snprintf(out->reason, sizeof(out->reason),
			 "one tagged send after the clear-to-send (%s; NCCL_FABRIC_RMA=1 asks for "
			 "RMA writes)", why);
	else if (!cfg_rma)
		snprintf(out->reason, sizeof(out->reason),
			 "one tagged send after the clear-to-send (%s)", why);
	else
		snprintf(out->reason, sizeof(out->reason),
			 "one tagged send after the clear-to-send (%s: %s)", prov, why);
}

/* ---------------- NCCL's RMA plugin ---------------- */

const char *policy_rma_order_name(enum policy_rma_order o)
{
	switch (o) {
	case POLICY_RMA_ORDER_PROVIDER:
		return "provider order";
	case POLICY_RMA_ORDER_FENCE:
		return "fence";
	case POLICY_RMA_ORDER_CHAIN:
		return "delivery-complete chain";
	}
	return "?";
}

void policy_rma(int mode, const char *provider, const struct policy_rma_caps *caps,
		const struct policy_hmem_decision *hmem, struct policy_rma_decision *out)
{
	memset(out, 0, sizeof(*out));
	const char *prov = provider && provider[0] ? provider : "(none)";
	/* puts and gets are RMA writes and reads */
	uint64_t rw = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	uint64_t have = caps ? caps->caps : 0;
	/* signals: 64-bit atomic adds, or else messages our plugin on the
	 * target applies (which can only reach host memory) */
	bool atomics = (have & FI_ATOMIC) != 0;
	out->msg_signals = !atomics && (have & FI_MSG);
	const char *sig = atomics ? "signals are 64-bit atomic adds (FI_ATOMIC)" :
				    "signals are messages the target's plugin adds (no FI_ATOMIC: host "
				    "windows only)";

	/* A strong signal must not be seen before the put it follows.
	 * FI_ORDER_WAW orders RMA and atomic writes together (FI_ORDER_RMA_WAW and
	 * FI_ORDER_ATOMIC_WAW each order one kind only, so they do not count);
	 * FI_ORDER_SAW orders a message behind the writes before it. */
	uint64_t order_bit = atomics ? FI_ORDER_WAW : FI_ORDER_SAW;
	if (caps && (caps->msg_order & order_bit)) {
		out->order = POLICY_RMA_ORDER_PROVIDER;
		snprintf(out->order_reason, sizeof(out->order_reason),
			 "%s; the provider orders them behind writes (%s): a put and its signal "
			 "are posted back to back",
			 sig, atomics ? "FI_ORDER_WAW" : "FI_ORDER_SAW");
	} else if (have & FI_FENCE) {
		out->order = POLICY_RMA_ORDER_FENCE;
		snprintf(out->order_reason, sizeof(out->order_reason),
			 "%s; no %s, so the signal is posted with FI_FENCE after its put", sig,
			 atomics ? "FI_ORDER_WAW" : "FI_ORDER_SAW");
	} else {
		out->order = POLICY_RMA_ORDER_CHAIN;
		snprintf(out->order_reason, sizeof(out->order_reason),
			 "%s; no %s and no FI_FENCE, so the put asks for FI_DELIVERY_COMPLETE and "
			 "its strong signal is posted when it completes (one round trip more)",
			 sig, atomics ? "FI_ORDER_WAW" : "FI_ORDER_SAW");
	}

	if (mode == CFG_RMA_PLUGIN_OFF) {
		snprintf(out->reason, sizeof(out->reason),
			 "not offered: NCCL_FABRIC_RMA_PLUGIN=off");
		return;
	}
	if (!(have & FI_RMA) || (have & rw) != rw || (!atomics && !out->msg_signals)) {
		snprintf(out->reason, sizeof(out->reason),
			 "not offered: provider %s lacks %s%s%s (puts and gets are RMA writes and "
			 "reads, signals atomic adds or messages)",
			 prov, (have & FI_RMA) ? "" : "FI_RMA ",
			 (have & rw) == rw ? "" : "remote read/write access ",
			 atomics || out->msg_signals ? "" : "FI_ATOMIC and FI_MSG");
		return;
	}
	bool gpu_mem = hmem && hmem->use_hmem && caps->hmem;
	if (gpu_mem && atomics) {
		out->offered = out->gpu = true;
		snprintf(out->reason, sizeof(out->reason),
			 "offered on GPU and host memory: provider %s has FI_RMA and FI_ATOMIC, and "
			 "GPU memory goes to it (%s)",
			 prov, hmem->verdict == POLICY_HMEM_FORCED ? "NCCL_FABRIC_HMEM=force" :
								    "it promised no CUDA calls");
		return;
	}
	const char *why_host = gpu_mem ? "it has no FI_ATOMIC, and a signal into a GPU window "
					 "needs one" :
				hmem ? hmem->reason :
				       "no GPU-memory decision";
	if (mode == CFG_RMA_PLUGIN_FORCE) {
		out->offered = true;
		snprintf(out->reason, sizeof(out->reason),
			 "offered on host memory only (NCCL_FABRIC_RMA_PLUGIN=force): provider %s "
			 "has FI_RMA%s, but GPU windows are not possible (%s)",
			 prov, atomics ? " and FI_ATOMIC" : "", why_host);
		snprintf(out->warning, sizeof(out->warning),
			 "NCCL_FABRIC_RMA_PLUGIN=force: the RMA plugin is offered on host memory "
			 "only; NCCL registers GPU windows and will fail to use it on GPUs");
		return;
	}
	snprintf(out->reason, sizeof(out->reason),
		 "not offered: no GPU windows on provider %s (%s); NCCL's windows are GPU memory. "
		 "NCCL_FABRIC_RMA_PLUGIN=force offers it on host memory",
		 prov, why_host);
}
