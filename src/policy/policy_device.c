/*
 * policy_device.c - one device's plan: the data path, rails, eager limit and
 * timeouts its connections use, decided once at init from the entry, the
 * settings and the GPU-memory decision (policy_device in policy.h).
 */
#include "policy/policy.h"

#include <string.h>

#include "util/util.h"

void policy_device(const struct policy_device_input *in, struct policy_device_plan *plan,
		   struct policy_device_why *why)
{
	const struct cfg_values *cfg = in->cfg;
	const struct fi_info *info = in->info;
	memset(plan, 0, sizeof(*plan));
	memset(why, 0, sizeof(*why));
	plan->hmem = in->gpu;
	/* without tags every message is an RMA write (policy_data_path); the tag
	 * layout still names connections and control kinds in the headers */
	plan->writes_only = !(info->caps & FI_TAGGED);
	plan->tag_bits = plan->writes_only ? 64 :
			 policy_tag_bits(info->ep_attr ? info->ep_attr->mem_tag_format : 0);

	struct policy_traits traits;
	policy_traits_for(info, in->fi_version, &traits);
	plan->eager_max = policy_eager(&traits, (long)cfg->v[CFG_EAGER_MAX].i, why->eager,
				       sizeof(why->eager));
	if (plan->writes_only) {
		plan->eager_max = 0;
		util_strlcpy(why->eager, "none: no FI_TAGGED, every message waits for its "
			     "clear-to-send", sizeof(why->eager));
	}
	plan->early_sends = plan->writes_only ? 0 :
			    policy_early(&traits, (long)cfg->v[CFG_EARLY_SENDS].i,
					 (long)cfg->v[CFG_EARLY_MAX].i, plan->eager_max,
					 &plan->early_max, why->early, sizeof(why->early));
	if (plan->writes_only)
		util_strlcpy(why->early, "none: every message waits for its clear-to-send",
			     sizeof(why->early));
	struct policy_data_path path;
	policy_data_path(cfg->v[CFG_RMA].i != 0, cfg->v[CFG_RMA].source == CFG_SRC_ENV,
			 traits.no_write_why, in->provider, info, in->cxi_writedata, &path);
	plan->rma = path.rma;
	util_strlcpy(why->data, path.reason, sizeof(why->data));
	plan->stripe_min = (size_t)cfg->v[CFG_STRIPE_MIN].i;
	plan->spread = cfg->v[CFG_SPREAD].i != 0;

	plan->timeout_ns = (uint64_t)cfg->v[CFG_TIMEOUT].i * 1000000000ULL;
	plan->peer_timeout_ns = (uint64_t)cfg->v[CFG_PEER_TIMEOUT].i * 1000000000ULL;
	plan->cq_batch = (int)cfg->v[CFG_CQ_BATCH].i;

	plan->flush = (int)in->hmem->flush;
	plan->flush_rma = in->gpu && in->hmem->flush == POLICY_FLUSH_RMA_READ;
	plan->dmabuf = in->hmem->dmabuf;
	plan->expected_cuda_rc = in->hmem->expected_cuda_rc;

	/* rails: decided again when the device opens, once the ranks that share
	 * this host have all started */
	plan->rails_in = (struct policy_rails_input){
		.ncpus = in->ncpus, .nprocs = in->nprocs, .one_rail_why = traits.one_rail_why,
		.cfg_rails = (int)cfg->v[CFG_RAILS].i,
		.threads_mode = (int)cfg->v[CFG_PROGRESS_THREADS].i};
	struct policy_rails_choice rails;
	policy_rails(&plan->rails_in, &rails);
	plan->nrails = rails.rails;
	plan->progress_threads = rails.threads;
	util_strlcpy(why->rails, rails.reason, sizeof(why->rails));
}
