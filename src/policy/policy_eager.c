/*
 * policy_eager.c - the eager limit: the largest message sent without waiting
 * for the receiver's clear-to-send. Pure: see policy.h.
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
