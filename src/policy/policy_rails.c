/*
 * policy_rails.c - rails (endpoints per device) and progress threads: how
 * many, from the CPUs this process may use and the processes sharing them.
 * Pure: see policy.h.
 */
#include "policy/policy.h"

#include <stdio.h>
#include <string.h>

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
