/*
 * test_policy.c - provider selection and the GPU-memory decision over
 * synthetic inputs. The fi_info lists are built by hand with fi_allocinfo (no
 * fabric is opened); the probe answers and CUDA facts are plain structs.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "nccl/nccl_net.h"
#include "cfg/cfg.h"
#include "policy/policy.h"
#include "unit.h"

/* ---- settings ---- */

struct settings {
	const char *provider, *hmem, *dmabuf;
};

static const char *settings_lookup(const char *name, void *arg)
{
	const struct settings *s = arg;
	if (!strcmp(name, "NCCL_FABRIC_PROVIDER"))
		return s->provider;
	if (!strcmp(name, "NCCL_FABRIC_HMEM"))
		return s->hmem;
	if (!strcmp(name, "NCCL_FABRIC_DMABUF"))
		return s->dmabuf;
	return NULL;
}

static void make_cfg(struct cfg_values *cfg, const char *provider, const char *hmem, const char *dmabuf)
{
	struct settings s = { provider, hmem, dmabuf };
	int invalid = cfg_load(cfg, settings_lookup, &s);
	if (invalid)
		fprintf(stderr, "  test bug: %d invalid settings\n", invalid);
}

/* ---- synthetic fi_info lists ---- */

#define CAPS_BASE (FI_TAGGED | FI_MSG)
#define TAG_FMT_64 0ULL

struct entry {
	const char *prov, *fabric, *domain;
	uint64_t extra_caps;   /* beyond what the attempt asked for */
	uint64_t drop_caps;    /* removed from what the attempt asked for */
	uint64_t mode;
	int mr_mode;           /* added to FI_MR_LOCAL|FI_MR_VIRT_ADDR|... below */
	uint64_t tag_fmt;
	int ep_type;           /* 0: FI_EP_RDM */
	const char *ipv4;      /* src_addr, when set */
	int ipv6_loopback;     /* src_addr ::1 */
	int local_only;        /* a single-host provider: no FI_REMOTE_COMM in caps */
};

struct scenario {
	int n;
	struct policy_attempt_plan plan[POLICY_MAX_ATTEMPTS];
	struct policy_attempt_result res[POLICY_MAX_ATTEMPTS];
	struct fi_info *tail[POLICY_MAX_ATTEMPTS];
	struct cfg_values cfg;
	uint32_t fi_version; /* the run-time libfabric the plan was made for */
	struct policy_selection sel;
};

enum {
	A_HMEM_RMA = 0, /* the order policy_plan produces */
	A_HMEM = 1,
	A_HOST_RMA = 2,
	A_HOST = 3,
	A_LOCAL_HMEM_RMA = 4,
	A_LOCAL_HOST_RMA = 6,
	A_LOCAL_HOST = 7,
};

static void scen_init(struct scenario *s, const char *provider)
{
	memset(s, 0, sizeof(*s));
	make_cfg(&s->cfg, provider, NULL, NULL);
	/* 1.17: one ask per kind, in the order of the A_* indices */
	s->fi_version = FI_VERSION(1, 17);
	s->n = policy_plan(&s->cfg, s->fi_version, s->plan);
	for (int a = 0; a < s->n; a++) {
		s->res[a].plan = s->plan[a];
		s->res[a].rc = -FI_ENODATA;
		s->res[a].infos = NULL;
	}
}

/* Appends an entry, shaped as a provider answers attempt a. */
static struct fi_info *scen_add(struct scenario *s, int a, const struct entry *e)
{
	struct fi_info *i = fi_allocinfo();
	if (!i)
		abort();
	const struct policy_attempt_plan *p = &s->plan[a];
	i->caps = (p->caps | e->extra_caps | FI_LOCAL_COMM | (e->local_only ? 0 : FI_REMOTE_COMM)) &
		  ~e->drop_caps;
	if (e->local_only)
		i->caps &= ~FI_REMOTE_COMM;
	i->mode = e->mode;
	i->ep_attr->type = e->ep_type ? (enum fi_ep_type)e->ep_type : FI_EP_RDM;
	i->ep_attr->mem_tag_format = e->tag_fmt;
	i->domain_attr->mr_mode = (p->mr_mode & (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY |
						 FI_MR_ALLOCATED | FI_MR_HMEM)) |
				  e->mr_mode;
	i->fabric_attr->prov_name = strdup(e->prov);
	i->fabric_attr->name = strdup(e->fabric ? e->fabric : "fab0");
	i->domain_attr->name = strdup(e->domain);
	i->addr_format = FI_SOCKADDR_IN;
	if (e->ipv4) {
		struct sockaddr_in *sin = calloc(1, sizeof(*sin));
		sin->sin_family = AF_INET;
		inet_pton(AF_INET, e->ipv4, &sin->sin_addr);
		i->src_addr = sin;
		i->src_addrlen = sizeof(*sin);
	} else if (e->ipv6_loopback) {
		struct sockaddr_in6 *sin6 = calloc(1, sizeof(*sin6));
		sin6->sin6_family = AF_INET6;
		sin6->sin6_addr = in6addr_loopback;
		i->addr_format = FI_SOCKADDR_IN6;
		i->src_addr = sin6;
		i->src_addrlen = sizeof(*sin6);
	}
	if (s->tail[a])
		s->tail[a]->next = i;
	else
		s->res[a].infos = i;
	s->tail[a] = i;
	s->res[a].rc = 0;
	return i;
}

static void scen_free(struct scenario *s)
{
	for (int a = 0; a < s->n; a++)
		if (s->res[a].infos)
			fi_freeinfo((struct fi_info *)s->res[a].infos);
}

static int scen_select(struct scenario *s)
{
	return policy_select(s->res, s->n, &s->cfg, s->fi_version, &s->sel);
}

/* The candidate that came from info. */
static const struct policy_cand *cand_of(const struct scenario *s, const struct fi_info *info)
{
	for (int k = 0; k < s->sel.ncands; k++)
		if (s->sel.cands[k].info == info)
			return &s->sel.cands[k];
	return NULL;
}

static const char *reason_of(const struct scenario *s, const struct fi_info *info)
{
	const struct policy_cand *c = cand_of(s, info);
	return c ? c->reason : "(no candidate)";
}

static int kept(const struct scenario *s, const struct fi_info *info)
{
	const struct policy_cand *c = cand_of(s, info);
	return c && c->kept;
}

static const struct entry TCP_ETH0 = { .prov = "tcp;ofi_rxm", .fabric = "192.0.2.0/24", .domain = "eth0",
				       .ipv4 = "192.0.2.2" };
static const struct entry TCP_LO = { .prov = "tcp;ofi_rxm", .fabric = "127.0.0.1/32", .domain = "lo",
				     .ipv4 = "127.0.0.1" };
static const struct entry TCP_LO6 = { .prov = "tcp;ofi_rxm", .fabric = "::1/128", .domain = "lo",
				      .ipv6_loopback = 1 };
static const struct entry VERBS = { .prov = "verbs;ofi_rxm", .fabric = "IB-0xfe80", .domain = "mlx5_0" };
static const struct entry EFA = { .prov = "efa", .fabric = "efa", .domain = "rdmap16s27-rdm" };
static const struct entry SHM = { .prov = "shm", .fabric = "shm", .domain = "shm", .local_only = 1 };

/* ---- plan ---- */

static int test_plan_unnamed(void)
{
	struct cfg_values cfg;
	struct policy_attempt_plan plan[POLICY_MAX_ATTEMPTS];
	make_cfg(&cfg, NULL, NULL, NULL);
	int n = policy_plan(&cfg, FI_VERSION(1, 20), plan);
	CHECK_EQ(n, 12); /* 8, then the asks without FI_TAGGED */
	/* each ask again at API 1.17 right after it, for providers built against
	 * older headers */
	for (int a = 0; a < n; a++) {
		CHECK_EQ(plan[a].legacy, a % 2);
		CHECK_EQ(plan[a].api_version, a % 2 ? FI_VERSION(1, 17) : FI_VERSION(1, 20));
		if (a % 2) {
			CHECK_EQ(plan[a].caps, plan[a - 1].caps);
			CHECK_EQ(plan[a].mr_mode, plan[a - 1].mr_mode);
			CHECK_STR_CONTAINS(plan[a].label, "API 1.17");
		}
	}
	/* on 1.17 itself nothing is asked twice: the order of the asks */
	n = policy_plan(&cfg, FI_VERSION(1, 17), plan);
	CHECK_EQ(n, 6);
	/* last, providers without tags, which need RMA writes: FI_HMEM first */
	for (int a = 4; a < n; a++) {
		CHECK(plan[a].notag && plan[a].rma && !(plan[a].caps & FI_TAGGED));
		CHECK((plan[a].caps & (FI_MSG | FI_RMA | FI_WRITE | FI_REMOTE_WRITE)) ==
		      (FI_MSG | FI_RMA | FI_WRITE | FI_REMOTE_WRITE));
		CHECK_EQ(plan[a].hmem, a == 4);
		CHECK_STR_CONTAINS(plan[a].label, "no FI_TAGGED");
	}
	/* FI_HMEM first, each with and then without RMA */
	static const struct { int hmem, rma; } want[4] = { { 1, 1 }, { 1, 0 }, { 0, 1 }, { 0, 0 } };
	for (int a = 0; a < n && a < 4; a++) {
		const struct policy_attempt_plan *p = &plan[a];
		CHECK_EQ(p->hmem, want[a].hmem);
		CHECK_EQ(p->rma, want[a].rma);
		CHECK(!p->legacy && !p->notag);
		CHECK_EQ(p->remote, 1);
		CHECK((p->caps & (FI_TAGGED | FI_MSG | FI_REMOTE_COMM)) ==
		      (FI_TAGGED | FI_MSG | FI_REMOTE_COMM));
		CHECK_EQ(!!(p->caps & FI_HMEM), want[a].hmem);
		CHECK_EQ(!!(p->mr_mode & FI_MR_HMEM), want[a].hmem);
		CHECK_EQ((p->caps & (FI_RMA | FI_READ)) == (FI_RMA | FI_READ), want[a].rma);
		CHECK_EQ(p->caps & FI_LOCAL_COMM, 0);
		/* FI_RX_CQ_DATA where writes with CQ data may follow */
		CHECK(p->mode == (FI_CONTEXT | FI_CONTEXT2 | FI_ASYNC_IOV |
				  (want[a].rma ? FI_RX_CQ_DATA : 0)));
		CHECK_EQ(p->mr_mode & ~POLICY_SUPPORTED_MR_MODE, 0);
		CHECK(p->mr_mode & FI_MR_LOCAL);
		CHECK(p->label[0] != '\0');
		CHECK_STR_CONTAINS(p->label, want[a].hmem ? "FI_HMEM" : "host memory");
		CHECK_STR_CONTAINS(p->label, "FI_REMOTE_COMM");
		for (int b = 0; b < a; b++)
			CHECK(strcmp(plan[b].label, p->label) != 0);
	}
	return 0;
}

static int test_plan_named(void)
{
	struct cfg_values cfg;
	struct policy_attempt_plan plan[POLICY_MAX_ATTEMPTS];
	make_cfg(&cfg, "shm", NULL, NULL);
	int n = policy_plan(&cfg, FI_VERSION(1, 20), plan);
	CHECK_EQ(n, 24);
	CHECK(n <= POLICY_MAX_ATTEMPTS);
	for (int a = 1; a < n; a += 2) {
		CHECK(plan[a].legacy);
		CHECK_EQ(plan[a].caps, plan[a - 1].caps);
	}
	n = policy_plan(&cfg, FI_VERSION(1, 17), plan);
	CHECK_EQ(n, 12);
	for (int a = 8; a < n; a++) /* without tags: remote, then single-host */
		CHECK(plan[a].notag && plan[a].remote == (a < 10));
	for (int a = 0; a < 8; a++) {
		CHECK_EQ(plan[a].remote, a < 4);
		CHECK_EQ(!!(plan[a].caps & FI_REMOTE_COMM), a < 4);
		/* no locality bit at all in the single-host pass */
		CHECK_EQ(plan[a].caps & FI_LOCAL_COMM, 0);
		CHECK_EQ(plan[a].hmem, (a % 4) < 2);
		CHECK_EQ(plan[a].rma, (a % 2) == 0);
		if (a >= 4)
			CHECK_STR_CONTAINS(plan[a].label, "single-host");
	}
	/* an exclude-only list names nothing: no single-host pass */
	make_cfg(&cfg, "^efa", NULL, NULL);
	CHECK_EQ(policy_plan(&cfg, FI_VERSION(1, 17), plan), 6);
	make_cfg(&cfg, "^efa,shm", NULL, NULL);
	CHECK_EQ(policy_plan(&cfg, FI_VERSION(1, 17), plan), 12);
	CHECK_EQ(policy_plan(&cfg, FI_VERSION(2, 1), plan), 24);
	return 0;
}

static int test_plan_api_version(void)
{
	static const struct { uint32_t fi, api; } cases[] = {
		{ 0, FI_VERSION(1, 17) },
		{ FI_VERSION(1, 5), FI_VERSION(1, 17) },
		{ FI_VERSION(1, 17), FI_VERSION(1, 17) },
		{ FI_VERSION(1, 18), FI_VERSION(1, 18) },
		{ FI_VERSION(1, 20), FI_VERSION(1, 20) },
		{ FI_VERSION(1, 22), FI_VERSION(1, 22) },
		{ FI_VERSION(1, 23), FI_VERSION(1, 22) },
		{ FI_VERSION(2, 0), FI_VERSION(1, 22) },
		{ FI_VERSION(2, 3), FI_VERSION(1, 22) },
	};
	struct cfg_values cfg;
	struct policy_attempt_plan plan[POLICY_MAX_ATTEMPTS];
	make_cfg(&cfg, "tcp", NULL, NULL);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int n = policy_plan(&cfg, cases[i].fi, plan);
		for (int a = 0; a < n; a++) {
			if (plan[a].legacy) {
				CHECK_EQ(plan[a].api_version, FI_VERSION(1, 17));
				CHECK(cases[i].api > FI_VERSION(1, 17));
				continue;
			}
			if (plan[a].api_version != cases[i].api)
				fprintf(stderr, "  fi_version 0x%x: api 0x%x, expected 0x%x\n", cases[i].fi,
					plan[a].api_version, cases[i].api);
			CHECK_EQ(plan[a].api_version, cases[i].api);
		}
	}
	return 0;
}

/* ---- small pure helpers ---- */

static int test_tag_bits(void)
{
	CHECK_EQ(policy_tag_bits(0), 64);
	CHECK_EQ(policy_tag_bits(0xaaaaaaaaaaaaaaaaULL), 64); /* FI_TAG_GENERIC */
	CHECK_EQ(policy_tag_bits(0x5555555555555555ULL), 64);
	CHECK_EQ(policy_tag_bits(0xffffffffffffffffULL), 64);
	CHECK_EQ(policy_tag_bits(0x8000000000000000ULL), 64);
	CHECK_EQ(policy_tag_bits(0x7fffffffffffffffULL), 63);
	CHECK_EQ(policy_tag_bits(0x0000ffffffffffffULL), 48);
	CHECK_EQ(policy_tag_bits(0x00007fffffffffffULL), 47);
	CHECK_EQ(policy_tag_bits(0x00000000ffffffffULL), 32);
	CHECK_EQ(policy_tag_bits(1), 1);
	return 0;
}

static int test_name_matches(void)
{
	CHECK(policy_name_matches("tcp;ofi_rxm", "tcp;ofi_rxm"));
	CHECK(!policy_name_matches("tcp", "tcp;ofi_rxm"));      /* full names only */
	CHECK(policy_name_matches_core("tcp", "tcp;ofi_rxm"));  /* the core-name rule */
	CHECK(policy_name_matches_core("TCP", "tcp;ofi_rxm"));  /* any case */
	CHECK(!policy_name_matches_core("tcp", "tcp"));         /* not layered: no */
	CHECK(!policy_name_matches_core("tc", "tcp;ofi_rxm"));
	CHECK(policy_name_matches_core("ofi_rxm", "tcp;ofi_rxm")); /* the top of the list too */
	CHECK(policy_name_matches_core("testhmem", "cxi;testhmem"));
	CHECK(!policy_name_matches_core("cxi", "cxi"));
	CHECK(!policy_name_matches_core("rxm", "tcp;ofi_rxm"));
	CHECK(!policy_name_matches_core("", "tcp;ofi_rxm"));
	CHECK(policy_name_matches("Tcp;OFI_rxm", "tcp;ofi_rxm"));
	CHECK(policy_name_matches("tcp", "tcp"));
	CHECK(policy_name_matches("shm", "shm"));
	CHECK(!policy_name_matches("ofi_rxm", "tcp;ofi_rxm")); /* utility name: no */
	CHECK(!policy_name_matches("tc", "tcp;ofi_rxm"));      /* prefix: no */
	CHECK(!policy_name_matches("tcpx", "tcp;ofi_rxm"));
	CHECK(!policy_name_matches("tcp;ofi_rxm", "tcp"));
	CHECK(!policy_name_matches("tcp;ofi_rxd", "tcp;ofi_rxm"));
	CHECK(!policy_name_matches("verbs", "tcp;ofi_rxm"));
	CHECK(!policy_name_matches("", "tcp"));
	return 0;
}

/* ---- selection ---- */

/* psm3 offers one domain as two instances: a 64-bit tag without CQ data,
 * listed first to a hint of none, and a 60-bit tag with 4 bytes of it. The
 * second carries RMA writes, so it is the one used. */
static int test_select_instance_with_writes(void)
{
	static const struct entry PSM3 = { .prov = "psm3", .fabric = "psm3", .domain = "hfi1_0" };
	struct scenario s;
	scen_init(&s, NULL);
	struct fi_info *t64 = scen_add(&s, A_HOST_RMA, &PSM3);
	struct fi_info *t60 = scen_add(&s, A_HOST_RMA, &PSM3);
	t64->domain_attr->cq_data_size = 0;
	t64->ep_attr->mem_tag_format = 0xaaaaaaaaaaaaaaaaULL;
	t60->domain_attr->cq_data_size = 4;
	t60->ep_attr->mem_tag_format = (1ULL << 60) - 1;
	t64->caps |= FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
	t60->caps |= FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
	CHECK_EQ(scen_select(&s), 0);
	CHECK_EQ(s.sel.ncands, 2); /* not twins: their CQ data and tags differ */
	CHECK(!kept(&s, t64));
	CHECK(kept(&s, t60));
	CHECK(s.sel.devs[0].host_info == t60);
	CHECK_STR_CONTAINS(reason_of(&s, t64), "its 4 bytes of remote CQ data carry RMA writes");
	scen_free(&s);
	/* both without CQ data: the first stays */
	scen_init(&s, NULL);
	t64 = scen_add(&s, A_HOST_RMA, &PSM3);
	t60 = scen_add(&s, A_HOST_RMA, &PSM3);
	t60->ep_attr->mem_tag_format = (1ULL << 60) - 1;
	CHECK_EQ(scen_select(&s), 0);
	CHECK(kept(&s, t64));
	CHECK(!kept(&s, t60));
	scen_free(&s);
	return 0;
}

/* efa-direct: no FI_TAGGED, RMA writes with 4 bytes of CQ data: kept, asked
 * for last; the data path is every message as a write. A tagged provider of
 * the same domain found again by the no-tag ask is its twin. */
static int test_select_no_tags(void)
{
	static const struct entry EFAD = { .prov = "efa", .fabric = "efa-direct",
					   .domain = "rdmap0s6-rdm" };
	struct scenario s;
	scen_init(&s, NULL);
	int notag_host = -1;
	for (int a = 0; a < s.n; a++)
		if (s.plan[a].notag && !s.plan[a].hmem && s.plan[a].remote)
			notag_host = a;
	CHECK(notag_host >= 0);
	if (notag_host < 0)
		return 1;
	struct fi_info *d = scen_add(&s, notag_host, &EFAD);
	d->caps &= ~FI_TAGGED;
	d->ep_attr->mem_tag_format = 0;
	d->domain_attr->cq_data_size = 4;
	struct fi_info *t = scen_add(&s, A_HOST_RMA, &TCP_ETH0);
	struct fi_info *t2 = scen_add(&s, notag_host, &TCP_ETH0);
	t2->caps &= ~FI_TAGGED;
	CHECK_EQ(scen_select(&s), 0);
	CHECK(cand_of(&s, t2) == NULL && cand_of(&s, t) && cand_of(&s, t)->twins == 1);
	/* asked last, so a tagged provider found earlier comes first */
	CHECK(kept(&s, t) && !kept(&s, d));
	scen_free(&s);
	scen_init(&s, "efa"); /* (named: the single-host asks come in between) */
	for (int a = 0; a < s.n; a++)
		if (s.plan[a].notag && !s.plan[a].hmem && s.plan[a].remote)
			notag_host = a;
	d = scen_add(&s, notag_host, &EFAD);
	d->caps &= ~FI_TAGGED;
	d->ep_attr->mem_tag_format = 0;
	d->domain_attr->cq_data_size = 4;
	CHECK_EQ(scen_select(&s), 0);
	CHECK(kept(&s, d));
	struct policy_data_path dp;
	policy_data_path(false, true, NULL, "efa", d, NULL, &dp);
	CHECK(dp.rma);
	CHECK_STR_CONTAINS(dp.reason, "every message as an RMA write");
	CHECK_STR_CONTAINS(dp.reason, "NCCL_FABRIC_RMA=0 cannot apply");
	scen_free(&s);
	/* where each write's CQ data takes a posted receive (FI_RX_CQ_DATA,
	 * efa-direct on some devices): offered by the ask, kept, the control
	 * receives serve */
	scen_init(&s, "efa");
	CHECK(s.plan[notag_host].mode & FI_RX_CQ_DATA);
	d = scen_add(&s, notag_host, &EFAD);
	d->caps &= ~FI_TAGGED;
	d->ep_attr->mem_tag_format = 0;
	d->domain_attr->cq_data_size = 4;
	d->mode |= FI_RX_CQ_DATA;
	CHECK_EQ(scen_select(&s), 0);
	CHECK(kept(&s, d));
	policy_data_path(true, false, NULL, "efa", d, NULL, &dp);
	CHECK(dp.rma);
	CHECK_STR_CONTAINS(dp.reason, "every message as an RMA write");
	CHECK_STR_CONTAINS(dp.reason, "; FI_RX_CQ_DATA: each write takes a control receive, "
				      "posted again unread)");
	policy_data_path(false, true, NULL, "efa", d, NULL, &dp);
	CHECK_STR_CONTAINS(dp.reason, "posted again unread); NCCL_FABRIC_RMA=0 cannot apply");
	scen_free(&s);
	/* without 4 bytes of CQ data it cannot carry them */
	scen_init(&s, "efa");
	d = scen_add(&s, notag_host, &EFAD);
	d->caps &= ~FI_TAGGED;
	CHECK_EQ(scen_select(&s), -1);
	CHECK_STR_CONTAINS(reason_of(&s, d), "lacks FI_TAGGED, and RMA writes");
	scen_free(&s);
	return 0;
}

static int test_select_first_wins(void)
{
	struct scenario s;
	scen_init(&s, NULL);
	struct fi_info *v = scen_add(&s, A_HOST_RMA, &VERBS);
	struct fi_info *t = scen_add(&s, A_HOST_RMA, &TCP_ETH0);
	CHECK_EQ(scen_select(&s), 0);
	CHECK(s.sel.ok);
	CHECK(!strcmp(s.sel.provider, "verbs;ofi_rxm"));
	CHECK_STR_CONTAINS(s.sel.reason, "verbs;ofi_rxm");
	CHECK_STR_CONTAINS(s.sel.reason, "first provider libfabric offers");
	CHECK_EQ(s.sel.ndevs, 1);
	CHECK(!strcmp(s.sel.devs[0].name, "mlx5_0"));
	CHECK(s.sel.devs[0].host_info == v);
	CHECK(s.sel.devs[0].hmem_info == NULL);
	CHECK(!s.sel.has_hmem);
	CHECK(!s.sel.local_only);
	CHECK(kept(&s, v));
	CHECK(!kept(&s, t));
	CHECK_STR_CONTAINS(reason_of(&s, t), "provider verbs;ofi_rxm comes first");
	CHECK_EQ(s.sel.ncands, 2);
	scen_free(&s);

	/* FI_HMEM attempts come first: efa there beats tcp listed first in the host pass */
	scen_init(&s, NULL);
	t = scen_add(&s, A_HOST_RMA, &TCP_ETH0);
	struct fi_info *e = scen_add(&s, A_HMEM_RMA, &EFA);
	CHECK_EQ(scen_select(&s), 0);
	CHECK(!strcmp(s.sel.provider, "efa"));
	CHECK(s.sel.has_hmem);
	CHECK(s.sel.devs[0].hmem_info == e);
	CHECK(!kept(&s, t));
	/* the candidate records its attempt and what it got */
	const struct policy_cand *c = cand_of(&s, e);
	CHECK(c && c->attempt == A_HMEM_RMA && c->hmem && c->rma && c->remote);
	CHECK(c && c->tag_bits == 64);
	CHECK(c && !strcmp(c->domain, "rdmap16s27-rdm") && !strcmp(c->fabric, "efa"));
	scen_free(&s);
	return 0;
}

static int test_select_include_order(void)
{
	struct scenario s;
	scen_init(&s, "tcp,verbs");
	struct fi_info *v = scen_add(&s, A_HOST_RMA, &VERBS);
	struct fi_info *t = scen_add(&s, A_HOST_RMA, &TCP_ETH0);
	CHECK_EQ(scen_select(&s), 0);
	CHECK(!strcmp(s.sel.provider, "tcp;ofi_rxm")); /* named first wins, core name matches */
	CHECK_STR_CONTAINS(s.sel.reason, "named in NCCL_FABRIC_PROVIDER");
	CHECK(kept(&s, t));
	CHECK(!kept(&s, v));
	CHECK_STR_CONTAINS(reason_of(&s, v), "comes first");
	scen_free(&s);

	/* the other order */
	scen_init(&s, " verbs , tcp ");
	v = scen_add(&s, A_HOST_RMA, &VERBS);
	t = scen_add(&s, A_HOST_RMA, &TCP_ETH0);
	CHECK_EQ(scen_select(&s), 0);
	CHECK(!strcmp(s.sel.provider, "verbs;ofi_rxm"));
	scen_free(&s);

	/* a provider not named is rejected outright */
	scen_init(&s, "tcp");
	v = scen_add(&s, A_HMEM_RMA, &VERBS);
	t = scen_add(&s, A_HOST_RMA, &TCP_ETH0);
	CHECK_EQ(scen_select(&s), 0);
	CHECK(!strcmp(s.sel.provider, "tcp;ofi_rxm"));
	CHECK_STR_CONTAINS(reason_of(&s, v), "not named in NCCL_FABRIC_PROVIDER");
	CHECK(!s.sel.has_hmem);
	scen_free(&s);
	return 0;
}

static int test_select_exclude(void)
{
	struct scenario s;
	scen_init(&s, "^verbs");
	struct fi_info *v = scen_add(&s, A_HOST_RMA, &VERBS);
	struct fi_info *t = scen_add(&s, A_HOST_RMA, &TCP_ETH0);
	CHECK_EQ(scen_select(&s), 0);
	CHECK(!strcmp(s.sel.provider, "tcp;ofi_rxm"));
	CHECK_STR_CONTAINS(reason_of(&s, v), "excluded by NCCL_FABRIC_PROVIDER");
	CHECK(kept(&s, t));
	/* exclude-only: still "the first provider", not "named" */
	CHECK_STR_CONTAINS(s.sel.reason, "first provider libfabric offers");
	scen_free(&s);

	/* exclude by core name, and exclude beats include */
	scen_init(&s, "tcp,verbs,^tcp");
	v = scen_add(&s, A_HOST_RMA, &VERBS);
	t = scen_add(&s, A_HOST_RMA, &TCP_ETH0);
	CHECK_EQ(scen_select(&s), 0);
	CHECK(!strcmp(s.sel.provider, "verbs;ofi_rxm"));
	CHECK_STR_CONTAINS(reason_of(&s, t), "excluded");
	scen_free(&s);

	/* everything excluded: no provider, and the reason names the setting */
	scen_init(&s, "^tcp");
	t = scen_add(&s, A_HOST_RMA, &TCP_ETH0);
	CHECK_EQ(scen_select(&s), -1);
	CHECK(!s.sel.ok);
	CHECK_EQ(s.sel.ndevs, 0);
	CHECK(s.sel.reason[0] != '\0');
	scen_free(&s);
	return 0;
}

static int test_select_single_host(void)
{
	struct scenario s;
	/* shm answers only the single-host pass, which runs only when providers
	 * are named; named list without shm: not used */
	scen_init(&s, "tcp");
	struct fi_info *m = scen_add(&s, A_LOCAL_HOST_RMA, &SHM);
	CHECK_EQ(scen_select(&s), -1);
	CHECK(!s.sel.ok);
	CHECK_STR_CONTAINS(reason_of(&s, m), "not named in NCCL_FABRIC_PROVIDER");
	CHECK_STR_CONTAINS(s.sel.reason, "matched no usable provider");
	scen_free(&s);

	/* an exclude-only list names nothing: no single-host pass at all */
	scen_init(&s, "^efa");
	CHECK_EQ(s.n, 6);
	for (int a = 0; a < s.n; a++)
		CHECK(s.plan[a].remote);
	scen_free(&s);

	/* with a real provider present, that one is used */
	scen_init(&s, "tcp");
	m = scen_add(&s, A_LOCAL_HOST_RMA, &SHM);
	struct fi_info *t = scen_add(&s, A_HOST_RMA, &TCP_ETH0);
	CHECK_EQ(scen_select(&s), 0);
	CHECK(!strcmp(s.sel.provider, "tcp;ofi_rxm"));
	CHECK(!kept(&s, m));
	CHECK(kept(&s, t));
	scen_free(&s);

	/* named: used, and flagged as single-host */
	scen_init(&s, "shm");
	m = scen_add(&s, A_LOCAL_HOST_RMA, &SHM);
	CHECK_EQ(scen_select(&s), 0);
	CHECK(s.sel.ok);
	CHECK(!strcmp(s.sel.provider, "shm"));
	CHECK(s.sel.local_only);
	CHECK_STR_CONTAINS(s.sel.reason, "single-host provider: ranks must share a host");
	CHECK_EQ(s.sel.ndevs, 1);
	CHECK(s.sel.devs[0].host_info == m);
	const struct policy_cand *c = cand_of(&s, m);
	CHECK(c && !c->remote);
	scen_free(&s);

	/* named after tcp: tcp wins and the result is not single-host */
	scen_init(&s, "tcp,shm");
	m = scen_add(&s, A_LOCAL_HOST_RMA, &SHM);
	t = scen_add(&s, A_HOST_RMA, &TCP_ETH0);
	CHECK_EQ(scen_select(&s), 0);
	CHECK(!strcmp(s.sel.provider, "tcp;ofi_rxm"));
	CHECK(!s.sel.local_only);
	scen_free(&s);
	return 0;
}

static int test_select_rejections(void)
{
	struct scenario s;
	scen_init(&s, NULL);
	struct entry e;

	e = VERBS;
	e.domain = "mode";
	e.mode = FI_MSG_PREFIX;
	struct fi_info *i_mode = scen_add(&s, A_HOST_RMA, &e);
	e.domain = "ctx";
	e.mode = FI_CONTEXT | FI_CONTEXT2; /* honoured: fine */
	struct fi_info *i_ctx = scen_add(&s, A_HOST, &e);
	e.mode = 0;
	e.domain = "mrraw";
	e.mr_mode = FI_MR_RAW;
	struct fi_info *i_mr = scen_add(&s, A_HOST_RMA, &e);
	e.mr_mode = 0;
	e.domain = "tags44";
	e.tag_fmt = 0x00000fffffffffffULL;
	struct fi_info *i_tags = scen_add(&s, A_HOST_RMA, &e);
	e.domain = "tags48";
	e.tag_fmt = 0x0000ffffffffffffULL; /* exactly enough */
	struct fi_info *i_tags48 = scen_add(&s, A_HOST_RMA, &e);
	e.tag_fmt = 0;
	e.domain = "msgep";
	e.ep_type = FI_EP_MSG;
	struct fi_info *i_ep = scen_add(&s, A_HOST_RMA, &e);
	e.ep_type = 0;
	e.domain = "notag";
	e.drop_caps = FI_TAGGED;
	struct fi_info *i_notag = scen_add(&s, A_HOST_RMA, &e);

	CHECK_EQ(scen_select(&s), 0);
	CHECK_STR_CONTAINS(reason_of(&s, i_mode), "mode bits");
	CHECK_STR_CONTAINS(reason_of(&s, i_mode), "0x400000000000000"); /* FI_MSG_PREFIX */
	CHECK_STR_CONTAINS(reason_of(&s, i_mr), "mr_mode bits 0x8");
	CHECK_STR_CONTAINS(reason_of(&s, i_tags), "offers 44 tag bits; the plugin needs 48");
	CHECK_STR_CONTAINS(reason_of(&s, i_ep), "FI_EP_RDM");
	CHECK_STR_CONTAINS(reason_of(&s, i_notag), "lacks FI_TAGGED, and RMA writes with 4 bytes");
	CHECK(!kept(&s, i_mode) && !kept(&s, i_mr) && !kept(&s, i_tags) && !kept(&s, i_ep) &&
	      !kept(&s, i_notag));
	CHECK(kept(&s, i_ctx));
	CHECK(kept(&s, i_tags48));
	CHECK_EQ(s.sel.ndevs, 2); /* tags48 and ctx, in discovery order */
	CHECK(!strcmp(s.sel.devs[0].name, "tags48"));
	CHECK(!strcmp(s.sel.devs[1].name, "ctx"));
	scen_free(&s);
	return 0;
}

static int test_select_none(void)
{
	struct scenario s;
	/* nothing answered at all */
	scen_init(&s, NULL);
	CHECK_EQ(scen_select(&s), -1);
	CHECK(!s.sel.ok);
	CHECK_EQ(s.sel.ncands, 0);
	CHECK_EQ(s.sel.ndevs, 0);
	CHECK_STR_CONTAINS(s.sel.reason, "no libfabric provider offers RDM endpoints");
	scen_free(&s);

	/* only unusable entries */
	scen_init(&s, NULL);
	struct entry e = TCP_ETH0;
	e.tag_fmt = 0xffffffffULL;
	scen_add(&s, A_HOST, &e);
	CHECK_EQ(scen_select(&s), -1);
	CHECK(!s.sel.ok);
	CHECK_EQ(s.sel.ncands, 1);
	scen_free(&s);

	/* a named provider that is not there */
	scen_init(&s, "efa");
	scen_add(&s, A_HOST, &TCP_ETH0);
	CHECK_EQ(scen_select(&s), -1);
	CHECK_STR_CONTAINS(s.sel.reason, "NCCL_FABRIC_PROVIDER=efa matched no usable provider");
	scen_free(&s);

	/* a failed attempt's list is ignored even when a pointer is left in it */
	scen_init(&s, NULL);
	scen_add(&s, A_HOST, &TCP_ETH0);
	s.res[A_HOST].rc = -FI_ENODATA;
	CHECK_EQ(scen_select(&s), -1);
	CHECK_EQ(s.sel.ncands, 0);
	scen_free(&s);
	return 0;
}

static int test_select_one_device_per_domain(void)
{
	struct scenario s;
	/* IPv4 and IPv6 entries of lo: one device */
	scen_init(&s, NULL);
	struct fi_info *l4 = scen_add(&s, A_HOST_RMA, &TCP_LO);
	struct fi_info *l6 = scen_add(&s, A_HOST_RMA, &TCP_LO6);
	CHECK_EQ(scen_select(&s), 0);
	CHECK_EQ(s.sel.ndevs, 1);
	CHECK(!strcmp(s.sel.devs[0].name, "lo"));
	CHECK(s.sel.devs[0].host_info == l4);
	CHECK(kept(&s, l4));
	CHECK(!kept(&s, l6));
	CHECK_STR_CONTAINS(reason_of(&s, l6), "same provider and domain as candidate 0");
	scen_free(&s);

	/* two real interfaces: two devices, names unique, in order */
	scen_init(&s, NULL);
	struct entry e1 = TCP_ETH0;
	e1.domain = "eth1";
	e1.fabric = "198.51.100.0/24";
	e1.ipv4 = "198.51.100.7";
	scen_add(&s, A_HOST_RMA, &TCP_ETH0);
	struct entry e0v6 = TCP_ETH0;
	e0v6.fabric = "fd00::/64";
	e0v6.ipv4 = NULL;
	scen_add(&s, A_HOST_RMA, &e0v6);
	scen_add(&s, A_HOST_RMA, &e1);
	CHECK_EQ(scen_select(&s), 0);
	CHECK_EQ(s.sel.ndevs, 2);
	CHECK(!strcmp(s.sel.devs[0].name, "eth0"));
	CHECK(!strcmp(s.sel.devs[1].name, "eth1"));
	CHECK(strcmp(s.sel.devs[0].name, s.sel.devs[1].name) != 0);
	CHECK_STR_CONTAINS(s.sel.reason, "2 devices");
	scen_free(&s);
	return 0;
}

static int test_select_loopback(void)
{
	struct scenario s;
	/* a real interface exists: lo is not used */
	scen_init(&s, NULL);
	struct fi_info *lo = scen_add(&s, A_HOST_RMA, &TCP_LO);
	struct fi_info *eth = scen_add(&s, A_HOST_RMA, &TCP_ETH0);
	struct fi_info *lo6 = scen_add(&s, A_HOST_RMA, &TCP_LO6);
	CHECK_EQ(scen_select(&s), 0);
	CHECK_EQ(s.sel.ndevs, 1);
	CHECK(!strcmp(s.sel.devs[0].name, "eth0"));
	CHECK(!s.sel.devs[0].loopback);
	CHECK(kept(&s, eth));
	CHECK(!kept(&s, lo));
	CHECK_STR_CONTAINS(reason_of(&s, lo), "loopback interface");
	CHECK(!kept(&s, lo6));
	CHECK_STR_CONTAINS(s.sel.reason, "; 1 device");
	CHECK(!strstr(s.sel.reason, "devices"));
	scen_free(&s);

	/* loopback is all there is: used, and marked */
	scen_init(&s, NULL);
	lo = scen_add(&s, A_HOST_RMA, &TCP_LO);
	CHECK_EQ(scen_select(&s), 0);
	CHECK_EQ(s.sel.ndevs, 1);
	CHECK(s.sel.devs[0].loopback);
	CHECK(s.sel.devs[0].host_info == lo);
	scen_free(&s);

	/* loopback found by address, whatever the domain's name (IPv4 127/8 and ::1) */
	scen_init(&s, NULL);
	struct entry a4 = TCP_LO;
	a4.domain = "lo-a";
	a4.ipv4 = "127.1.2.3";
	struct entry a6 = TCP_LO6;
	a6.domain = "lo-b";
	struct entry real = TCP_ETH0;
	real.domain = "veth0";
	real.ipv4 = "10.127.0.1"; /* 127 in another octet is not loopback */
	struct fi_info *i4 = scen_add(&s, A_HOST_RMA, &a4);
	struct fi_info *i6 = scen_add(&s, A_HOST_RMA, &a6);
	struct fi_info *ir = scen_add(&s, A_HOST_RMA, &real);
	CHECK_EQ(scen_select(&s), 0);
	const struct policy_cand *c4 = cand_of(&s, i4), *c6 = cand_of(&s, i6), *cr = cand_of(&s, ir);
	CHECK(c4 && c4->loopback);
	CHECK(c6 && c6->loopback);
	CHECK(cr && !cr->loopback);
	CHECK_EQ(s.sel.ndevs, 1);
	CHECK(!strcmp(s.sel.devs[0].name, "veth0"));
	scen_free(&s);

	/* loopback of another provider does not count as a real interface of this one */
	scen_init(&s, NULL);
	lo = scen_add(&s, A_HOST_RMA, &TCP_LO);
	struct entry vlo = VERBS;
	vlo.domain = "rxe_lo";
	scen_add(&s, A_HOST_RMA, &vlo);
	CHECK_EQ(scen_select(&s), 0);
	CHECK(!strcmp(s.sel.provider, "tcp;ofi_rxm"));
	CHECK(kept(&s, lo));
	scen_free(&s);
	return 0;
}

static int test_select_hmem_host_per_device(void)
{
	struct scenario s;
	scen_init(&s, NULL);
	struct entry e2 = EFA;
	e2.domain = "rdmap32s27-rdm";
	/* device 1 answers the FI_HMEM and host passes, device 2 only the host pass */
	struct fi_info *h1 = scen_add(&s, A_HMEM_RMA, &EFA);
	struct fi_info *h1b = scen_add(&s, A_HMEM, &EFA);
	struct fi_info *c1 = scen_add(&s, A_HOST_RMA, &EFA);
	struct fi_info *c2 = scen_add(&s, A_HOST_RMA, &e2);
	struct fi_info *c1b = scen_add(&s, A_HOST, &EFA);
	CHECK_EQ(scen_select(&s), 0);
	CHECK(!strcmp(s.sel.provider, "efa"));
	CHECK(s.sel.has_hmem);
	CHECK_EQ(s.sel.ndevs, 2);
	CHECK(s.sel.devs[0].hmem_info == h1); /* the first FI_HMEM entry (with RMA) */
	CHECK(s.sel.devs[0].host_info == c1);
	CHECK(s.sel.devs[1].hmem_info == NULL);
	CHECK(s.sel.devs[1].host_info == c2);
	CHECK(!kept(&s, h1b));
	CHECK(!kept(&s, c1b));
	const struct policy_cand *ch = cand_of(&s, h1), *cc = cand_of(&s, c1);
	CHECK(ch && ch->hmem);
	CHECK(cc && !cc->hmem);
	scen_free(&s);

	/* a host-pass entry that also advertises FI_HMEM is still the host entry */
	scen_init(&s, NULL);
	struct entry eh = EFA;
	eh.extra_caps = FI_HMEM;
	c1 = scen_add(&s, A_HOST_RMA, &eh);
	CHECK_EQ(scen_select(&s), 0);
	CHECK(s.sel.devs[0].host_info == c1);
	CHECK(s.sel.devs[0].hmem_info == NULL);
	CHECK(!s.sel.has_hmem);
	scen_free(&s);

	/* an FI_HMEM-pass entry without FI_HMEM in its caps is a host entry */
	scen_init(&s, NULL);
	struct entry nh = EFA;
	nh.drop_caps = FI_HMEM;
	struct fi_info *x = scen_add(&s, A_HMEM_RMA, &nh);
	CHECK_EQ(scen_select(&s), 0);
	CHECK(s.sel.devs[0].hmem_info == NULL);
	CHECK(s.sel.devs[0].host_info == x);
	CHECK(!s.sel.has_hmem);
	/* and the RMA flag needs both FI_RMA and FI_READ */
	scen_free(&s);
	scen_init(&s, NULL);
	struct entry nr = EFA;
	nr.drop_caps = FI_READ;
	x = scen_add(&s, A_HOST_RMA, &nr);
	CHECK_EQ(scen_select(&s), 0);
	CHECK(cand_of(&s, x) && !cand_of(&s, x)->rma);
	scen_free(&s);
	return 0;
}

static int test_select_twins(void)
{
	struct scenario s;
	scen_init(&s, NULL);
	struct fi_info *a = scen_add(&s, A_HOST_RMA, &TCP_ETH0);
	struct fi_info *b = scen_add(&s, A_HOST_RMA, &TCP_ETH0);
	struct fi_info *c = scen_add(&s, A_HOST_RMA, &TCP_ETH0);
	struct fi_info *other_attempt = scen_add(&s, A_HOST, &TCP_ETH0);
	CHECK_EQ(scen_select(&s), 0);
	const struct policy_cand *ca = cand_of(&s, a);
	CHECK(ca != NULL);
	CHECK(ca && ca->twins == 2);
	CHECK(cand_of(&s, b) == NULL); /* counted, not listed */
	CHECK(cand_of(&s, c) == NULL);
	CHECK(cand_of(&s, other_attempt) != NULL); /* another attempt is no twin */
	CHECK_EQ(s.sel.ncands, 2);
	CHECK_EQ(s.sel.ndevs, 1);
	scen_free(&s);

	/* different caps: not twins */
	scen_init(&s, NULL);
	a = scen_add(&s, A_HOST_RMA, &TCP_ETH0);
	struct entry e = TCP_ETH0;
	e.extra_caps = FI_DIRECTED_RECV;
	b = scen_add(&s, A_HOST_RMA, &e);
	CHECK_EQ(scen_select(&s), 0);
	CHECK(cand_of(&s, b) != NULL);
	CHECK_EQ(cand_of(&s, a)->twins, 0);
	scen_free(&s);
	return 0;
}


/* libfabric 2.x: the native tcp RDM provider beside tcp;ofi_rxm, its bare
 * template entry under FI_REMOTE_COMM, and providers found only at API 1.17. */
static const struct entry NTCP_TEMPLATE = { .prov = "tcp", .fabric = "tcp", .domain = "tcp" };
static const struct entry NTCP_LO = { .prov = "tcp", .fabric = "127.0.0.1/32", .domain = "lo",
				      .ipv4 = "127.0.0.1" };
static const struct entry NTCP_ETH0 = { .prov = "tcp", .fabric = "192.0.2.0/24", .domain = "eth0",
					.ipv4 = "192.0.2.2" };
static const struct entry OLDPROV = { .prov = "oldprov", .fabric = "oldfab", .domain = "old0" };

static struct fi_info *add_template(struct scenario *s, int a)
{
	struct fi_info *i = scen_add(s, a, &NTCP_TEMPLATE);
	i->addr_format = FI_SOCKADDR; /* the generic format, no address */
	return i;
}

static int test_select_template(void)
{
	struct scenario s;
	/* unnamed: a template discovery could not replace by its loopback
	 * entries is rejected with advice, rxm on lo is used */
	scen_init(&s, NULL);
	struct fi_info *t = add_template(&s, A_HOST_RMA);
	struct fi_info *r = scen_add(&s, A_HOST_RMA, &TCP_LO);
	CHECK_EQ(scen_select(&s), 0);
	CHECK(!strcmp(s.sel.provider, "tcp;ofi_rxm"));
	CHECK(cand_of(&s, t) && cand_of(&s, t)->template_entry);
	CHECK_STR_CONTAINS(reason_of(&s, t), "template entry");
	CHECK_STR_CONTAINS(reason_of(&s, t), "FI_TCP_IFACE");
	CHECK(policy_is_template(t) && !policy_is_template(r));
	CHECK(kept(&s, r));
	scen_free(&s);

	/* a real address is no template, even with the provider's name as domain */
	scen_init(&s, NULL);
	struct entry e = NTCP_TEMPLATE;
	e.ipv4 = "192.0.2.7";
	t = scen_add(&s, A_HOST_RMA, &e);
	t->addr_format = FI_SOCKADDR;
	CHECK_EQ(scen_select(&s), 0);
	CHECK(kept(&s, t));
	scen_free(&s);

	/* nothing but a template: no provider, and the reason says why */
	scen_init(&s, NULL);
	t = add_template(&s, A_HOST_RMA);
	CHECK_EQ(scen_select(&s), -1);
	CHECK_STR_CONTAINS(reason_of(&s, t), "template entry");
	scen_free(&s);
	return 0;
}

static int test_select_native_tcp_names(void)
{
	struct scenario s;
	/* "tcp" names the native provider where libfabric lists one (2.x) ... */
	scen_init(&s, "tcp");
	struct fi_info *t = add_template(&s, A_HOST_RMA);
	struct fi_info *r = scen_add(&s, A_HOST_RMA, &TCP_LO);
	struct fi_info *n = scen_add(&s, A_LOCAL_HOST_RMA, &NTCP_LO);
	CHECK_EQ(scen_select(&s), 0);
	CHECK(!strcmp(s.sel.provider, "tcp"));
	CHECK(kept(&s, n));
	CHECK(!kept(&s, r));
	CHECK_STR_CONTAINS(reason_of(&s, r), "not named");
	CHECK(!kept(&s, t));
	CHECK_STR_CONTAINS(s.sel.names, "\"tcp\" names provider tcp");
	scen_free(&s);

	/* ... and the layered one where it does not (1.x) */
	scen_init(&s, "tcp");
	r = scen_add(&s, A_HOST_RMA, &TCP_LO);
	CHECK_EQ(scen_select(&s), 0);
	CHECK(!strcmp(s.sel.provider, "tcp;ofi_rxm"));
	CHECK_STR_CONTAINS(s.sel.names, "layered providers with tcp in them");
	scen_free(&s);

	/* the full name always names the layered one */
	scen_init(&s, "tcp;ofi_rxm");
	n = scen_add(&s, A_HOST_RMA, &NTCP_ETH0);
	r = scen_add(&s, A_HOST_RMA, &TCP_ETH0);
	CHECK_EQ(scen_select(&s), 0);
	CHECK(!strcmp(s.sel.provider, "tcp;ofi_rxm"));
	CHECK(!kept(&s, n));
	scen_free(&s);

	/* ^tcp on 2.x excludes the native provider only */
	scen_init(&s, "^tcp");
	n = scen_add(&s, A_HOST_RMA, &NTCP_ETH0);
	r = scen_add(&s, A_HOST_RMA, &TCP_ETH0);
	CHECK_EQ(scen_select(&s), 0);
	CHECK(!strcmp(s.sel.provider, "tcp;ofi_rxm"));
	CHECK_STR_CONTAINS(reason_of(&s, n), "excluded");
	scen_free(&s);

	/* unnamed: the native provider is preferred to tcp;ofi_rxm, in either order */
	scen_init(&s, NULL);
	r = scen_add(&s, A_HOST_RMA, &TCP_ETH0);
	n = scen_add(&s, A_HOST_RMA, &NTCP_ETH0);
	CHECK_EQ(scen_select(&s), 0);
	CHECK(!strcmp(s.sel.provider, "tcp"));
	CHECK_STR_CONTAINS(reason_of(&s, r), "preferred by default");
	scen_free(&s);
	/* ... but a template is no native provider: rxm on loopback then */
	scen_init(&s, NULL);
	n = add_template(&s, A_HOST_RMA);
	r = scen_add(&s, A_HOST_RMA, &TCP_LO);
	CHECK_EQ(scen_select(&s), 0);
	CHECK(!strcmp(s.sel.provider, "tcp;ofi_rxm"));
	scen_free(&s);

	/* a name nothing carries */
	scen_init(&s, "nosuch");
	r = scen_add(&s, A_HOST_RMA, &TCP_LO);
	CHECK_EQ(scen_select(&s), -1);
	CHECK_STR_CONTAINS(s.sel.names, "names no provider");
	scen_free(&s);
	return 0;
}

static int test_select_legacy_api(void)
{
	struct scenario s;
	memset(&s, 0, sizeof(s));
	make_cfg(&s.cfg, "oldprov", NULL, NULL);
	s.fi_version = FI_VERSION(2, 1);
	s.n = policy_plan(&s.cfg, s.fi_version, s.plan);
	CHECK_EQ(s.n, 24);
	for (int a = 0; a < s.n; a++) {
		s.res[a].plan = s.plan[a];
		s.res[a].rc = -FI_ENODATA;
	}
	/* tcp;ofi_rxm answers both asks (a twin), oldprov only the API 1.17 one */
	int host_rma = -1, legacy_host_rma = -1;
	for (int a = 0; a < s.n; a++)
		if (s.plan[a].remote && !s.plan[a].hmem && s.plan[a].rma && !s.plan[a].notag)
			*(s.plan[a].legacy ? &legacy_host_rma : &host_rma) = a;
	CHECK(host_rma >= 0 && legacy_host_rma == host_rma + 1);
	if (host_rma < 0 || legacy_host_rma < 0)
		return 1;
	struct fi_info *r1 = scen_add(&s, host_rma, &TCP_ETH0);
	struct fi_info *r2 = scen_add(&s, legacy_host_rma, &TCP_ETH0);
	struct fi_info *o = scen_add(&s, legacy_host_rma, &OLDPROV);
	CHECK_EQ(scen_select(&s), 0);
	CHECK(!strcmp(s.sel.provider, "oldprov"));
	CHECK(cand_of(&s, r2) == NULL); /* the same entry asked again: counted on the first */
	CHECK(cand_of(&s, r1) && cand_of(&s, r1)->twins == 1);
	CHECK(cand_of(&s, o) && cand_of(&s, o)->api_version == FI_VERSION(1, 17));
	CHECK(kept(&s, o));
	scen_free(&s);
	return 0;
}

static int test_select_limits(void)
{
	struct scenario s;
	char names[300][16];
	/* more kept domains than devices NCCL gets */
	scen_init(&s, NULL);
	for (int i = 0; i < 40; i++) {
		struct entry e = VERBS;
		snprintf(names[i], sizeof(names[i]), "mlx5_%d", i);
		e.domain = names[i];
		scen_add(&s, A_HOST_RMA, &e);
	}
	CHECK_EQ(scen_select(&s), 0);
	CHECK_EQ(s.sel.ndevs, POLICY_MAX_DEVS);
	CHECK_STR_CONTAINS(s.sel.cands[39].reason, "more than 32 devices");
	CHECK(!s.sel.cands[39].kept);
	CHECK(!strcmp(s.sel.devs[31].name, "mlx5_31"));
	scen_free(&s);

	/* more entries than candidates: truncated, said so */
	scen_init(&s, NULL);
	for (int i = 0; i < 300; i++) {
		struct entry e = VERBS;
		snprintf(names[i], sizeof(names[i]), "d%d", i);
		e.domain = names[i];
		scen_add(&s, A_HOST_RMA, &e);
	}
	CHECK_EQ(scen_select(&s), 0);
	CHECK_EQ(s.sel.ncands, POLICY_MAX_CANDS);
	CHECK_STR_CONTAINS(s.sel.reason, "candidate list truncated");
	scen_free(&s);
	return 0;
}

static int test_select_realistic_tcp(void)
{
	/* what this machine's tcp;ofi_rxm lists, in the four remote attempts,
	 * plus the single-host pass because the user named tcp */
	struct scenario s;
	scen_init(&s, "tcp");
	struct entry e6 = TCP_ETH0, ll = TCP_ETH0;
	e6.fabric = "fd00::/64";
	e6.ipv4 = NULL;
	ll.fabric = "fe80::/64";
	ll.ipv4 = NULL;
	const struct fi_info *first = NULL;
	for (int a = A_HOST_RMA; a < s.n; a++) {
		if (a >= 4 && (a % 4) < 2)
			continue; /* tcp has no FI_HMEM */
		const struct fi_info *i = scen_add(&s, a, &TCP_ETH0);
		if (!first)
			first = i;
		scen_add(&s, a, &ll);
		scen_add(&s, a, &e6);
		scen_add(&s, a, &TCP_LO);
		scen_add(&s, a, &TCP_LO6);
	}
	CHECK_EQ(scen_select(&s), 0);
	CHECK(!strcmp(s.sel.provider, "tcp;ofi_rxm"));
	CHECK_EQ(s.sel.ndevs, 1);
	CHECK(s.sel.devs[0].host_info == first);
	CHECK(!s.sel.has_hmem);
	CHECK(!s.sel.local_only);
	int nkept = 0;
	for (int k = 0; k < s.sel.ncands; k++) {
		nkept += s.sel.cands[k].kept;
		CHECK(s.sel.cands[k].reason[0] != '\0');
	}
	CHECK_EQ(nkept, 1);
	scen_free(&s);
	return 0;
}

/* ---- the GPU-memory decision ---- */

#define V117 FI_VERSION(1, 17)
#define V118 FI_VERSION(1, 18)
#define V120 FI_VERSION(1, 20)
#define V200 FI_VERSION(2, 0)

enum probe_kind { P_NONE, P_FAILED, P_OPEN };
#define OTHER_ERR (-FI_EIO)

struct hmem_case {
	const char *what;
	/* inputs */
	uint32_t fi_version;
	int has_hmem;
	enum probe_kind probe;
	int rc;
	const char *mode;   /* NCCL_FABRIC_HMEM */
	int driver, ngpus, gpu_dmabuf;
	const char *dmabuf; /* NCCL_FABRIC_DMABUF */
	/* expected */
	enum policy_hmem_verdict verdict;
	int ptr;            /* NCCL_PTR_* */
	const char *reason_has;
	const char *reason_has2;
	const char *reason_lacks;
};

#define H NCCL_PTR_HOST
#define HC (NCCL_PTR_HOST | NCCL_PTR_CUDA)
#define HCD (NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF)

static const struct hmem_case hmem_cases[] = {
	/* the setting first */
	{ "off beats a perfect setup", V120, 1, P_OPEN, 0, "off", 1, 1, 1, "1",
	  POLICY_HMEM_NO_SETTING, H, "NCCL_FABRIC_HMEM=off", NULL, NULL },
	{ "off, no provider support", V117, 0, P_NONE, 0, "OFF", 0, 0, 0, "1",
	  POLICY_HMEM_NO_SETTING, H, "NCCL_FABRIC_HMEM=off", NULL, NULL },
	/* provider without FI_HMEM */
	{ "auto, provider without FI_HMEM", V120, 0, P_NONE, 0, "auto", 1, 1, 1, "1",
	  POLICY_HMEM_NO_PROVIDER, H, "does not advertise FI_HMEM", "prov-x", NULL },
	{ "force cannot add FI_HMEM", V200, 0, P_NONE, 0, "force", 1, 8, 1, "1",
	  POLICY_HMEM_NO_PROVIDER, H, "does not advertise FI_HMEM", NULL, NULL },
	/* no GPU */
	{ "no CUDA driver", V120, 1, P_OPEN, 0, "auto", 0, 0, 1, "1",
	  POLICY_HMEM_NO_GPU, H, "no GPU", "libcuda.so.1: not found", NULL },
	{ "driver, 0 GPUs", V120, 1, P_OPEN, 0, "auto", 1, 0, 1, "1",
	  POLICY_HMEM_NO_GPU, H, "no GPU", "reports 0 GPUs", NULL },
	{ "force, driver, 0 GPUs", V120, 1, P_OPEN, -FI_EOPNOTSUPP, "force", 1, 0, 1, "1",
	  POLICY_HMEM_NO_GPU, H, "no GPU", NULL, NULL },
	{ "force, no driver", V118, 1, P_FAILED, 0, "force", 0, 0, 0, "1",
	  POLICY_HMEM_NO_GPU, H, "no GPU", NULL, NULL },
	/* the probe */
	{ "probe failed", V120, 1, P_FAILED, 0, "auto", 1, 1, 1, "1",
	  POLICY_HMEM_PROBE_FAILED, H, "probe endpoint", "fi_endpoint: boom", NULL },
	{ "force, probe failed", V120, 1, P_FAILED, 0, "force", 1, 2, 1, "1",
	  POLICY_HMEM_PROBE_FAILED, H, "did not open", NULL, NULL },
	/* the promise, and DMA-BUF */
	{ "promised, 1.20, DMA-BUF", V120, 1, P_OPEN, 0, "auto", 1, 1, 1, "1",
	  POLICY_HMEM_PROMISED, HCD, "answered FI_OPT_CUDA_API_PERMITTED=false with 0", NULL, NULL },
	{ "promised, 2.0, DMA-BUF", V200, 1, P_OPEN, 0, "auto", 1, 4, 1, "1",
	  POLICY_HMEM_PROMISED, HCD, "with 0", NULL, NULL },
	{ "promised, 1.18: no DMA-BUF", V118, 1, P_OPEN, 0, "auto", 1, 1, 1, "1",
	  POLICY_HMEM_PROMISED, HC, "with 0", NULL, NULL },
	{ "promised, 1.17: no DMA-BUF", V117, 1, P_OPEN, 0, "auto", 1, 1, 1, "1",
	  POLICY_HMEM_PROMISED, HC, "with 0", NULL, NULL },
	{ "promised, GPU without DMA-BUF", V120, 1, P_OPEN, 0, "auto", 1, 1, 0, "1",
	  POLICY_HMEM_PROMISED, HC, "with 0", NULL, NULL },
	{ "promised, NCCL_FABRIC_DMABUF=0", V120, 1, P_OPEN, 0, "auto", 1, 1, 1, "0",
	  POLICY_HMEM_PROMISED, HC, "with 0", NULL, NULL },
	{ "force and promised: no warning", V120, 1, P_OPEN, 0, "force", 1, 1, 1, "1",
	  POLICY_HMEM_PROMISED, HCD, "with 0", NULL, "NCCL_FABRIC_HMEM=force" },
	/* auto and no promise: refused, the answer in words */
	{ "auto, EOPNOTSUPP", V120, 1, P_OPEN, -FI_EOPNOTSUPP, "auto", 1, 1, 1, "1",
	  POLICY_HMEM_REFUSED, H, "-FI_EOPNOTSUPP: its FI_HMEM support needs the CUDA API", NULL,
	  "NCCL_FABRIC_HMEM=force" },
	{ "auto, EINVAL on 1.20: libfabric's CUDA support", V120, 1, P_OPEN, -FI_EINVAL, "auto", 1, 1,
	  1, "1", POLICY_HMEM_REFUSED, H, "-FI_EINVAL: libfabric's CUDA support is not active", NULL,
	  "NCCL_FABRIC_HMEM=force" },
	{ "auto, EINVAL on 1.17: the provider's own answer", V117, 1, P_OPEN, -FI_EINVAL, "auto", 1,
	  1, 1, "1", POLICY_HMEM_REFUSED, H, "no CUDA library or device", "NCCL_FABRIC_HMEM=force",
	  NULL },
	{ "auto, ENOPROTOOPT on 1.17", V117, 1, P_OPEN, -FI_ENOPROTOOPT, "auto", 1, 1, 1, "1",
	  POLICY_HMEM_REFUSED, H, "does not know the option", "NCCL_FABRIC_HMEM=force", NULL },
	{ "auto, ENOPROTOOPT on 1.20", V120, 1, P_OPEN, -FI_ENOPROTOOPT, "auto", 1, 1, 1, "1",
	  POLICY_HMEM_REFUSED, H, "-FI_ENOPROTOOPT", NULL, NULL },
	{ "auto, another error", V118, 1, P_OPEN, OTHER_ERR, "auto", 1, 1, 1, "1",
	  POLICY_HMEM_REFUSED, H, "an unexpected error", NULL, NULL },
	/* force and no promise: used, with a warning */
	{ "force, EOPNOTSUPP", V120, 1, P_OPEN, -FI_EOPNOTSUPP, "force", 1, 1, 1, "1",
	  POLICY_HMEM_FORCED, HCD, "NCCL_FABRIC_HMEM=force", "-FI_EOPNOTSUPP", NULL },
	{ "force, EINVAL on 1.17, no DMA-BUF GPU", V117, 1, P_OPEN, -FI_EINVAL, "Force", 1, 1, 0, "1",
	  POLICY_HMEM_FORCED, HC, "NCCL_FABRIC_HMEM=force", "-FI_EINVAL", NULL },
	/* force where it cannot work: libfabric >= 1.18 says its CUDA support is off */
	{ "force refused, EINVAL on 1.20", V120, 1, P_OPEN, -FI_EINVAL, "force", 1, 1, 1, "1",
	  POLICY_HMEM_FORCE_REFUSED, H, "force is refused", "could not register GPU memory", NULL },
	{ "force refused, EINVAL on 2.0", V200, 1, P_OPEN, -FI_EINVAL, "force", 1, 1, 1, "1",
	  POLICY_HMEM_FORCE_REFUSED, H, "libfabric's CUDA support is not active", NULL, NULL },
	{ "force, ENOPROTOOPT on 1.17", V117, 1, P_OPEN, -FI_ENOPROTOOPT, "force", 1, 1, 1, "1",
	  POLICY_HMEM_FORCED, HC, "NCCL_FABRIC_HMEM=force", "does not know the option", NULL },
	{ "force, another error, DMABUF=0", V200, 1, P_OPEN, OTHER_ERR, "force", 1, 1, 1, "0",
	  POLICY_HMEM_FORCED, HC, "NCCL_FABRIC_HMEM=force", "an unexpected error", NULL },
};

static void hmem_inputs(const struct hmem_case *hc, struct policy_selection *sel,
			struct policy_probe *probe, struct policy_cuda_info *cuda, struct cfg_values *cfg)
{
	memset(sel, 0, sizeof(*sel));
	sel->ok = true;
	snprintf(sel->provider, sizeof(sel->provider), "prov-x");
	sel->has_hmem = hc->has_hmem;
	memset(probe, 0, sizeof(*probe));
	probe->attempted = hc->probe != P_NONE;
	probe->opened = hc->probe == P_OPEN;
	probe->cuda_api_permitted_rc = hc->probe == P_OPEN ? hc->rc : -FI_ENOPROTOOPT;
	probe->p2p_rc = -FI_ENOPROTOOPT;
	if (hc->probe == P_FAILED)
		snprintf(probe->error, sizeof(probe->error), "fi_endpoint: boom");
	memset(cuda, 0, sizeof(*cuda));
	cuda->driver = hc->driver;
	cuda->ngpus = hc->ngpus;
	cuda->dmabuf = hc->gpu_dmabuf;
	/* a driver with GPUs: cuFlushGPUDirectRDMAWrites exists, writes ordered (Hopper) */
	cuda->flush = hc->driver && hc->ngpus > 0;
	cuda->writes_ordered = cuda->flush;
	if (!hc->driver)
		snprintf(cuda->error, sizeof(cuda->error), "libcuda.so.1: not found");
	make_cfg(cfg, NULL, hc->mode, hc->dmabuf);
}

static int test_hmem_table(void)
{
	for (size_t i = 0; i < sizeof(hmem_cases) / sizeof(hmem_cases[0]); i++) {
		const struct hmem_case *hc = &hmem_cases[i];
		struct policy_selection *sel = calloc(1, sizeof(*sel));
		struct policy_probe probe;
		struct policy_cuda_info cuda;
		struct cfg_values cfg;
		struct policy_hmem_decision d;
		if (!sel)
			return 1;
		hmem_inputs(hc, sel, &probe, &cuda, &cfg);
		memset(&d, 0x5a, sizeof(d));
		policy_hmem(sel, &probe, &cuda, &cfg, hc->fi_version, &d);

		int before = unit_failures;
		int forced = hc->verdict == POLICY_HMEM_FORCED;
		int refused = hc->verdict == POLICY_HMEM_FORCE_REFUSED;
		int used = hc->verdict == POLICY_HMEM_PROMISED || forced;
		CHECK_EQ(d.verdict, hc->verdict);
		CHECK_EQ(d.use_hmem, used);
		CHECK_EQ(d.ptr_support, hc->ptr);
		CHECK_EQ(d.dmabuf, !!(hc->ptr & NCCL_PTR_DMABUF));
		/* a WARN exactly when forced, or when force was refused */
		CHECK_EQ(d.warning[0] != '\0', forced || refused);
		if (forced) {
			CHECK_STR_CONTAINS(d.warning, "prov-x");
			CHECK_STR_CONTAINS(d.warning, "deadlock");
		}
		if (refused) {
			CHECK_STR_CONTAINS(d.warning, "ignored");
			CHECK_STR_CONTAINS(d.remedy, "--with-cuda");
			CHECK_STR_CONTAINS(d.remedy, "FI_LOG_LEVEL=info");
		}
		CHECK(d.remedy[0] != '\0');
		CHECK(d.reason[0] != '\0');
		CHECK(d.dmabuf_reason[0] != '\0');
		CHECK(d.nccl_effect[0] != '\0');
		CHECK(d.answer[0] != '\0');
		CHECK(d.p2p[0] != '\0');
		if (hc->reason_has)
			CHECK_STR_CONTAINS(d.reason, hc->reason_has);
		if (hc->reason_has2)
			CHECK_STR_CONTAINS(d.reason, hc->reason_has2);
		if (hc->reason_lacks)
			CHECK(!strstr(d.reason, hc->reason_lacks));
		CHECK_EQ(d.expected_cuda_rc, probe.cuda_api_permitted_rc);
		/* the answer in words */
		if (hc->probe == P_OPEN)
			CHECK(!strcmp(d.answer, policy_cuda_answer(hc->rc, hc->fi_version)));
		else if (hc->probe == P_FAILED)
			CHECK_STR_CONTAINS(d.answer, "probe endpoint failed");
		else
			CHECK_STR_CONTAINS(d.answer, "no FI_HMEM");
		/* why DMA-BUF is (not) offered names the decisive fact */
		if (d.dmabuf)
			CHECK_STR_CONTAINS(d.dmabuf_reason, "yes");
		else if (!used)
			CHECK_STR_CONTAINS(d.dmabuf_reason, "GPU memory is not used");
		else if (!strcmp(hc->dmabuf, "0"))
			CHECK_STR_CONTAINS(d.dmabuf_reason, "NCCL_FABRIC_DMABUF=0");
		else if (hc->fi_version < V120)
			CHECK_STR_CONTAINS(d.dmabuf_reason, "needs 1.20");
		else
			CHECK_STR_CONTAINS(d.dmabuf_reason, "does not report DMA-BUF");
		CHECK_STR_CONTAINS(d.nccl_effect, used ? "NCCL_NET_GDR_LEVEL" : "stages every transfer");
		if (unit_failures != before)
			fprintf(stderr, "  ^ case %zu \"%s\": verdict %s, reason: %s\n", i, hc->what,
				policy_verdict_name(d.verdict), d.reason);
		free(sel);
	}
	return 0;
}

static int test_hmem_versions_text(void)
{
	/* the DMA-BUF reason quotes the runtime version it refused */
	const struct hmem_case *hc = NULL;
	for (size_t i = 0; i < sizeof(hmem_cases) / sizeof(hmem_cases[0]); i++)
		if (!strcmp(hmem_cases[i].what, "promised, 1.18: no DMA-BUF"))
			hc = &hmem_cases[i];
	CHECK(hc != NULL);
	if (!hc)
		return 1;
	struct policy_selection *sel = calloc(1, sizeof(*sel));
	struct policy_probe probe;
	struct policy_cuda_info cuda;
	struct cfg_values cfg;
	struct policy_hmem_decision d;
	hmem_inputs(hc, sel, &probe, &cuda, &cfg);
	policy_hmem(sel, &probe, &cuda, &cfg, FI_VERSION(1, 19), &d);
	CHECK_STR_CONTAINS(d.dmabuf_reason, "libfabric 1.19");
	/* no provider selected at all */
	sel->ok = false;
	policy_hmem(sel, &probe, &cuda, &cfg, V120, &d);
	CHECK_EQ(d.verdict, POLICY_HMEM_NO_PROVIDER);
	CHECK_STR_CONTAINS(d.reason, "(none)");
	free(sel);
	return 0;
}

static int test_hmem_sweep(void)
{
	/* every combination: the decision's invariants */
	static const uint32_t versions[] = { V117, V118, V120, V200 };
	static const int rcs[] = { 0, -FI_EOPNOTSUPP, -FI_EINVAL, -FI_ENOPROTOOPT, OTHER_ERR };
	static const char *const modes[] = { "auto", "force", "off" };
	struct policy_selection *sel = calloc(1, sizeof(*sel));
	if (!sel)
		return 1;
	int n = 0, bad = 0;
	for (int v = 0; v < 4; v++)
	for (int hm = 0; hm < 2; hm++)
	for (int pk = 0; pk < 3; pk++)
	for (int r = 0; r < 5; r++)
	for (int m = 0; m < 3; m++)
	for (int drv = 0; drv < 2; drv++)
	for (int ng = 0; ng < 2; ng++)
	for (int gd = 0; gd < 2; gd++)
	for (int cd = 0; cd < 2; cd++) {
		struct hmem_case hc = { "sweep", versions[v], hm, (enum probe_kind)pk, rcs[r], modes[m],
					drv, ng, gd, cd ? "1" : "0", 0, 0, NULL, NULL, NULL };
		struct policy_probe probe;
		struct policy_cuda_info cuda;
		struct cfg_values cfg;
		struct policy_hmem_decision d;
		hmem_inputs(&hc, sel, &probe, &cuda, &cfg);
		policy_hmem(sel, &probe, &cuda, &cfg, hc.fi_version, &d);
		n++;
		int gpu = drv && ng;
		int ok = 1;
		/* the decisive fact, in the order the policy documents */
		enum policy_hmem_verdict want =
			m == 2 ? POLICY_HMEM_NO_SETTING :
			!hm ? POLICY_HMEM_NO_PROVIDER :
			!gpu ? POLICY_HMEM_NO_GPU :
			pk != P_OPEN ? POLICY_HMEM_PROBE_FAILED :
			rcs[r] == 0 ? POLICY_HMEM_PROMISED :
			m == 1 && rcs[r] == -FI_EINVAL && versions[v] >= V118 ? POLICY_HMEM_FORCE_REFUSED :
			m == 1 ? POLICY_HMEM_FORCED : POLICY_HMEM_REFUSED;
		ok &= d.verdict == want;
		ok &= d.use_hmem == (want == POLICY_HMEM_PROMISED || want == POLICY_HMEM_FORCED);
		ok &= (d.warning[0] != '\0') ==
		      (want == POLICY_HMEM_FORCED || want == POLICY_HMEM_FORCE_REFUSED);
		ok &= d.remedy[0] != '\0';
		ok &= d.dmabuf == (d.use_hmem && cd && versions[v] >= V120 && gd);
		ok &= d.ptr_support == (NCCL_PTR_HOST | (d.use_hmem ? NCCL_PTR_CUDA : 0) |
					(d.dmabuf ? NCCL_PTR_DMABUF : 0));
		ok &= d.reason[0] != '\0';
		if (!ok && bad++ < 5)
			fprintf(stderr, "  sweep v=0x%x hmem=%d probe=%d rc=%d mode=%s drv=%d ngpus=%d "
				"gpu_dmabuf=%d DMABUF=%d: verdict %d (want %d) use %d dmabuf %d ptr 0x%x\n",
				versions[v], hm, pk, rcs[r], modes[m], drv, ng, gd, cd, d.verdict, want,
				d.use_hmem, d.dmabuf, d.ptr_support);
	}
	CHECK_EQ(n, 4 * 2 * 3 * 5 * 3 * 2 * 2 * 2 * 2);
	CHECK_EQ(bad, 0);
	free(sel);
	return 0;
}

static int test_hmem_p2p_words(void)
{
	static const struct { int p2p; const char *has; } cases[] = {
		{ FI_HMEM_P2P_ENABLED, "GPUDirect enabled" },
		{ FI_HMEM_P2P_REQUIRED, "GPUDirect required" },
		{ FI_HMEM_P2P_PREFERRED, "GPUDirect preferred" },
		{ FI_HMEM_P2P_DISABLED, "no GPUDirect" },
		{ 77, "unknown stance 77" },
	};
	struct policy_selection *sel = calloc(1, sizeof(*sel));
	if (!sel)
		return 1;
	struct policy_probe probe;
	struct policy_cuda_info cuda;
	struct cfg_values cfg;
	struct policy_hmem_decision d;
	const struct hmem_case *hc = &hmem_cases[10]; /* promised, 1.20 */
	CHECK_EQ(hc->verdict, POLICY_HMEM_PROMISED);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		hmem_inputs(hc, sel, &probe, &cuda, &cfg);
		probe.p2p_rc = 0;
		probe.p2p = cases[i].p2p;
		policy_hmem(sel, &probe, &cuda, &cfg, V120, &d);
		CHECK_STR_CONTAINS(d.p2p, cases[i].has);
		CHECK_STR_CONTAINS(d.reason, cases[i].has); /* the promise sentence carries it */
	}
	hmem_inputs(hc, sel, &probe, &cuda, &cfg);
	probe.p2p_rc = -FI_ENOPROTOOPT;
	policy_hmem(sel, &probe, &cuda, &cfg, V120, &d);
	CHECK_STR_CONTAINS(d.p2p, "not reported");
	probe.opened = false;
	policy_hmem(sel, &probe, &cuda, &cfg, V120, &d);
	CHECK_STR_CONTAINS(d.p2p, "not asked");
	free(sel);
	return 0;
}

static int test_policy_words(void)
{
	static const int rcs[] = { 0, -FI_EOPNOTSUPP, -FI_EINVAL, -FI_ENOPROTOOPT, OTHER_ERR };
	static const uint32_t vers[] = { V117, V120 };
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < 5; i++) {
			CHECK(policy_cuda_answer(rcs[i], vers[k])[0] != '\0');
			for (int j = 0; j < i; j++)
				CHECK(strcmp(policy_cuda_answer(rcs[i], vers[k]),
					     policy_cuda_answer(rcs[j], vers[k])) != 0);
		}
		CHECK_STR_CONTAINS(policy_cuda_answer(0, vers[k]), "promises");
		CHECK(!strcmp(policy_cuda_answer(-FI_EAGAIN, vers[k]),
			      policy_cuda_answer(OTHER_ERR, vers[k])));
	}
	/* what -FI_EINVAL and -FI_ENOPROTOOPT mean depends on the version */
	CHECK_STR_CONTAINS(policy_cuda_answer(-FI_EINVAL, V120), "libfabric's CUDA support");
	CHECK(!strstr(policy_cuda_answer(-FI_EINVAL, V117), "libfabric's CUDA support"));
	CHECK_STR_CONTAINS(policy_cuda_answer(-FI_ENOPROTOOPT, V117), "1.18");
	CHECK(!strstr(policy_cuda_answer(-FI_ENOPROTOOPT, V200), "1.18"));
	for (int v = POLICY_HMEM_NO_SETTING; v <= POLICY_HMEM_FORCE_REFUSED; v++) {
		const char *name = policy_verdict_name((enum policy_hmem_verdict)v);
		CHECK(strcmp(name, "?") != 0);
		for (int w = POLICY_HMEM_NO_SETTING; w < v; w++)
			CHECK(strcmp(name, policy_verdict_name((enum policy_hmem_verdict)w)) != 0);
	}
	CHECK(!strcmp(policy_verdict_name((enum policy_hmem_verdict)99), "?"));
	return 0;
}

/* iflush needs a way to order GPU writes: RDMA read, else the CUDA driver's
 * flush, else GPU memory is not offered; forceFlush follows write ordering. */
static int test_hmem_flush(void)
{
	struct policy_selection sel;
	struct policy_probe probe;
	struct policy_cuda_info cuda;
	struct cfg_values cfg;
	struct policy_hmem_decision d;
	struct fi_info *hi = fi_allocinfo();
	memset(&sel, 0, sizeof(sel));
	sel.ok = true;
	sel.has_hmem = true;
	sel.ndevs = 1;
	sel.devs[0].hmem_info = hi;
	snprintf(sel.provider, sizeof(sel.provider), "prov-x");
	memset(&probe, 0, sizeof(probe));
	probe.attempted = probe.opened = true;
	probe.cuda_api_permitted_rc = 0;
	probe.p2p_rc = -FI_ENOPROTOOPT;
	memset(&cuda, 0, sizeof(cuda));
	cuda.driver = true;
	cuda.ngpus = 1;

	/* no FI_RMA, no cuFlushGPUDirectRDMAWrites: host only, with a WARN */
	make_cfg(&cfg, NULL, "auto", NULL);
	hi->caps = FI_TAGGED | FI_MSG | FI_HMEM;
	policy_hmem(&sel, &probe, &cuda, &cfg, FI_VERSION(1, 18), &d);
	CHECK_EQ(d.verdict, POLICY_HMEM_NO_FLUSH);
	CHECK(!d.use_hmem);
	CHECK_EQ(d.ptr_support, NCCL_PTR_HOST);
	CHECK_EQ(d.flush, POLICY_FLUSH_NONE);
	CHECK(d.warning[0]);
	CHECK_STR_CONTAINS(d.reason, "cuFlushGPUDirectRDMAWrites");

	/* the driver's flush only */
	cuda.flush = true;
	policy_hmem(&sel, &probe, &cuda, &cfg, FI_VERSION(1, 18), &d);
	CHECK_EQ(d.verdict, POLICY_HMEM_PROMISED);
	CHECK_EQ(d.flush, POLICY_FLUSH_CUDA);
	CHECK(!d.warning[0]);

	/* FI_RMA|FI_READ: RDMA read is preferred ... */
	hi->caps |= FI_RMA | FI_READ;
	policy_hmem(&sel, &probe, &cuda, &cfg, FI_VERSION(1, 18), &d);
	CHECK_EQ(d.flush, POLICY_FLUSH_RMA_READ);
	CHECK_STR_CONTAINS(d.flush_reason, "RDMA read");
	/* ... unless the setting asks for the driver */
	make_cfg(&cfg, NULL, "auto", NULL);
	cfg_parse(&cfg_descs[CFG_FLUSH], "cuda", &cfg.v[CFG_FLUSH]);
	policy_hmem(&sel, &probe, &cuda, &cfg, FI_VERSION(1, 18), &d);
	CHECK_EQ(d.flush, POLICY_FLUSH_CUDA);
	/* rma asked, provider without RMA: not offered */
	cfg_parse(&cfg_descs[CFG_FLUSH], "rma", &cfg.v[CFG_FLUSH]);
	hi->caps &= ~(uint64_t)(FI_RMA | FI_READ);
	policy_hmem(&sel, &probe, &cuda, &cfg, FI_VERSION(1, 18), &d);
	CHECK_EQ(d.verdict, POLICY_HMEM_NO_FLUSH);
	CHECK_STR_CONTAINS(d.reason, "NCCL_FABRIC_FLUSH=rma");

	/* forceFlush: only when GPU memory is used and writes are not ordered */
	make_cfg(&cfg, NULL, "auto", NULL);
	cuda.writes_ordered = true;
	policy_hmem(&sel, &probe, &cuda, &cfg, FI_VERSION(1, 18), &d);
	CHECK(!d.force_flush);
	cuda.writes_ordered = false;
	policy_hmem(&sel, &probe, &cuda, &cfg, FI_VERSION(1, 18), &d);
	CHECK(d.force_flush);
	make_cfg(&cfg, NULL, "off", NULL);
	policy_hmem(&sel, &probe, &cuda, &cfg, FI_VERSION(1, 18), &d);
	CHECK(!d.force_flush);
	CHECK_EQ(d.flush, POLICY_FLUSH_NONE);
	fi_freeinfo(hi);
	return 0;
}

/* Rails, threads and the eager limit: chosen from the CPUs and the
 * provider's traits, settings win, and the reason says which. */
static int test_datapath_defaults(void)
{
	struct policy_rails_choice c;
	struct policy_rails_input in = { .ncpus = 16, .nprocs = 2 };
	/* auto: half the CPUs each process gets, at most 4 */
	policy_rails(&in, &c);
	CHECK_EQ(c.rails, 4);
	CHECK(c.threads); /* auto: threads with several rails */
	CHECK_STR_CONTAINS(c.reason, "4 (auto: 16 CPUs for this process, 2 plugin processes");
	in.nprocs = 8; /* 8 ranks share 16 CPUs: one rail each */
	policy_rails(&in, &c);
	CHECK_EQ(c.rails, 1);
	CHECK(!c.threads);
	in.nprocs = 4;
	policy_rails(&in, &c);
	CHECK_EQ(c.rails, 2);
	in.nprocs = 0; /* not counted: this process alone */
	in.ncpus = 2;
	policy_rails(&in, &c);
	CHECK_EQ(c.rails, 1);
	in.ncpus = 128;
	in.nprocs = 1;
	policy_rails(&in, &c);
	CHECK_EQ(c.rails, POLICY_AUTO_RAILS_MAX);
	in.nprocs = 200; /* more processes than CPUs */
	policy_rails(&in, &c);
	CHECK_EQ(c.rails, 1);
	in = (struct policy_rails_input){ .ncpus = 64, .nprocs = 1, .one_rail_why = "a reason" };
	policy_rails(&in, &c); /* the traits say one */
	CHECK_EQ(c.rails, 1);
	CHECK_STR_CONTAINS(c.reason, "1 (auto: a reason)");
	/* the setting wins */
	in = (struct policy_rails_input){ .ncpus = 2, .nprocs = 8, .one_rail_why = "x", .cfg_rails = 3,
					  .threads_mode = 2 };
	policy_rails(&in, &c);
	CHECK_EQ(c.rails, 3);
	CHECK(!c.threads);
	CHECK_STR_CONTAINS(c.reason, "NCCL_FABRIC_RAILS");
	in.cfg_rails = 1;
	in.threads_mode = 1;
	policy_rails(&in, &c);
	CHECK_EQ(c.rails, 1);
	CHECK(c.threads);

	/* large messages: RMA writes where the entry has them, else tagged */
	struct fi_info *fi = fi_allocinfo();
	CHECK(fi != NULL);
	struct policy_data_path dp;
	fi->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_WRITE | FI_REMOTE_WRITE | FI_READ;
	fi->domain_attr->cq_data_size = 8;
	policy_data_path(true, false, NULL, "tcp", fi, NULL, &dp);
	CHECK(dp.rma);
	CHECK_STR_CONTAINS(dp.reason, "RMA writes into the receiver's buffer (tcp has FI_RMA");
	policy_data_path(false, false, NULL, "tcp", fi, NULL, &dp);
	CHECK(!dp.rma);
	CHECK_STR_CONTAINS(dp.reason, "(NCCL_FABRIC_RMA=0)");
	/* a provider the traits advise against: tagged, unless asked in the environment */
	policy_data_path(true, false, "a quirk", "tcp;ofi_rxm", fi, NULL, &dp);
	CHECK(!dp.rma);
	CHECK_STR_CONTAINS(dp.reason, "(a quirk; NCCL_FABRIC_RMA=1 asks for RMA writes)");
	policy_data_path(true, true, "a quirk", "tcp;ofi_rxm", fi, NULL, &dp);
	CHECK(dp.rma);
	CHECK_STR_CONTAINS(dp.reason, "against the default here: a quirk");
	policy_data_path(false, true, "a quirk", "tcp;ofi_rxm", fi, NULL, &dp);
	CHECK(!dp.rma);
	CHECK_STR_CONTAINS(dp.reason, "(NCCL_FABRIC_RMA=0)");
	/* 4 bytes (EFA, verbs, opx): writes, the size summed from the completions */
	fi->domain_attr->cq_data_size = 4;
	policy_data_path(true, false, NULL, "x", fi, NULL, &dp);
	CHECK(dp.rma);
	CHECK_STR_CONTAINS(dp.reason, "4 bytes of remote CQ data: the receiver sums the size");
	fi->domain_attr->cq_data_size = 3;
	policy_data_path(true, false, NULL, "x", fi, NULL, &dp);
	CHECK(!dp.rma);
	CHECK_STR_CONTAINS(dp.reason, "x: the provider's remote CQ data is shorter than 4 bytes");
	fi->domain_attr->cq_data_size = 8;
	/* FI_RX_CQ_DATA: the control receives take the writes' CQ data */
	fi->mode |= FI_RX_CQ_DATA;
	policy_data_path(true, false, NULL, "x", fi, NULL, &dp);
	CHECK(dp.rma);
	CHECK_STR_CONTAINS(dp.reason, "FI_RX_CQ_DATA: each write takes a control receive, "
				      "posted again unread");
	CHECK(policy_writes_fit(fi));
	fi->mode = 0;
	policy_data_path(true, false, NULL, "x", fi, NULL, &dp);
	CHECK(!strstr(dp.reason, "FI_RX_CQ_DATA"));
	/* cxi: writes carry CQ data only with FI_CXI_ENABLE_WRITEDATA=1, even when asked */
	policy_data_path(true, true, NULL, "cxi", fi, NULL, &dp);
	CHECK(!dp.rma);
	CHECK_STR_CONTAINS(dp.reason, "cxi: cxi sends remote CQ data with writes only when "
				      "FI_CXI_ENABLE_WRITEDATA=1 is set");
	policy_data_path(true, false, NULL, "cxi;testhmem", fi, "0", &dp);
	CHECK(!dp.rma);
	policy_data_path(true, false, NULL, "cxi;testhmem", fi, "1", &dp);
	CHECK(dp.rma);
	policy_data_path(true, false, NULL, "cxip", fi, NULL, &dp);
	CHECK(dp.rma);
	fi->caps &= ~FI_REMOTE_WRITE;
	policy_data_path(true, false, NULL, "x", fi, NULL, &dp);
	CHECK(!dp.rma);
	CHECK_STR_CONTAINS(dp.reason, "no FI_RMA with remote writes");
	policy_data_path(true, false, NULL, NULL, NULL, NULL, &dp);
	CHECK(!dp.rma);
	fi_freeinfo(fi);
	char why[96];
	struct policy_traits stream = { .stream = true, .eager_default = POLICY_STREAM_EAGER };
	struct policy_traits inject = { .eager_default = 4096 };
	struct policy_traits none = { .eager_default = 0 };
	CHECK_EQ(policy_eager(&stream, -1, why, sizeof(why)), 65536);
	CHECK_STR_CONTAINS(why, "stream provider");
	CHECK_EQ(policy_eager(&inject, -1, why, sizeof(why)), 4096);
	CHECK_STR_CONTAINS(why, "inject size");
	struct policy_traits rxm = { .stream = true, .eager_default = POLICY_RXM_BUFFER,
					 .whole_max = POLICY_RXM_BUFFER };
	CHECK_EQ(policy_eager(&rxm, -1, why, sizeof(why)), POLICY_RXM_BUFFER);
	CHECK_STR_CONTAINS(why, "wait for the CTS)");
	CHECK_EQ(policy_eager(&none, -1, why, sizeof(why)), 0);
	CHECK_EQ(policy_eager(&stream, 0, why, sizeof(why)), 0);
	CHECK_STR_CONTAINS(why, "NCCL_FABRIC_EAGER_MAX");

	/* early sends: auto takes the provider's count, an explicit count is
	 * kept where the provider allows any and ignored elsewhere, and a size
	 * limit not above the eager limit turns them off */
	char ewhy[POLICY_REASON_LEN];
	size_t emax = 1;
	struct policy_traits tcp = { .stream = true, .eager_default = POLICY_STREAM_EAGER,
				     .early_sends = POLICY_EARLY_SENDS };
	CHECK_EQ(policy_early(&tcp, -1, 262144, 65536, &emax, ewhy, sizeof(ewhy)),
		 POLICY_EARLY_SENDS);
	CHECK_EQ(emax, 262144);
	CHECK_STR_CONTAINS(ewhy, "auto: native tcp");
	CHECK_EQ(policy_early(&tcp, 8, 1048576, 65536, &emax, ewhy, sizeof(ewhy)), 8);
	CHECK_EQ(emax, 1048576);
	CHECK_STR_CONTAINS(ewhy, "NCCL_FABRIC_EARLY_SENDS");
	CHECK_EQ(policy_early(&tcp, 0, 262144, 65536, &emax, ewhy, sizeof(ewhy)), 0);
	CHECK_STR_CONTAINS(ewhy, "NCCL_FABRIC_EARLY_SENDS=0");
	CHECK_EQ(policy_early(&tcp, -1, 65536, 65536, &emax, ewhy, sizeof(ewhy)), 0);
	CHECK_STR_CONTAINS(ewhy, "not above the eager limit");
	CHECK_EQ(policy_early(&rxm, -1, 262144, POLICY_RXM_BUFFER, &emax, ewhy, sizeof(ewhy)), 0);
	CHECK_STR_CONTAINS(ewhy, "auto: the provider may not take them");
	CHECK_EQ(policy_early(&rxm, 4, 262144, POLICY_RXM_BUFFER, &emax, ewhy, sizeof(ewhy)), 0);
	CHECK_STR_CONTAINS(ewhy, "NCCL_FABRIC_EARLY_SENDS=4 ignored");
	return 0;
}

/* One device's plan gathers the decisions the data path reads: a tagged
 * entry with writes, a writes-only entry (no eager messages, 64-bit layout),
 * the settings' timeouts and fixed rails, and the GPU-memory flush. */
static int test_device_plan(void)
{
	struct cfg_values cfg;
	make_cfg(&cfg, NULL, NULL, NULL);
	cfg.v[CFG_RAILS].i = 2;
	struct fi_info *fi = fi_allocinfo();
	CHECK(fi != NULL);
	fi->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_WRITE | FI_REMOTE_WRITE | FI_READ;
	fi->domain_attr->cq_data_size = 4;
	fi->ep_attr->mem_tag_format = 0xaaaaaaaaaaaaaaaaULL; /* 64 bits */
	fi->tx_attr->inject_size = 4096;
	struct policy_hmem_decision hmem = { .flush = POLICY_FLUSH_RMA_READ, .dmabuf = true,
					     .expected_cuda_rc = -FI_EOPNOTSUPP };
	struct policy_device_input in = { .info = fi, .provider = "efa", .fi_version = FI_VERSION(1, 17),
					  .cfg = &cfg, .hmem = &hmem, .gpu = true, .ncpus = 8, .nprocs = 1 };
	struct policy_device_plan plan;
	struct policy_device_why why;
	policy_device(&in, &plan, &why);
	CHECK(plan.hmem && !plan.writes_only && plan.rma);
	CHECK_EQ(plan.tag_bits, 64);
	CHECK(plan.eager_max > 0);
	CHECK(why.eager[0] && why.data[0] && why.rails[0]);
	CHECK_EQ(plan.early_sends, 0); /* efa: none */
	CHECK_STR_CONTAINS(why.early, "none");
	CHECK_EQ(plan.nrails, 2);
	CHECK_EQ(plan.rails_in.cfg_rails, 2);
	CHECK(plan.flush_rma && plan.dmabuf);
	CHECK_EQ(plan.expected_cuda_rc, -FI_EOPNOTSUPP);
	CHECK_EQ(plan.timeout_ns, (uint64_t)cfg.v[CFG_TIMEOUT].i * 1000000000ULL);
	CHECK_EQ(plan.peer_timeout_ns, (uint64_t)cfg.v[CFG_PEER_TIMEOUT].i * 1000000000ULL);
	/* host memory: no RDMA-read flush */
	in.gpu = false;
	policy_device(&in, &plan, &why);
	CHECK(!plan.hmem && !plan.flush_rma);
	/* no tags: every message an RMA write after its CTS, nothing eager */
	fi->caps &= ~FI_TAGGED;
	fi->ep_attr->mem_tag_format = 0;
	policy_device(&in, &plan, &why);
	CHECK(plan.writes_only && plan.rma);
	CHECK_EQ(plan.eager_max, 0);
	CHECK_EQ(plan.tag_bits, 64);
	CHECK_STR_CONTAINS(why.eager, "no FI_TAGGED");
	CHECK_EQ(plan.early_sends, 0);
	/* native tcp: early sends of up to NCCL_FABRIC_EARLY_MAX */
	fi->caps |= FI_TAGGED;
	fi->ep_attr->mem_tag_format = 0xaaaaaaaaaaaaaaaaULL;
	fi->fabric_attr->prov_name = strdup("tcp");
	in.provider = "tcp";
	policy_device(&in, &plan, &why);
	CHECK_EQ(plan.early_sends, POLICY_EARLY_SENDS);
	CHECK_EQ(plan.early_max, (size_t)cfg.v[CFG_EARLY_MAX].i);
	CHECK_STR_CONTAINS(why.early, "native tcp");
	fi_freeinfo(fi);
	return 0;
}

/* NCCL's RMA plugin: offered or not, GPU or host windows, signals and their
 * order, for every setting and the capabilities that decide. */
static int test_rma_verdict(void)
{
	const uint64_t rw = FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	struct policy_hmem_decision gpu, host;
	memset(&gpu, 0, sizeof(gpu));
	memset(&host, 0, sizeof(host));
	gpu.use_hmem = true;
	gpu.verdict = POLICY_HMEM_PROMISED;
	snprintf(host.reason, sizeof(host.reason), "host memory only: no GPU");
	static const struct {
		int mode;
		uint64_t caps, order;
		bool hmem_entry, gpu_decision;
		bool offered, gpu, msgs;
		enum policy_rma_order how;
		const char *reason_has;
	} rows[] = {
		/* auto: GPU memory and atomics */
		{ CFG_RMA_PLUGIN_AUTO, rw | FI_ATOMIC | FI_HMEM, 0, true, true, true, true, false,
		  POLICY_RMA_ORDER_CHAIN, "offered on GPU" },
		{ CFG_RMA_PLUGIN_AUTO, rw | FI_ATOMIC | FI_HMEM, FI_ORDER_WAW, true, true, true, true,
		  false, POLICY_RMA_ORDER_PROVIDER, "offered on GPU" },
		/* RMA-only order bits do not order an atomic behind a write */
		{ CFG_RMA_PLUGIN_AUTO, rw | FI_ATOMIC | FI_HMEM, FI_ORDER_RMA_WAW | FI_ORDER_ATOMIC_WAW,
		  true, true, true, true, false, POLICY_RMA_ORDER_CHAIN, "offered on GPU" },
		{ CFG_RMA_PLUGIN_AUTO, rw | FI_ATOMIC | FI_FENCE | FI_HMEM, 0, true, true, true, true,
		  false, POLICY_RMA_ORDER_FENCE, "offered on GPU" },
		/* auto without GPU memory, or without atomics for GPU signals */
		{ CFG_RMA_PLUGIN_AUTO, rw | FI_ATOMIC, 0, false, false, false, false, false,
		  POLICY_RMA_ORDER_CHAIN, "not offered: no GPU windows" },
		{ CFG_RMA_PLUGIN_AUTO, rw | FI_MSG | FI_HMEM, FI_ORDER_SAW, true, true, false, false,
		  true, POLICY_RMA_ORDER_PROVIDER, "no FI_ATOMIC" },
		/* force: host memory; native tcp's messages ordered by FI_ORDER_SAW */
		{ CFG_RMA_PLUGIN_FORCE, rw | FI_ATOMIC, 0, false, false, true, false, false,
		  POLICY_RMA_ORDER_CHAIN, "host memory only" },
		{ CFG_RMA_PLUGIN_FORCE, rw | FI_MSG, FI_ORDER_SAW | FI_ORDER_WAW, false, false, true,
		  false, true, POLICY_RMA_ORDER_PROVIDER, "host memory only" },
		/* missing capabilities, and off */
		{ CFG_RMA_PLUGIN_FORCE, FI_MSG | FI_ATOMIC, 0, false, false, false, false, false,
		  POLICY_RMA_ORDER_CHAIN, "lacks FI_RMA" },
		{ CFG_RMA_PLUGIN_FORCE, rw, 0, false, false, false, false, false,
		  POLICY_RMA_ORDER_CHAIN, "FI_ATOMIC and FI_MSG" },
		{ CFG_RMA_PLUGIN_OFF, rw | FI_ATOMIC | FI_HMEM, 0, true, true, false, false, false,
		  POLICY_RMA_ORDER_CHAIN, "NCCL_FABRIC_RMA_PLUGIN=off" },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct policy_rma_caps caps = { rows[i].caps, rows[i].order, rows[i].hmem_entry };
		struct policy_rma_decision d;
		policy_rma(rows[i].mode, "prov", &caps, rows[i].gpu_decision ? &gpu : &host, &d);
		if (d.offered != rows[i].offered || d.gpu != rows[i].gpu ||
		    d.msg_signals != rows[i].msgs || d.order != rows[i].how)
			fprintf(stderr, "  row %zu: %s / %s\n", i, d.reason, d.order_reason);
		CHECK_EQ(d.offered, rows[i].offered);
		CHECK_EQ(d.gpu, rows[i].gpu);
		CHECK_EQ(d.msg_signals, rows[i].msgs);
		CHECK_EQ(d.order, rows[i].how);
		CHECK_STR_CONTAINS(d.reason, rows[i].reason_has);
		CHECK(d.order_reason[0] != 0);
		CHECK_EQ(d.warning[0] != 0, rows[i].mode == CFG_RMA_PLUGIN_FORCE && d.offered);
	}
	return 0;
}

static const struct unit_test tests[] = {
	TEST_ENTRY(test_rma_verdict, "RMA plugin: offered or not, windows, signals and their order"),
	TEST_ENTRY(test_device_plan, "one device's plan: the data path's decisions and their reasons"),
	TEST_ENTRY(test_datapath_defaults, "rails, progress threads and eager limit from provider and CPUs"),
	TEST_ENTRY(test_hmem_flush, "flush method and forceFlush follow RMA, driver and write ordering"),
	TEST_ENTRY(test_plan_unnamed, "plan: FI_HMEM first, RMA variants, remote only when unnamed"),
	TEST_ENTRY(test_plan_named, "plan: a named provider adds the single-host pass"),
	TEST_ENTRY(test_plan_api_version, "plan: api_version capped between 1.17 and 1.22"),
	TEST_ENTRY(test_tag_bits, "tag bits from mem_tag_format, generic patterns are 64"),
	TEST_ENTRY(test_name_matches, "provider names: full name, or the core name of a layered one"),
	TEST_ENTRY(test_select_first_wins, "the first usable provider in discovery order wins"),
	TEST_ENTRY(test_select_no_tags, "a provider without tags is used for its RMA writes, asked last"),
	TEST_ENTRY(test_select_instance_with_writes,
		   "of two instances of one domain, the one whose CQ data carries writes is used"),
	TEST_ENTRY(test_select_include_order, "NCCL_FABRIC_PROVIDER order beats discovery order"),
	TEST_ENTRY(test_select_exclude, "^name excludes (core name too), beats include"),
	TEST_ENTRY(test_select_single_host, "single-host providers only when named"),
	TEST_ENTRY(test_select_rejections, "mode, mr_mode, tag bits, ep type, caps rejected with reasons"),
	TEST_ENTRY(test_select_none, "no usable provider: ok=false with a reason"),
	TEST_ENTRY(test_select_one_device_per_domain, "one device per domain (lo IPv4+IPv6 is one)"),
	TEST_ENTRY(test_select_loopback, "loopback only when no real interface of the provider"),
	TEST_ENTRY(test_select_hmem_host_per_device, "hmem_info and host_info per device"),
	TEST_ENTRY(test_select_twins, "identical entries of an attempt count as twins"),
	TEST_ENTRY(test_select_template, "a bare template entry (2.x, FI_REMOTE_COMM on loopback) is rejected"),
	TEST_ENTRY(test_select_native_tcp_names, "\"tcp\" names native tcp where listed, else tcp;ofi_rxm"),
	TEST_ENTRY(test_select_legacy_api, "a provider found only at API 1.17 is used; repeats are twins"),
	TEST_ENTRY(test_select_limits, "more than 32 devices, more than 256 candidates"),
	TEST_ENTRY(test_select_realistic_tcp, "this host's tcp;ofi_rxm listing gives one eth0 device"),
	TEST_ENTRY(test_hmem_table, "GPU-memory decision table: verdict, ptr bits, warning, reason"),
	TEST_ENTRY(test_hmem_versions_text, "DMA-BUF reason quotes the version; no provider"),
	TEST_ENTRY(test_hmem_sweep, "GPU-memory decision invariants over every input combination"),
	TEST_ENTRY(test_hmem_p2p_words, "GPUDirect stance in words"),
	TEST_ENTRY(test_policy_words, "answer and verdict names are distinct"),
};

int main(int argc, char **argv)
{
	return unit_main(tests, argc, argv);
}
