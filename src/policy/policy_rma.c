/*
 * policy_rma.c - NCCL's RMA plugin (device-initiated networking): whether it
 * is offered, on GPU or host memory, and how a strong signal is kept behind
 * the put it follows. Pure: see policy.h.
 */
#include "policy/policy.h"

#include <stdio.h>
#include <string.h>

#include <rdma/fi_atomic.h>

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
