/*
 * core_plugin.c - the plugin context: init, finalize, devices and their properties.
 *
 * init runs discovery and the GPU-memory policy once, so getProperties tells
 * NCCL the truth from the first call; later inits (one per communicator in
 * v11+) take a reference. The last finalize closes every libfabric object and
 * frees everything, so NCCL can dlclose the plugin and load it again.
 */
#include "core/core.h"

#include <dirent.h>
#include <sched.h>
#include <errno.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda/cuda_drv.h"
#include "log/log.h"
#include "proto/proto.h"
#include "proto/proto_wire.h"
#include "util/util.h"

static pthread_mutex_t plugin_lock = PTHREAD_MUTEX_INITIALIZER;
static struct core_plugin *plugin;

/* A v11+ communicator's context. */
struct core_ctx {
	uint32_t magic;
};
#define CORE_CTX_MAGIC 0x46435458u

struct core_plugin *core_plugin_get(void)
{
	return __atomic_load_n(&plugin, __ATOMIC_ACQUIRE);
}

/* ---------------- device properties ---------------- */

static void device_pci_path(struct proto_device *dev)
{
	const struct fi_info *info = dev->info;
	char path[PATH_MAX];
	dev->pci_path[0] = '\0';
	if (info->nic && info->nic->bus_attr && info->nic->bus_attr->bus_type == FI_BUS_PCI) {
		const struct fi_pci_attr *pci = &info->nic->bus_attr->attr.pci;
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%04x:%02x:%02x.%x", pci->domain_id,
			 pci->bus_id, pci->device_id, pci->function_id);
	} else {
		/* IP providers name their domain after the interface */
		snprintf(path, sizeof(path), "/sys/class/net/%s/device", dev->choice.domain);
	}
	if (!realpath(path, dev->pci_path))
		dev->pci_path[0] = '\0';
	/* A real PCI device only: virtual interfaces resolve elsewhere */
	if (dev->pci_path[0] && !strstr(dev->pci_path, "/pci"))
		dev->pci_path[0] = '\0';
}

static int device_speed(struct proto_device *dev, const struct cfg_values *cfg)
{
	if (cfg->v[CFG_SPEED].i > 0) {
		snprintf(dev->speed_source, sizeof(dev->speed_source), "NCCL_FABRIC_SPEED");
		return (int)cfg->v[CFG_SPEED].i;
	}
	const struct fi_info *info = dev->info;
	if (info->nic && info->nic->link_attr && info->nic->link_attr->speed) {
		snprintf(dev->speed_source, sizeof(dev->speed_source), "NIC link attributes");
		return (int)(info->nic->link_attr->speed / 1000000);
	}
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "/sys/class/net/%s/speed", dev->choice.domain);
	FILE *f = fopen(path, "r");
	if (f) {
		int mbps = 0;
		int ok = fscanf(f, "%d", &mbps) == 1;
		fclose(f);
		if (ok && mbps > 0) {
			snprintf(dev->speed_source, sizeof(dev->speed_source), "%s", "sysfs interface speed");
			return mbps;
		}
	}
	snprintf(dev->speed_source, sizeof(dev->speed_source), "default (link speed unknown)");
	return 10000;
}

static void device_props(struct core_plugin *p, struct proto_device *dev)
{
	struct net_props *pr = &dev->props;
	memset(pr, 0, sizeof(*pr));
	device_pci_path(dev);
	pr->name = dev->choice.name;
	pr->pci_path = dev->pci_path[0] ? dev->pci_path : NULL;
	/* Ports of one NIC share the PCI device, hence the guid; others differ. */
	const char *key = dev->pci_path[0] ? dev->pci_path : dev->choice.name;
	pr->guid = util_fnv1a64(key, strlen(key), 0x9e3779b97f4a7c15ULL);
	pr->ptr_support = dev->plan.hmem ? p->hmem.ptr_support : NCCL_PTR_HOST;
	pr->reg_is_global = 1;
	pr->force_flush = dev->plan.hmem && p->hmem.force_flush;
	pr->speed = device_speed(dev, &p->cfg);
	pr->port = 0;
	pr->latency = 0; /* libfabric reports no latency: 0 leaves NCCL's own estimate */
	uint64_t comms = 1ULL << dev->layout.conn_bits;
	pr->max_comms = comms > 0x7fffffff ? 0x7fffffff : (int)comms;
	pr->max_recvs = (int)p->cfg.v[CFG_MAX_RECVS].i;
	pr->net_device_type = NCCL_NET_DEVICE_HOST;
	pr->net_device_version = 0;
	pr->vdev_count = 1;
	pr->vdevs[0] = dev->index;
	size_t max = dev->info->ep_attr ? dev->info->ep_attr->max_msg_size : 0;
	if (max == 0 || max > NCCL_MAX_NET_SIZE_BYTES)
		max = NCCL_MAX_NET_SIZE_BYTES;
	pr->max_p2p_bytes = max;
	pr->max_coll_bytes = max;
	pr->max_multi_request_size = 1;
	pr->rail_id = -1;
	pr->plane_id = -1;
}

/* ---------------- init / finalize ---------------- */

/* Resident memory (MB) and open descriptors of the process, from /proc. */
static void process_usage(long *rss_mb, int *fds)
{
	*rss_mb = -1;
	*fds = -1;
	FILE *f = fopen("/proc/self/status", "r");
	if (f) {
		char line[256];
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "VmRSS:", 6))
				*rss_mb = strtol(line + 6, NULL, 10) / 1024;
		fclose(f);
	}
	DIR *d = opendir("/proc/self/fd");
	if (d) {
		int n = 0;
		while (readdir(d))
			n++;
		closedir(d);
		*fds = n - 3; /* ".", ".." and the directory's own descriptor */
	}
}

/* One line with what the plugin holds: endpoints, connections, registrations
 * and the process's memory and descriptors. */
static void log_resources(struct core_plugin *p, const char *when)
{
	int eps = 0, regs = 0, threads = 0;
	unsigned dropped = 0;
	for (int d = 0; d < p->ndevs; d++) {
		struct ofi_domain *dom = p->devs[d].dom;
		if (!dom)
			continue;
		eps += dom->nep;
		regs += ofi_mr_count(dom);
		for (int i = 0; i < dom->nep; i++) {
			threads += dom->eps[i]->has_thread;
			dropped += atomic_load(&dom->eps[i]->dropped);
		}
	}
	long rss, total;
	int fds, live, peak;
	process_usage(&rss, &fds);
	proto_comm_counts(&live, &peak, &total);
	LOG_INFO(NCCL_INIT | NCCL_NET,
		 "resources %s: %d endpoint(s), %d progress thread(s), connections %d open / %d peak / "
		 "%ld made, %d registration(s), %u malformed message(s) or address(es) dropped; "
		 "process RSS %ld MB, %d open fds",
		 when, eps, threads, live, peak, total, regs, dropped, rss, fds);
}

static void plugin_free(struct core_plugin *p)
{
	log_resources(p, "at finalize");
	proto_pending_connects_close(-1);
	for (int d = 0; d < p->ndevs; d++)
		ofi_domain_drain(p->devs[d].dom, 20000000ULL, 500000000ULL);
	for (int d = p->ndevs - 1; d >= 0; d--) {
		ofi_domain_close(p->devs[d].dom);
		p->devs[d].dom = NULL;
		pthread_mutex_destroy(&p->devs[d].open_lock);
		if (p->devs[d].directed_info)
			fi_freeinfo(p->devs[d].directed_info);
		if (p->rma[d].info)
			fi_freeinfo((struct fi_info *)p->rma[d].info);
	}
	ofi_discovery_free(&p->disc);
	cuda_close();
	if (p->libfabric_pin)
		dlclose(p->libfabric_pin); /* RTLD_NODELETE keeps it mapped regardless */
	free(p);
}

static void log_decision(struct core_plugin *p)
{
	struct ofi_discovery *d = &p->disc;
	LOG_INFO(NCCL_INIT | NCCL_NET, "libfabric %u.%u from %s (plugin built against %u.%u); provider %s",
		 FI_MAJOR(d->runtime_version), FI_MINOR(d->runtime_version), d->runtime_path,
		 FI_MAJOR(d->build_version), FI_MINOR(d->build_version), d->sel.reason);
	if (d->sel.names[0])
		LOG_INFO(NCCL_INIT | NCCL_NET, "NCCL_FABRIC_PROVIDER: %s", d->sel.names);
	if (d->env_kept)
		LOG_WARN(NCCL_INIT | NCCL_NET | NCCL_ENV, "%s", d->env_note);
	else if (d->env_note[0])
		LOG_INFO(NCCL_INIT | NCCL_NET | NCCL_ENV, "%s", d->env_note);
	for (int i = 0; i < p->ndevs; i++) {
		struct proto_device *dev = &p->devs[i];
		LOG_INFO(NCCL_INIT | NCCL_NET,
			 "device %d: %s, fabric %s, pciPath %s, speed %d Mbps (%s), ptrSupport 0x%x", i,
			 dev->props.name, dev->info->fabric_attr->name,
			 dev->props.pci_path ? dev->props.pci_path : "none", dev->props.speed,
			 dev->speed_source, dev->props.ptr_support);
	}
	LOG_INFO(NCCL_INIT | NCCL_NET, "GPU memory: %s", p->hmem.reason);
	if (d->probe.attempted)
		LOG_INFO(NCCL_INIT | NCCL_NET,
			 "FI_OPT_CUDA_API_PERMITTED=false answered %s; FI_HMEM_P2P: %s; DMA-BUF: %s; "
			 "flush: %s; forceFlush %d",
			 p->hmem.answer, p->hmem.p2p, p->hmem.dmabuf_reason, p->hmem.flush_reason,
			 p->hmem.force_flush);
	LOG_INFO(NCCL_INIT | NCCL_NET, "What NCCL will do: %s", p->hmem.nccl_effect);
	if (p->ndevs > 0) {
		LOG_INFO(NCCL_INIT | NCCL_NET, "device-initiated networking (RMA plugin): %s",
			 p->rma[0].decision.reason);
		if (p->rma[0].decision.offered)
			LOG_INFO(NCCL_INIT | NCCL_NET, "RMA plugin: strong signals: %s",
				 p->rma[0].decision.order_reason);
		if (p->rma[0].decision.warning[0])
			LOG_WARN(NCCL_INIT | NCCL_NET, "%s", p->rma[0].decision.warning);
	}
	if (p->hmem.verdict != POLICY_HMEM_PROMISED)
		LOG_INFO(NCCL_INIT | NCCL_NET, "GPU memory remedy: %s", p->hmem.remedy);
	if (p->hmem.warning[0])
		LOG_WARN(NCCL_INIT | NCCL_NET, "%s", p->hmem.warning);
	for (int c = 0; c < d->sel.ncands; c++) {
		const struct policy_cand *cd = &d->sel.cands[c];
		LOG_TRACE(NCCL_INIT | NCCL_NET, "candidate %d: %s domain %s fabric %s (%s): %s", c,
			  cd->prov, cd->domain, cd->fabric, d->attempts[cd->attempt].plan.label,
			  cd->reason);
	}
}

/* The device as NCCL's RMA plugin offers it: the same entry asked again with
 * RMA and atomics (and FI_FENCE where the provider has it), and the policy's
 * verdict. */
static void rma_device_init(struct core_plugin *p, struct proto_device *dev,
			    struct rma_device *r)
{
	const uint64_t need = FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ |
			      FI_REMOTE_WRITE;
	memset(r, 0, sizeof(*r));
	r->net = dev;
	struct fi_info *info = NULL;
	if ((int)p->cfg.v[CFG_RMA_PLUGIN].i != CFG_RMA_PLUGIN_OFF) {
		/* with atomics for signals where the provider has them, else without */
		const uint64_t tries[] = { need | FI_FENCE, need,
					   (need & ~FI_ATOMIC) | FI_MSG | FI_FENCE,
					   (need & ~FI_ATOMIC) | FI_MSG };
		for (size_t t = 0; t < sizeof(tries) / sizeof(tries[0]) && !info; t++)
			info = ofi_info_with_caps(dev->info, tries[t]);
	}
	struct policy_rma_caps caps = { 0, 0, false };
	if (info) {
		caps.caps = info->caps;
		caps.msg_order = info->tx_attr ? info->tx_attr->msg_order : 0;
		caps.hmem = (info->caps & FI_HMEM) != 0;
	}
	r->info = info;
	policy_rma((int)p->cfg.v[CFG_RMA_PLUGIN].i, p->disc.sel.provider, &caps,
		   &p->hmem, &r->decision);
}

/* Builds the whole context; on failure returns NULL, with *rc the -FI_* code,
 * and has logged why. */
/* CPUs this process may run on (its affinity: a rank pinned to a socket
 * counts that socket's). */
static int core_cpus(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

static struct core_plugin *plugin_create(int *rc)
{
	struct core_plugin *p = calloc(1, sizeof(*p));
	if (!p) {
		*rc = -FI_ENOMEM;
		return NULL;
	}
	proto_comm_counts_reset();
	/* Providers may install signal handlers that point into libfabric
	 * (policy_traits.c, "signal handlers"): it must outlive any dlclose of
	 * this plugin. */
	p->libfabric_pin = dlopen("libfabric.so.1", RTLD_NOW | RTLD_NODELETE | RTLD_NOLOAD);

	p->cfg_invalid = cfg_load(&p->cfg, NULL, NULL);
	for (int id = 0; id < CFG_COUNT; id++)
		if (p->cfg.v[id].source == CFG_SRC_INVALID_ENV)
			LOG_WARN(NCCL_INIT | NCCL_ENV, "%s=\"%s\" is not valid; using the default \"%s\"",
				 cfg_descs[id].name, p->cfg.v[id].invalid, cfg_descs[id].def);

	/* counted by the other plugin processes on this host (their rails) */
	util_procs_dir(p->procs_dir, sizeof(p->procs_dir));
	int jrc = util_procs_join(p->procs_dir);
	if (jrc)
		LOG_INFO(NCCL_INIT | NCCL_NET, "%s: %s; automatic rails count this process alone",
			 p->procs_dir, strerror(-jrc));

	cuda_open(&p->cuda);
	int drc = ofi_discover(&p->cfg, &p->disc);
	if (drc) {
		LOG_WARN(NCCL_INIT | NCCL_NET,
			 "no usable libfabric provider: %s. Run nccl-fabric-info to see every "
			 "candidate and why it was rejected",
			 p->disc.sel.reason);
		*rc = ofi_err_sys(drc);
		plugin_free(p);
		return NULL;
	}
	struct policy_selection *sel = &p->disc.sel;
	if (sel->has_hmem) {
		const struct fi_info *probe_info = NULL;
		for (int i = 0; i < sel->ndevs && !probe_info; i++)
			probe_info = sel->devs[i].hmem_info;
		ofi_probe_run(probe_info, &p->disc.probe);
	}
	policy_hmem(sel, &p->disc.probe, &p->cuda, &p->cfg, p->disc.runtime_version, &p->hmem);

	p->ndevs = sel->ndevs;
	/* what automatic rails read (a directory scan: only where auto is asked) */
	int ncpus = core_cpus();
	int nprocs = p->cfg.v[CFG_RAILS].i == 0 ? util_procs_count(p->procs_dir) : 1;
	for (int i = 0; i < sel->ndevs; i++) {
		struct proto_device *dev = &p->devs[i];
		const struct policy_dev_choice *ch = &sel->devs[i];
		bool gpu = p->hmem.use_hmem && ch->hmem_info;
		/* Host-only devices use the entry without FI_HMEM: an FI_HMEM entry may
		 * have worse attributes (policy_traits.c, "host entry"). */
		const struct fi_info *info = gpu ? ch->hmem_info :
					     ch->host_info ? ch->host_info : ch->hmem_info;
		/* Directed receives: a connection's data receives then match only
		 * its peer, so another process cannot fill them by guessing tags. */
		struct fi_info *directed = ofi_info_with_caps(info, FI_DIRECTED_RECV);
		if (directed)
			info = directed;
		struct policy_device_input in = {
			.info = info, .provider = sel->provider, .fi_version = p->disc.runtime_version,
			.cfg = &p->cfg, .hmem = &p->hmem, .gpu = gpu,
			.cxi_writedata = getenv("FI_CXI_ENABLE_WRITEDATA"),
			.ncpus = ncpus, .nprocs = nprocs};
		struct policy_device_plan plan;
		policy_device(&in, &plan, &p->why[i]);
		proto_device_init(dev, i, ch, info, p->disc.sel.provider, p->procs_dir, &plan,
				  &p->why[i]);
		dev->directed_info = directed;
		device_props(p, dev);
		rma_device_init(p, dev, &p->rma[i]);
	}
	*rc = 0;
	return p;
}

int net_init(void **ctx, ncclDebugLogger_t logger)
{
	if (ctx)
		*ctx = NULL;
	pthread_mutex_lock(&plugin_lock);
	if (logger)
		log_set_logger(logger);
	else
		log_read_env();
	int rc = 0;
	if (!plugin) {
		struct core_plugin *p = plugin_create(&rc);
		if (!p) {
			pthread_mutex_unlock(&plugin_lock);
			return rc;
		}
		proto_devices_set(p->devs, p->ndevs);
		rma_devices_set(p->rma, p->ndevs);
		__atomic_store_n(&plugin, p, __ATOMIC_RELEASE);
		log_decision(p);
	}
	if (ctx) {
		struct core_ctx *c = calloc(1, sizeof(*c));
		if (!c) {
			pthread_mutex_unlock(&plugin_lock);
			return -FI_ENOMEM;
		}
		c->magic = CORE_CTX_MAGIC;
		*ctx = c;
	}
	plugin->refs++;
	pthread_mutex_unlock(&plugin_lock);
	return 0;
}

int net_finalize(void *ctx)
{
	struct core_ctx *c = ctx;
	/* NCCL 2.28 also calls finalize after a failed init, with whatever ctx
	 * holds: only a context this plugin made counts. */
	if (!c || c->magic != CORE_CTX_MAGIC)
		return 0;
	pthread_mutex_lock(&plugin_lock);
	c->magic = 0;
	free(c);
	if (plugin && --plugin->refs == 0) {
		struct core_plugin *p = plugin;
		__atomic_store_n(&plugin, NULL, __ATOMIC_RELEASE);
		proto_devices_set(NULL, 0);
		rma_devices_set(NULL, 0);
		plugin_free(p);
		LOG_INFO(NCCL_INIT | NCCL_NET, "finalized: every libfabric object closed");
		log_set_logger(NULL);
	}
	pthread_mutex_unlock(&plugin_lock);
	return 0;
}

int net_devices(int *ndev)
{
	struct core_plugin *p = core_plugin_get();
	*ndev = p ? p->ndevs : 0;
	return 0;
}

int net_get_properties(int dev, struct net_props *props)
{
	struct core_plugin *p = core_plugin_get();
	if (!p || dev < 0 || dev >= p->ndevs) {
		LOG_WARN(NCCL_NET, "getProperties: device %d does not exist", dev);
		return -FI_EINVAL;
	}
	*props = p->devs[dev].props;
	return 0;
}
