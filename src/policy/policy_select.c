/*
 * policy_select.c - which provider, and which of its entries become devices.
 * The decision: what to ask fi_getinfo for (policy_plan), then, over what it
 * answered, which entries are usable (judge_cand), which provider is chosen
 * (NCCL_FABRIC_PROVIDER, else discovery order with the traits' ranking) and
 * which domains become NCCL's devices (policy_select). Pure: see policy.h.
 */
#include "policy/policy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <rdma/fi_endpoint.h>

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
	/* FI_RX_CQ_DATA only where writes with CQ data may follow: the mode
	 * means nothing to an entry without them */
	p->mode = POLICY_SUPPORTED_MODE & ~(rma ? 0 : (uint64_t)FI_RX_CQ_DATA);
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
bool policy_is_template(const struct fi_info *info)
{
	const char *prov = info->fabric_attr && info->fabric_attr->prov_name ?
				   info->fabric_attr->prov_name : "";
	if (info->src_addr || info->addr_format != FI_SOCKADDR || !info->domain_attr ||
	    !info->domain_attr->name)
		return false;
	size_t n = strcspn(prov, ";");
	return n > 0 && strlen(info->domain_attr->name) == n && !strncasecmp(info->domain_attr->name, prov, n);
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
	c->template_entry = policy_is_template(info);
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
	return (info->caps & wcaps) == wcaps && cq_data_of(info) >= 4;
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
			 "interface it may use for FI_REMOTE_COMM is up; it drops loopback), and asking "
			 "again at " POLICY_LOOPBACK_NODE " found nothing: point FI_TCP_IFACE at a real "
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
			 "lacks FI_TAGGED, and RMA writes with 4 bytes of remote CQ data to carry "
			 "every message instead");
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
					 "usable, but %s is preferred by default (NCCL's collectives run "
					 "faster over it); NCCL_FABRIC_PROVIDER=\"%s\" selects it",
					 sel->provider, prov);
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
