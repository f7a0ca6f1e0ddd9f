/*
 * core.h - the plugin context (core_plugin.c) and the report behind
 * nccl-fabric-info (core_report.c). core implements net_init, net_finalize,
 * net_devices and net_get_properties (net/net.h) and hands proto the device
 * table at init.
 *
 * State: one refcounted plugin context lives from the first init to the last
 * finalize (v11+) or to process exit (v6-v10, which have no finalize). It holds
 * the settings (frozen), the discovery results, the GPU-memory decision and the
 * devices. Devices open their libfabric domain at first use.
 */
#ifndef CORE_H
#define CORE_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>

#include "cfg/cfg.h"
#include "net/net.h"
#include "ofi/ofi.h"
#include "policy/policy.h"
#include "proto/proto.h"
#include "rma/rma.h"

#define CORE_PLUGIN_NAME "Fabric"
#define CORE_PLUGIN_VERSION "0.1.0"

struct core_plugin {
	int refs;
	struct cfg_values cfg;
	int cfg_invalid;
	struct ofi_discovery disc;
	struct policy_cuda_info cuda;
	struct policy_hmem_decision hmem;
	int ndevs;
	struct proto_device devs[POLICY_MAX_DEVS];
	struct policy_device_why why[POLICY_MAX_DEVS]; /* each device's plan, in words */
	/* NCCL's RMA plugin: each device's RMA entry (owned) and the verdict */
	struct rma_device rma[POLICY_MAX_DEVS];
	void *libfabric_pin;
	char procs_dir[128];       /* where the plugin processes of this host are counted */
};

/* The live plugin context, or NULL outside init..finalize. */
struct core_plugin *core_plugin_get(void);

/* The report behind nccl-fabric-info (core_report.c). */
int core_report_write(FILE *out, int flags); /* NCCL_FABRIC_REPORT_* */

#endif
