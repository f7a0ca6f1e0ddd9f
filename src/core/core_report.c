/*
 * core_report.c - the story nccl-fabric-info prints: what libfabric offered, what
 * was kept and why, the devices NCCL sees, and the GPU-memory decision. It is
 * written from the same structures the plugin decides with, so the tool and
 * the INFO log can never disagree.
 *
 * With the plugin initialized it reports the live context. Without one (init
 * failed, or the tool asks first) it runs the same discovery and policy
 * functions itself and reports those.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "cuda/cuda_drv.h"
#include "nccl_fabric_tools.h"
#include "log/log.h"
#include "util/json.h"
#include "util/util.h"

struct report_view {
	const struct cfg_values *cfg;
	const struct ofi_discovery *disc;
	const struct policy_cuda_info *cuda;
	const struct policy_hmem_decision *hmem;
	const struct proto_device *devs;
	const struct rma_device *rma; /* NCCL's RMA plugin, per device (NULL: no provider) */
	int ndevs;
	int dev_cuda_rc[POLICY_MAX_DEVS]; /* each device's own endpoint answer */
	bool dev_cuda_known[POLICY_MAX_DEVS];
	bool live;
};

static const char *tostr_caps(uint64_t caps)
{
	static char buf[512];
	util_strlcpy(buf, fi_tostr(&caps, FI_TYPE_CAPS), sizeof(buf));
	return buf;
}

static const char *tostr_mr_mode(int mr_mode)
{
	static char buf[256];
	util_strlcpy(buf, fi_tostr(&mr_mode, FI_TYPE_MR_MODE), sizeof(buf));
	return buf;
}

static const char *tostr_progress(enum fi_progress p)
{
	static char buf[2][64];
	static int k;
	k ^= 1;
	util_strlcpy(buf[k], fi_tostr(&p, FI_TYPE_PROGRESS), sizeof(buf[k]));
	return buf[k];
}

static const char *ptr_text(int ptr)
{
	static char buf[64];
	snprintf(buf, sizeof(buf), "%s%s%s", (ptr & NCCL_PTR_HOST) ? "HOST" : "",
		 (ptr & NCCL_PTR_CUDA) ? "|CUDA" : "", (ptr & NCCL_PTR_DMABUF) ? "|DMABUF" : "");
	return buf;
}

/* Asks each device's own endpoint the FI_OPT_CUDA_API_PERMITTED question. */
static void ask_devices(struct report_view *v)
{
	for (int i = 0; i < v->ndevs; i++) {
		const struct proto_device *dev = &v->devs[i];
		if (dev->dom && dev->dom->nep > 0) {
			v->dev_cuda_rc[i] = dev->dom->eps[0]->cuda_api_rc;
			v->dev_cuda_known[i] = true;
			continue;
		}
		struct policy_probe pr;
		ofi_probe_run(dev->info, &pr);
		v->dev_cuda_known[i] = pr.opened;
		v->dev_cuda_rc[i] = pr.cuda_api_permitted_rc;
	}
}

static void write_candidates(FILE *out, const struct report_view *v)
{
	const struct ofi_discovery *d = v->disc;
	const struct policy_selection *sel = &d->sel;
	fprintf(out, "\nDiscovery (fi_getinfo, RDM endpoints, in order):\n");
	for (int a = 0; a < d->nattempts; a++) {
		const struct policy_attempt_result *r = &d->attempts[a];
		int n = 0;
		for (const struct fi_info *i = r->rc ? NULL : r->infos; i; i = i->next)
			n++;
		fprintf(out, "  %2d. %-62s api %u.%u  -> %s", a + 1, r->plan.label,
			FI_MAJOR(r->plan.api_version), FI_MINOR(r->plan.api_version),
			r->rc ? fi_strerror(-r->rc) : "");
		if (!r->rc)
			fprintf(out, "%d entr%s", n, n == 1 ? "y" : "ies");
		fprintf(out, "\n      caps %s; mr_mode %s\n", tostr_caps(r->plan.caps),
			tostr_mr_mode(r->plan.mr_mode));
	}
	fprintf(out, "\nCandidates:\n");
	if (!sel->ncands)
		fprintf(out, "  (none: no provider answered any attempt)\n");
	for (int c = 0; c < sel->ncands; c++) {
		const struct policy_cand *cd = &sel->cands[c];
		const struct fi_info *i = cd->info;
		fprintf(out, "  %2d. %-14s domain %-8s fabric %-16s from attempt %d (API %u.%u)", c,
			cd->prov, cd->domain, cd->fabric, cd->attempt + 1, FI_MAJOR(cd->api_version),
			FI_MINOR(cd->api_version));
		if (cd->twins)
			fprintf(out, " (listed %d more times)", cd->twins);
		fputc('\n', out);
		/* Details for what was kept or rejected for a capability; the rest
		 * (not named, duplicates, a later provider) in one line. */
		if (!cd->kept && (strstr(cd->reason, "same provider and domain") ||
				  strstr(cd->reason, "NCCL_FABRIC_PROVIDER") ||
				  strstr(cd->reason, "comes first"))) {
			fprintf(out, "      -> rejected: %s\n", cd->reason);
			continue;
		}
		fprintf(out, "      caps %s\n", tostr_caps(i->caps));
		fprintf(out, "      mr_mode %s; progress control %s, data %s; tag bits %u%s\n",
			tostr_mr_mode(i->domain_attr ? i->domain_attr->mr_mode : 0),
			tostr_progress(i->domain_attr ? i->domain_attr->control_progress : 0),
			tostr_progress(i->domain_attr ? i->domain_attr->data_progress : 0), cd->tag_bits,
			cd->loopback ? "; loopback" : "");
		fprintf(out, "      -> %s: %s\n", cd->kept ? "KEPT" : "rejected", cd->reason);
	}
}

/* The answer that matters, in one line: the probe's where the provider has
 * FI_HMEM (it decides), else what device 0's own endpoint said (informative). */
static void write_answer_line(FILE *out, const struct report_view *v)
{
	const struct ofi_discovery *d = v->disc;
	if (d->probe.attempted && d->probe.opened)
		fprintf(out, "  answer:    FI_OPT_CUDA_API_PERMITTED=false answered %s\n",
			v->hmem->answer);
	else if (d->probe.attempted)
		fprintf(out, "  answer:    not asked: the probe endpoint failed (%s)\n",
			d->probe.error[0] ? d->probe.error : "unknown error");
	else if (v->ndevs > 0 && v->dev_cuda_known[0])
		fprintf(out,
			"  answer:    FI_OPT_CUDA_API_PERMITTED=false answered %s (device 0's "
			"endpoint; it does not decide: the provider has no FI_HMEM entry)\n",
			policy_cuda_answer(v->dev_cuda_rc[0], d->runtime_version));
	else
		fprintf(out, "  answer:    not asked: %s\n",
			v->disc->sel.ok ? "the provider has no FI_HMEM entry" : "no provider");
}

static void write_text(FILE *out, struct report_view *v, int flags)
{
	const struct ofi_discovery *d = v->disc;
	const struct policy_selection *sel = &d->sel;
	fprintf(out, "nccl-fabric %s: libnccl-net-fabric.so, NCCL network \"%s\"\n",
		CORE_PLUGIN_VERSION, CORE_PLUGIN_NAME);

	/* The verdict first: one screen that answers "what will NCCL get, and why". */
	fprintf(out, "\nVerdict:\n");
	fprintf(out, "  libfabric: %u.%u at run time (%s), plugin built against %u.%u headers\n",
		FI_MAJOR(d->runtime_version), FI_MINOR(d->runtime_version), d->runtime_path,
		FI_MAJOR(d->build_version), FI_MINOR(d->build_version));
	fprintf(out, "  provider:  %s\n", sel->ok ? sel->reason : "NONE");
	if (!sel->ok)
		fprintf(out, "  why:       %s\n", sel->reason);
	if (sel->names[0])
		fprintf(out, "  names:     %s\n", sel->names);
	if (d->env_note[0])
		fprintf(out, "  variable:  %s\n", d->env_note);
	if (sel->ok) {
		fprintf(out, "  devices:   %d:", v->ndevs);
		for (int i = 0; i < v->ndevs; i++)
			fprintf(out, " %s (ptrSupport %s)", v->devs[i].props.name,
				ptr_text(v->devs[i].props.ptr_support));
		fputc('\n', out);
		write_answer_line(out, v);
		fprintf(out, "  verdict:   %s\n", policy_verdict_name(v->hmem->verdict));
		fprintf(out, "  why:       %s\n", v->hmem->reason);
		fprintf(out, "  NCCL:      %s\n", v->hmem->nccl_effect);
		fprintf(out, "  remedy:    %s\n", v->hmem->remedy);
		if (v->hmem->warning[0])
			fprintf(out, "  WARNING:   %s\n", v->hmem->warning);
		if (v->rma && v->ndevs > 0) {
			const struct policy_rma_decision *r = &v->rma[0].decision;
			fprintf(out, "  device-initiated networking (NCCL's RMA plugin, "
				     "NCCL_FABRIC_RMA_PLUGIN=%s): %s\n",
				v->cfg->v[CFG_RMA_PLUGIN].s, r->offered ? "OFFERED" : "not offered");
			fprintf(out, "    why:     %s\n", r->reason);
			fprintf(out, "    signals: %s\n", r->order_reason);
			if (r->warning[0])
				fprintf(out, "    WARNING: %s\n", r->warning);
		}
	} else {
		fprintf(out, "  remedy:    nccl-fabric-info --candidates lists what libfabric offered "
			     "and why each was rejected; FI_LOG_LEVEL=warn shows libfabric's side\n");
	}

	if (sel->ok) {
		fprintf(out, "\nDevices NCCL sees (%d):\n", v->ndevs);
		for (int i = 0; i < v->ndevs; i++) {
			const struct proto_device *dev = &v->devs[i];
			const struct net_props *p = &dev->props;
			fprintf(out, "  %d: %s  (provider %s, fabric %s, API %u.%u)\n", i, p->name,
				sel->provider, dev->info->fabric_attr->name,
				FI_MAJOR(dev->info->fabric_attr->api_version),
				FI_MINOR(dev->info->fabric_attr->api_version));
			fprintf(out, "     pciPath %s, guid 0x%016llx, speed %d Mbps (%s), latency %.1f us\n",
				p->pci_path ? p->pci_path : "none", (unsigned long long)p->guid, p->speed,
				dev->speed_source, p->latency);
			fprintf(out, "     ptrSupport %s, regIsGlobal %d, forceFlush %d, maxRecvs %d, "
				"maxComms %d, maxP2pBytes %zu\n",
				ptr_text(p->ptr_support), p->reg_is_global, p->force_flush, p->max_recvs,
				p->max_comms, p->max_p2p_bytes);
			fprintf(out, "     entry used: %s; FI_HMEM entry %s, host entry %s\n",
				dev->plan.hmem ? "FI_HMEM" : "host memory", dev->choice.hmem_info ? "yes" : "no",
				dev->choice.host_info ? "yes" : "no");
			if (v->dev_cuda_known[i])
				fprintf(out, "     FI_OPT_CUDA_API_PERMITTED=false on its endpoint: %d, %s\n",
					v->dev_cuda_rc[i],
					policy_cuda_answer(v->dev_cuda_rc[i], d->runtime_version));
			else
				fprintf(out, "     FI_OPT_CUDA_API_PERMITTED: endpoint could not be opened\n");
			fprintf(out, "     FI_HMEM: %s\n", dev->plan.hmem ? "used for GPU buffers" :
					"not used: NCCL stages through host memory");
			if (dev->plan.writes_only)
				fprintf(out, "     data path: rails %s; no eager messages; %s%s; control "
					"messages untagged\n",
					dev->why->rails, dev->why->data,
					dev->plan.stripe_min && dev->plan.nrails > 1 ?
						", cut over the rails from NCCL_FABRIC_STRIPE_MIN bytes" : "");
			else
				fprintf(out, "     data path: rails %s%s; eager up to %s; early sends: %s; "
					"larger messages: %s%s; a "
					"receive that can only get eager messages sends no clear-to-send (lazy: "
					"only if it still waits after 1 ms); control messages untagged\n",
					dev->why->rails,
					dev->plan.nrails < 2 ? "" : dev->plan.spread ?
					"; a connection's messages take the rails in turn (NCCL_FABRIC_SPREAD)" :
					"; a connection's messages take its home rail (NCCL_FABRIC_SPREAD=0)",
					dev->why->eager, dev->why->early, dev->why->data,
					dev->plan.rma && dev->plan.stripe_min && dev->plan.nrails > 1 ?
						", cut over the rails from NCCL_FABRIC_STRIPE_MIN bytes" : "");
			struct policy_traits tr;
			policy_traits_for(dev->info, d->runtime_version, &tr);
			fprintf(out, "     faults: a silent peer is pinged after 1 s and declared gone after "
				"%lld s without an answer (NCCL_FABRIC_PEER_TIMEOUT); data receives %s; "
				"a close whose peer takes no data %s\n",
				(long long)v->cfg->v[CFG_PEER_TIMEOUT].i,
				dev->plan.writes_only ?
				"are RMA writes only, each checked against the buffer its clear-to-send "
				"announced" :
				(dev->info->caps & FI_DIRECTED_RECV) ?
				"accept only the connection's peer (FI_DIRECTED_RECV)" :
				"accept any source (the provider lacks FI_DIRECTED_RECV): only the tag "
				"keeps other processes' messages out",
				tr.tcp_sockets ?
				"has its TCP connections reset (TCP_USER_TIMEOUT, then shutdown), so the "
				"provider lets go of NCCL's buffers" :
				"returns after 5 s with a WARN: the provider may still use NCCL's buffers "
				"(no per-peer reset over this provider)");
		}
		fprintf(out, "\nGPU memory decision (NCCL_FABRIC_HMEM=%s):\n",
			v->cfg->v[CFG_HMEM].s);
		fprintf(out, "  verdict:  %s\n", policy_verdict_name(v->hmem->verdict));
		fprintf(out, "  probe:    FI_OPT_CUDA_API_PERMITTED=false answered %s\n", v->hmem->answer);
		fprintf(out, "  GPUDirect (FI_OPT_FI_HMEM_P2P): %s\n", v->hmem->p2p);
		fprintf(out, "  DMA-BUF:  %s\n", v->hmem->dmabuf_reason);
		fprintf(out, "  flush:    %s; forceFlush %d (%s)\n", v->hmem->flush_reason,
			v->hmem->force_flush,
			v->hmem->force_flush ? "the GPU does not report ordered GPUDirect RDMA writes" :
			v->hmem->use_hmem ? "the GPU orders GPUDirect RDMA writes; NCCL decides" :
					    "host memory");
	}

	fprintf(out, "\nCUDA driver: ");
	if (v->cuda->driver)
		fprintf(out, "version %d, %d GPU%s, DMA-BUF %s, GPUDirect RDMA attribute %s, "
			"cuFlushGPUDirectRDMAWrites %s\n",
			v->cuda->driver_version, v->cuda->ngpus, v->cuda->ngpus == 1 ? "" : "s",
			v->cuda->dmabuf ? "yes" : "no", v->cuda->gdr ? "yes" : "no",
			v->cuda->flush ? "yes" : "no");
	else
		fprintf(out, "%s\n", v->cuda->error[0] ? v->cuda->error : "not found");

	fprintf(out, "\nSettings:\n");
	cfg_dump(v->cfg, out, 0);

	if (flags & NCCL_FABRIC_REPORT_CANDIDATES) {
		write_candidates(out, v);
	} else {
		int kept = 0;
		for (int c = 0; c < sel->ncands; c++)
			kept += sel->cands[c].kept;
		fprintf(out, "\nDiscovery: %d fi_getinfo attempt%s, %d candidate%s, %d kept; "
			"nccl-fabric-info --candidates lists each with its reason\n",
			d->nattempts, d->nattempts == 1 ? "" : "s", sel->ncands,
			sel->ncands == 1 ? "" : "s", kept);
	}
}

static void json_kv_str(FILE *out, const char *k, const char *v, bool comma)
{
	json_str(out, k);
	fputc(':', out);
	json_str(out, v);
	if (comma)
		fputc(',', out);
}

static void write_json(FILE *out, struct report_view *v)
{
	const struct ofi_discovery *d = v->disc;
	const struct policy_selection *sel = &d->sel;
	char buf[64];
	fputc('{', out);
	json_kv_str(out, "plugin_version", CORE_PLUGIN_VERSION, true);
	json_kv_str(out, "network", CORE_PLUGIN_NAME, true);
	snprintf(buf, sizeof(buf), "%u.%u", FI_MAJOR(d->runtime_version), FI_MINOR(d->runtime_version));
	json_kv_str(out, "libfabric_runtime", buf, true);
	snprintf(buf, sizeof(buf), "%u.%u", FI_MAJOR(d->build_version), FI_MINOR(d->build_version));
	json_kv_str(out, "libfabric_build", buf, true);
	json_kv_str(out, "libfabric_path", d->runtime_path, true);
	fputs("\"attempts\":[", out);
	for (int a = 0; a < d->nattempts; a++) {
		const struct policy_attempt_result *r = &d->attempts[a];
		int n = 0;
		for (const struct fi_info *i = r->rc ? NULL : r->infos; i; i = i->next)
			n++;
		fprintf(out, "%s{", a ? "," : "");
		json_kv_str(out, "label", r->plan.label, true);
		json_kv_str(out, "caps", tostr_caps(r->plan.caps), true);
		json_kv_str(out, "mr_mode", tostr_mr_mode(r->plan.mr_mode), true);
		snprintf(buf, sizeof(buf), "%u.%u", FI_MAJOR(r->plan.api_version),
			 FI_MINOR(r->plan.api_version));
		json_kv_str(out, "api_version", buf, true);
		fprintf(out, "\"rc\":%d,\"entries\":%d}", r->rc, n);
	}
	fputs("],\"candidates\":[", out);
	for (int c = 0; c < sel->ncands; c++) {
		const struct policy_cand *cd = &sel->cands[c];
		const struct fi_info *i = cd->info;
		fprintf(out, "%s{", c ? "," : "");
		json_kv_str(out, "provider", cd->prov, true);
		json_kv_str(out, "domain", cd->domain, true);
		json_kv_str(out, "fabric", cd->fabric, true);
		json_kv_str(out, "caps", tostr_caps(i->caps), true);
		json_kv_str(out, "mr_mode", tostr_mr_mode(i->domain_attr ? i->domain_attr->mr_mode : 0), true);
		json_kv_str(out, "data_progress",
			    tostr_progress(i->domain_attr ? i->domain_attr->data_progress : 0), true);
		fprintf(out, "\"api_version\":\"%u.%u\",\"template\":%s,", FI_MAJOR(cd->api_version),
			FI_MINOR(cd->api_version), cd->template_entry ? "true" : "false");
		fprintf(out, "\"attempt\":%d,\"hmem\":%s,\"remote\":%s,\"loopback\":%s,\"tag_bits\":%u,"
			"\"kept\":%s,", cd->attempt + 1, cd->hmem ? "true" : "false",
			cd->remote ? "true" : "false", cd->loopback ? "true" : "false", cd->tag_bits,
			cd->kept ? "true" : "false");
		json_kv_str(out, "reason", cd->reason, false);
		fputc('}', out);
	}
	fprintf(out, "],\"provider\":");
	json_str(out, sel->ok ? sel->provider : NULL);
	fputc(',', out);
	json_kv_str(out, "provider_reason", sel->reason, true);
	json_kv_str(out, "provider_names", sel->names, true);
	json_kv_str(out, "provider_variable", d->env_note, true);
	fprintf(out, "\"cuda\":{\"driver\":%s,\"version\":%d,\"gpus\":%d,\"dmabuf\":%s,\"gdr\":%s,",
		v->cuda->driver ? "true" : "false", v->cuda->driver_version, v->cuda->ngpus,
		v->cuda->dmabuf ? "true" : "false", v->cuda->gdr ? "true" : "false");
	json_kv_str(out, "error", v->cuda->error, false);
	fputs("},\"devices\":[", out);
	for (int i = 0; i < v->ndevs; i++) {
		const struct proto_device *dev = &v->devs[i];
		const struct net_props *p = &dev->props;
		fprintf(out, "%s{\"index\":%d,", i ? "," : "", i);
		json_kv_str(out, "name", p->name, true);
		json_kv_str(out, "fabric", dev->info->fabric_attr->name, true);
		fputs("\"pciPath\":", out);
		if (p->pci_path)
			json_str(out, p->pci_path);
		else
			fputs("null", out);
		fprintf(out, ",\"guid\":\"0x%016llx\",\"speed\":%d,", (unsigned long long)p->guid, p->speed);
		json_kv_str(out, "speed_source", dev->speed_source, true);
		fprintf(out, "\"latency\":%.1f,\"ptrSupport\":%d,", p->latency, p->ptr_support);
		json_kv_str(out, "ptrSupport_text", ptr_text(p->ptr_support), true);
		fprintf(out, "\"regIsGlobal\":%d,\"forceFlush\":%d,\"maxRecvs\":%d,\"maxComms\":%d,"
			"\"maxP2pBytes\":%zu,\"hmem\":%s,\"cuda_api_permitted_rc\":",
			p->reg_is_global, p->force_flush, p->max_recvs, p->max_comms, p->max_p2p_bytes,
			dev->plan.hmem ? "true" : "false");
		if (v->dev_cuda_known[i])
			fprintf(out, "%d,", v->dev_cuda_rc[i]);
		else
			fputs("null,", out);
		json_kv_str(out, "cuda_api_permitted",
			    v->dev_cuda_known[i] ? policy_cuda_answer(v->dev_cuda_rc[i], v->disc->runtime_version) :
						   "endpoint could not be opened",
			    true);
		/* how messages above the eager limit move, and why */
		fprintf(out, "\"rma_writes\":%s,", dev->plan.rma ? "true" : "false");
		json_kv_str(out, "data_path", dev->why->data, false);
		fputc('}', out);
	}
	fputs("],\"hmem\":{", out);
	if (sel->ok) {
		json_kv_str(out, "setting", v->cfg->v[CFG_HMEM].s, true);
		json_kv_str(out, "verdict", policy_verdict_name(v->hmem->verdict), true);
		fprintf(out, "\"use_hmem\":%s,\"dmabuf\":%s,\"ptrSupport\":%d,",
			v->hmem->use_hmem ? "true" : "false", v->hmem->dmabuf ? "true" : "false",
			v->hmem->ptr_support);
		fprintf(out, "\"probe\":{\"attempted\":%s,\"opened\":%s,\"cuda_api_permitted_rc\":%d,"
			"\"p2p_rc\":%d,\"p2p\":%d},",
			d->probe.attempted ? "true" : "false", d->probe.opened ? "true" : "false",
			d->probe.cuda_api_permitted_rc, d->probe.p2p_rc, d->probe.p2p);
		json_kv_str(out, "answer", v->hmem->answer, true);
		json_kv_str(out, "gpudirect", v->hmem->p2p, true);
		json_kv_str(out, "reason", v->hmem->reason, true);
		json_kv_str(out, "dmabuf_reason", v->hmem->dmabuf_reason, true);
		json_kv_str(out, "flush", policy_flush_name(v->hmem->flush), true);
		json_kv_str(out, "flush_reason", v->hmem->flush_reason, true);
		fprintf(out, "\"force_flush\":%s,", v->hmem->force_flush ? "true" : "false");
		json_kv_str(out, "nccl_effect", v->hmem->nccl_effect, true);
		json_kv_str(out, "remedy", v->hmem->remedy, true);
		json_kv_str(out, "warning", v->hmem->warning, false);
	}
	fputs("},\"rma\":{", out);
	if (sel->ok && v->rma && v->ndevs > 0) {
		const struct policy_rma_decision *r = &v->rma[0].decision;
		json_kv_str(out, "setting", v->cfg->v[CFG_RMA_PLUGIN].s, true);
		fprintf(out, "\"offered\":%s,\"gpu\":%s,\"msg_signals\":%s,",
			r->offered ? "true" : "false", r->gpu ? "true" : "false",
			r->msg_signals ? "true" : "false");
		json_kv_str(out, "ordering", policy_rma_order_name(r->order), true);
		json_kv_str(out, "reason", r->reason, true);
		json_kv_str(out, "signals", r->order_reason, true);
		json_kv_str(out, "warning", r->warning, false);
	}
	fputs("},\"settings\":", out);
	cfg_dump(v->cfg, out, 1);
	fputs("}\n", out);
}

int core_report_write(FILE *out, int flags)
{
	int json = flags & NCCL_FABRIC_REPORT_JSON;
	struct report_view v;
	memset(&v, 0, sizeof(v));
	int rc;
	void *ctx = NULL;
	int res = 0;
	if (!core_plugin_get())
		res = net_init(&ctx, NULL); /* the report holds its own reference */
	struct core_plugin *p = core_plugin_get();
	if (res == 0 && p) {
		v.cfg = &p->cfg;
		v.disc = &p->disc;
		v.cuda = &p->cuda;
		v.hmem = &p->hmem;
		v.devs = p->devs;
		v.rma = p->rma;
		v.ndevs = p->ndevs;
		v.live = true;
		ask_devices(&v);
		if (json)
			write_json(out, &v);
		else
			write_text(out, &v, flags);
		if (ctx)
			net_finalize(ctx);
		return 0;
	}
	/* No provider: run the same discovery to show why. */
	struct cfg_values cfg;
	struct ofi_discovery *disc = calloc(1, sizeof(*disc));
	struct policy_cuda_info cuda;
	struct policy_hmem_decision hmem;
	if (!disc)
		return 1;
	cfg_load(&cfg, NULL, NULL);
	cuda_open(&cuda);
	ofi_discover(&cfg, disc);
	policy_hmem(&disc->sel, &disc->probe, &cuda, &cfg, disc->runtime_version, &hmem);
	v.cfg = &cfg;
	v.disc = disc;
	v.cuda = &cuda;
	v.hmem = &hmem;
	if (json)
		write_json(out, &v);
	else
		write_text(out, &v, flags);
	rc = disc->sel.ok ? 0 : 1;
	ofi_discovery_free(disc);
	free(disc);
	cuda_close();
	return rc;
}

/* ---------------- the tools table ---------------- */

static int tools_report(FILE *out, int flags) { return core_report_write(out, flags); }

static const char *tools_provider(void)
{
	struct core_plugin *p = core_plugin_get();
	return p && p->disc.sel.ok ? p->disc.sel.provider : NULL;
}

static void tools_settings(FILE *out, int json)
{
	struct core_plugin *p = core_plugin_get();
	struct cfg_values cfg;
	if (!p)
		cfg_load(&cfg, NULL, NULL);
	cfg_dump(p ? &p->cfg : &cfg, out, json);
	if (json)
		fputc('\n', out);
}

static long tools_eager_max(int dev)
{
	struct core_plugin *p = core_plugin_get();
	if (!p || dev < 0 || dev >= p->ndevs)
		return -1;
	return (long)p->devs[dev].plan.eager_max;
}

UTIL_EXPORT const ncclFabricTools_v1_t ncclFabricTools_v1 = {
	.version = NCCL_FABRIC_TOOLS_VERSION,
	.plugin_version = CORE_PLUGIN_VERSION,
	.report = tools_report,
	.provider = tools_provider,
	.settings = tools_settings,
	.eager_max = tools_eager_max,
};
