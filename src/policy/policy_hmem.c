/*
 * policy_hmem.c - the GPU-memory (HMEM) decision: whether NCCL's GPU buffers
 * go to the provider (its answer to FI_OPT_CUDA_API_PERMITTED, the setting,
 * the GPUs), how GPU receives are flushed, and whether DMA-BUF is offered.
 * Pure: see policy.h.
 */
#include "policy/policy.h"

#include <stdio.h>
#include <string.h>

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "nccl/nccl_net.h"

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
