/*
 * policy_path.c - the data path: how a message above the eager limit moves,
 * as RMA writes into the buffer the receiver announced, or as one tagged send
 * after its clear-to-send. Pure: see policy.h.
 */
#include "policy/policy.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

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
	/* FI_RX_CQ_DATA: each write's CQ data takes a posted untagged receive;
	 * the endpoint's control receives serve (ofi_ep_progress) */
	const char *rx_cq_data = info && (info->mode & FI_RX_CQ_DATA)
					 ? "; FI_RX_CQ_DATA: each write takes a control receive, "
					   "posted again unread"
					 : "";
	if (info && !(caps & FI_TAGGED)) {
		/* judge_cand kept it for its writes: they are the only way */
		out->rma = true;
		snprintf(out->reason, sizeof(out->reason),
			 "every message as an RMA write into the receiver's buffer after its "
			 "clear-to-send (%s has no FI_TAGGED; %zu bytes of remote CQ data%s%s)%s", prov,
			 cq_data, cq_data < 8 ? ": the receiver sums the size from the completions" : "",
			 rx_cq_data, cfg_rma ? "" : "; NCCL_FABRIC_RMA=0 cannot apply");
		return;
	}
	if (!cfg_rma)
		why = "NCCL_FABRIC_RMA=0";
	else if ((caps & wcaps) != wcaps)
		why = "the provider has no FI_RMA with remote writes";
	else if (cq_data < 4)
		why = "the provider's remote CQ data is shorter than 4 bytes";
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
			 "remote CQ data%s%s; NCCL_FABRIC_RMA=0 sends them tagged)", prov, cq_data,
			 cq_data < 8 ? ": the receiver sums the size from the write completions" : "",
			 rx_cq_data);
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
