/*
 * ofi_discover.c - runs the policy's discovery plan through fi_getinfo and
 * opens the probe endpoint. The decisions themselves are in policy/.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_cm.h>

#include "ofi/ofi.h"
#include "log/log.h"
#include "util/util.h"

const char *ofi_strerror(int rc)
{
	int code = rc < 0 ? -rc : rc;
	if (code == OFI_ECUDA)
		return "CUDA driver call failed";
	return fi_strerror(code);
}

static struct fi_info *make_hints(const struct policy_attempt_plan *p)
{
	struct fi_info *h = fi_allocinfo();
	if (!h)
		return NULL;
	h->caps = p->caps;
	h->mode = p->mode;
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->mr_mode = p->mr_mode;
	h->domain_attr->threading = FI_THREAD_SAFE;
	/* Completions are needed for every operation we post. */
	h->tx_attr->op_flags = FI_COMPLETION;
	h->rx_attr->op_flags = FI_COMPLETION;
	return h;
}

/* Asks again for the provider of a template entry (policy_is_template) at the
 * loopback address; returns that provider's own entries, or NULL. */
static struct fi_info *reask_loopback(const struct policy_attempt_plan *p,
				      const struct fi_info *tmpl)
{
	struct fi_info *h = make_hints(p), *got = NULL, *keep = NULL, **tail = &keep;
	if (!h)
		return NULL;
	h->fabric_attr->prov_name = strdup(tmpl->fabric_attr->prov_name);
	if (h->fabric_attr->prov_name &&
	    fi_getinfo(p->api_version, POLICY_LOOPBACK_NODE, NULL, FI_SOURCE, h, &got) == 0) {
		/* a core provider's name also lists the utility providers over it */
		while (got) {
			struct fi_info *i = got;
			got = i->next;
			i->next = NULL;
			if (!strcmp(i->fabric_attr->prov_name, tmpl->fabric_attr->prov_name) &&
			    !policy_is_template(i)) {
				*tail = i;
				tail = &i->next;
			} else {
				fi_freeinfo(i);
			}
		}
	}
	fi_freeinfo(h);
	return keep;
}

/* Puts each template entry's loopback entries in its place, so the provider
 * keeps its rank in libfabric's order. */
static void replace_templates(const struct policy_attempt_plan *p, struct fi_info **list)
{
	for (struct fi_info **at = list; *at;) {
		struct fi_info *t = *at;
		struct fi_info *got = policy_is_template(t) ? reask_loopback(p, t) : NULL;
		if (!got) {
			at = &t->next;
			continue;
		}
		LOG_TRACE(NCCL_INIT | NCCL_NET, "discovery: %s listed bare (no interface but loopback "
			  "it may use); asked again at " POLICY_LOOPBACK_NODE,
			  t->fabric_attr->prov_name);
		struct fi_info *last = got;
		while (last->next)
			last = last->next;
		last->next = t->next;
		t->next = NULL;
		fi_freeinfo(t);
		*at = got;
		at = &last->next;
	}
}

/* Sets the selected provider's variable (policy_traits.c) where the
 * environment has none. The provider reads it when each endpoint opens, and
 * none is open yet: discovery only asks fi_getinfo. */
static void apply_provider_env(struct ofi_discovery *d)
{
	const struct fi_info *info = NULL;
	for (int i = 0; i < d->sel.ndevs && !info; i++)
		info = d->sel.devs[i].host_info ? d->sel.devs[i].host_info : d->sel.devs[i].hmem_info;
	struct policy_traits t;
	policy_traits_for(info, d->runtime_version, &t);
	if (!t.env_name)
		return;
	const char *user = getenv(t.env_name);
	if (user && !strcmp(user, t.env_value)) {
		/* the user's, or this plugin's from an earlier init in this process */
		snprintf(d->env_note, sizeof(d->env_note), "%s=%s already set: %s", t.env_name,
			 user, t.env_why);
		return;
	}
	if (user) {
		d->env_kept = true;
		snprintf(d->env_note, sizeof(d->env_note),
			 "%s=%s kept from the environment; unset it to have the plugin set %s: %s", t.env_name,
			 user, t.env_value, t.env_why);
		return;
	}
	if (setenv(t.env_name, t.env_value, 0))
		snprintf(d->env_note, sizeof(d->env_note), "%s=%s could not be set (%s): %s",
			 t.env_name, t.env_value, strerror(errno), t.env_why);
	else
		snprintf(d->env_note, sizeof(d->env_note), "%s=%s set: %s", t.env_name, t.env_value,
			 t.env_why);
}

int ofi_discover(const struct cfg_values *cfg, struct ofi_discovery *d)
{
	struct policy_attempt_plan plan[POLICY_MAX_ATTEMPTS];
	memset(d, 0, sizeof(*d));
	d->runtime_version = fi_version();
	d->build_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
	/* which libfabric.so.1 the loader found: a vendor's under /opt, one
	 * named by the plugin's RUNPATH, or the system's */
	Dl_info where;
	snprintf(d->runtime_path, sizeof(d->runtime_path), "%s",
		 dladdr((void *)fi_getinfo, &where) && where.dli_fname ? where.dli_fname : "?");
	d->nattempts = policy_plan(cfg, d->runtime_version, plan);

	for (int a = 0; a < d->nattempts; a++) {
		struct policy_attempt_result *r = &d->attempts[a];
		struct fi_info *hints = make_hints(&plan[a]);
		struct fi_info *infos = NULL;
		r->plan = plan[a];
		if (!hints) {
			r->rc = -FI_ENOMEM;
			continue;
		}
		r->rc = fi_getinfo(plan[a].api_version, NULL, NULL, 0, hints, &infos);
		if (!r->rc)
			replace_templates(&plan[a], &infos);
		r->infos = r->rc ? NULL : infos;
		fi_freeinfo(hints);
		LOG_TRACE(NCCL_INIT | NCCL_NET, "discovery attempt %d (%s): %s", a, plan[a].label,
			  r->rc ? ofi_strerror(r->rc) : "entries returned");
	}
	if (policy_select(d->attempts, d->nattempts, cfg, d->runtime_version, &d->sel))
		return -FI_ENODATA;
	apply_provider_env(d);
	return 0;
}

struct fi_info *ofi_info_with_caps(const struct fi_info *info, uint64_t caps)
{
	struct fi_info *h = fi_allocinfo(), *got = NULL, *out = NULL;
	if (!h)
		return NULL;
	h->caps = info->caps | caps;
	h->mode = info->mode;
	h->addr_format = info->addr_format;
	h->ep_attr->type = info->ep_attr->type;
	h->domain_attr->mr_mode = info->domain_attr->mr_mode;
	h->domain_attr->threading = FI_THREAD_SAFE;
	h->domain_attr->name = info->domain_attr->name ? strdup(info->domain_attr->name) : NULL;
	h->fabric_attr->prov_name = strdup(info->fabric_attr->prov_name);
	h->fabric_attr->name = info->fabric_attr->name ? strdup(info->fabric_attr->name) : NULL;
	h->tx_attr->op_flags = FI_COMPLETION;
	h->rx_attr->op_flags = FI_COMPLETION;
	uint32_t api = info->fabric_attr->api_version ? info->fabric_attr->api_version
						      : FI_VERSION(1, 17);
	if (fi_getinfo(api, NULL, NULL, 0, h, &got) == 0) {
		for (struct fi_info *i = got; i && !out; i = i->next)
			if ((i->caps & caps) == caps && i->addr_format == info->addr_format &&
			    !strcmp(i->fabric_attr->prov_name, info->fabric_attr->prov_name) &&
			    i->ep_attr->mem_tag_format == info->ep_attr->mem_tag_format)
				out = fi_dupinfo(i);
		fi_freeinfo(got);
	}
	fi_freeinfo(h);
	return out;
}

void ofi_discovery_free(struct ofi_discovery *d)
{
	for (int a = 0; a < d->nattempts; a++) {
		if (d->attempts[a].infos)
			fi_freeinfo((struct fi_info *)d->attempts[a].infos);
		d->attempts[a].infos = NULL;
	}
	d->nattempts = 0;
	d->sel.ncands = 0;
	d->sel.ndevs = 0;
}

void ofi_probe_run(const struct fi_info *info, struct policy_probe *probe)
{
	struct fid_fabric *fabric = NULL;
	struct fid_domain *domain = NULL;
	struct fid_ep *ep = NULL;
	struct fid_cq *cq = NULL;
	struct fid_av *av = NULL;
	struct fi_info *copy = fi_dupinfo(info);
	int rc;

	memset(probe, 0, sizeof(*probe));
	probe->attempted = true;
	probe->cuda_api_permitted_rc = -FI_ENOPROTOOPT;
	probe->p2p_rc = -FI_ENOPROTOOPT;
	if (!copy) {
		snprintf(probe->error, sizeof(probe->error), "fi_dupinfo: out of memory");
		return;
	}
	if ((rc = fi_fabric(copy->fabric_attr, &fabric, NULL))) {
		snprintf(probe->error, sizeof(probe->error), "fi_fabric: %s", ofi_strerror(rc));
		goto out;
	}
	if ((rc = fi_domain(fabric, copy, &domain, NULL))) {
		snprintf(probe->error, sizeof(probe->error), "fi_domain: %s", ofi_strerror(rc));
		goto out;
	}
	if ((rc = fi_endpoint(domain, copy, &ep, NULL))) {
		snprintf(probe->error, sizeof(probe->error), "fi_endpoint: %s", ofi_strerror(rc));
		goto out;
	}
	/* Bound like a real endpoint: fi_enable needs it, and some providers
	 * crash closing an unbound one (policy_traits.c, "unbound close"). */
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };
	struct fi_av_attr av_attr = { .type = copy->domain_attr->av_type };
	if ((rc = fi_cq_open(domain, &cq_attr, &cq, NULL)) ||
	    (rc = fi_av_open(domain, &av_attr, &av, NULL)) ||
	    (rc = fi_ep_bind(ep, &av->fid, 0)) ||
	    (rc = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV))) {
		struct policy_traits bad;
		policy_traits_for(copy, fi_version(), &bad);
		snprintf(probe->error, sizeof(probe->error), "endpoint setup: %s%s", ofi_strerror(rc),
			 bad.close_unbound_crashes ? " (endpoint left open: closing it unbound "
						     "would crash this provider)" : "");
		if (bad.close_unbound_crashes)
			ep = NULL;
		goto out;
	}
	/* The option must be set before fi_enable (the 1.21 man page says so and
	 * providers check it there). */
	bool permitted = false;
	probe->cuda_api_permitted_rc =
		fi_setopt(&ep->fid, FI_OPT_ENDPOINT, POLICY_OPT_CUDA_API_PERMITTED, &permitted,
			  sizeof(permitted));
	/* Enabled like a real endpoint before anything is read back: some
	 * providers read state made at fi_enable in fi_getopt (policy_traits.c,
	 * "getopt before enable"). An endpoint that does not enable is one NCCL
	 * could not use either. */
	struct policy_traits traits;
	int stale;
	policy_traits_for(copy, fi_version(), &traits);
	if ((rc = ofi_enable(ep, traits.shm_region, &stale))) {
		snprintf(probe->error, sizeof(probe->error), "fi_enable: %s", ofi_strerror(rc));
		goto out;
	}
	if (stale)
		LOG_INFO(NCCL_INIT | NCCL_NET, "probe: removed %d shm region(s) a dead process with "
			 "this process's pid left under /dev/shm", stale);
	probe->opened = true;
	int p2p = 0;
	size_t len = sizeof(p2p);
	probe->p2p_rc = fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_FI_HMEM_P2P, &p2p, &len);
	probe->p2p = p2p;
out:
	if (ep)
		fi_close(&ep->fid);
	if (av)
		fi_close(&av->fid);
	if (cq)
		fi_close(&cq->fid);
	if (domain)
		fi_close(&domain->fid);
	if (fabric)
		fi_close(&fabric->fid);
	fi_freeinfo(copy);
}
