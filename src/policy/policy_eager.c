/*
 * policy_eager.c - the eager limit: the largest message sent without waiting
 * for the receiver's clear-to-send; and early sends, the few larger ones that
 * may go before it. Pure: see policy.h.
 */
#include "policy/policy.h"

#include <stdio.h>

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

int policy_early(const struct policy_traits *traits, long cfg_sends, long cfg_max,
		 size_t eager_max, size_t *max, char *reason, size_t reason_len)
{
	*max = cfg_max > 0 ? (size_t)cfg_max : 0;
	int n = cfg_sends < 0 ? traits->early_sends : (int)cfg_sends;
	if (!traits->early_sends && n) {
		snprintf(reason, reason_len, "none: only native tcp keeps a message that comes "
			 "before its receive safely (NCCL_FABRIC_EARLY_SENDS=%ld ignored)", cfg_sends);
		return 0;
	}
	if (!n) {
		snprintf(reason, reason_len, "none (%s)",
			 cfg_sends < 0 ? "auto: the provider may not take them" :
					 "NCCL_FABRIC_EARLY_SENDS=0");
		return 0;
	}
	if (*max <= eager_max) {
		snprintf(reason, reason_len, "none: NCCL_FABRIC_EARLY_MAX (%zu) is not above the "
			 "eager limit", *max);
		return 0;
	}
	snprintf(reason, reason_len, "%d at a time of up to %zu bytes before their clear-to-send "
		 "(%s)", n, *max, cfg_sends < 0 ? "auto: native tcp" : "NCCL_FABRIC_EARLY_SENDS");
	return n;
}
