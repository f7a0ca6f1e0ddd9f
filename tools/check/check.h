/*
 * check.h - nccl-fabric-check, the plugin conformance checker.
 *
 * A case is a function run by each of its ranks (forked processes). Unless it
 * says CK_OWN_LOAD, the runner has already loaded the plugin in the rank,
 * called init, devices and getProperties(dev), and finalizes/unloads it after
 * a passing case (v11+: NCCL 2.28 dlcloses after the last finalize).
 */
#ifndef NCCL_FABRIC_CHECK_H
#define NCCL_FABRIC_CHECK_H

#include "harness.h"

#define CK_OWN_LOAD 0x1u /* the case dlopens the plugin itself */
#define CK_NETNS 0x2u    /* ranks share a private network namespace, if one can be made */
#define CK_NETNS_PAIR 0x4u /* ranks 0 and 1 each in its own namespace, joined by a veth
			      * pair (CK_LINK_IFACE): a link the case can cut */
#define CK_LINK_IFACE "fabcut0"

#define CK_DEFAULT_TIMEOUT_S 60.0
#define CK_TAG 0x2a /* NCCL uses one tag per peer; any value will do */

struct ck_opts {
	char plugin[4096];
	size_t max_size; /* cap on message sizes (--max-size), SIZE_MAX if none */
	int quick;
	uint64_t seed;
	int dev;
	unsigned long soak_msgs; /* soak until this many messages each way (--soak-messages) */
};

struct ck_case;

/* Memory the ck_side_* helpers allocate: host memory unless a case sets type
 * to NCCL_PTR_CUDA; then each region is marked as device memory with mark
 * (the stub CUDA driver's stubcuda_mark_device, see cases_hmem.c), registered
 * as NCCL_PTR_CUDA, and unmarked when released. With STUBCUDA_GUARD the CPU
 * cannot touch marked memory: the helpers fill and check it through view. */
typedef struct ck_mem {
	int type; /* 0 or NCCL_PTR_HOST: host; NCCL_PTR_CUDA: "GPU" memory */
	int (*mark)(void *p, size_t len);
	int (*unmark)(void *p);
	void *(*view)(const void *p); /* where the CPU reaches marked memory (or NULL) */
} ck_mem_t;

typedef struct ck {
	fh_rank_t *r;
	fh_net_t *net; /* NULL for CK_OWN_LOAD cases */
	int version;
	int dev;
	int ndev;
	fh_props_t props;
	const struct ck_opts *o;
	const struct ck_case *c;
	int netns; /* 1 when the ranks run in a private network namespace (or pair) */
	char netns_why[160]; /* CK_NETNS_PAIR: why the pair could not be made */
	ck_mem_t mem;
} ck_t;

typedef struct ck_case {
	const char *name;
	const char *desc;
	int nranks;
	int vmin, vmax;
	unsigned flags;
	double timeout_s; /* 0: CK_DEFAULT_TIMEOUT_S; scaled by the multiplier */
	int (*fn)(ck_t *ck);
	size_t arg; /* per-case parameter (e.g. the size of sizes/N) */
} ck_case_t;

/* Case tables, one per file. */
const ck_case_t *ck_cases_basic(int *n);
const ck_case_t *ck_cases_traffic(int *n);
const ck_case_t *ck_cases_errors(int *n);
const ck_case_t *ck_cases_lifecycle(int *n);
const ck_case_t *ck_cases_hmem(int *n);
const ck_case_t *ck_cases_faults(int *n);

/* ---- check_util.c: helpers shared by the cases ---- */

size_t ck_cap(const ck_t *ck, size_t size);
/* The device's eager limit, as the plugin's tools table says (0: every message
 * waits for its receive), or `unknown` where the plugin does not say. */
long ck_eager_max(const ck_t *ck, long unknown);
/* Seed for message idx sent from rank `from` to rank `to` on stream `stream`. */
uint64_t ck_seed(const ck_t *ck, int from, int to, int stream, int idx);
/* Grouped receives NCCL would post: min(maxRecvs, FH_MAX_GROUP). */
int ck_max_group(const ck_t *ck);

/* One side of a transfer: n messages in one registered region (like NCCL's
 * buffers: one regMr, sends at offsets), each slice followed by a gap whose
 * bytes must stay untouched. */
typedef struct ck_side {
	int is_recv;
	void *comm;
	int n;
	fh_buf_t buf;
	size_t *off;   /* slice offset in buf */
	size_t *len;   /* message size (sent, or expected to arrive) */
	size_t *post;  /* receives: posted size */
	uint64_t *seed;
	fh_op_t *ops;
	int type;   /* how buf was registered: NCCL_PTR_HOST or NCCL_PTR_CUDA */
	int (*unmark)(void *p); /* set while buf is marked as device memory */
	unsigned char *cpu; /* where the CPU fills and checks buf.ptr's bytes */
} ck_side_t;

int ck_side_send(ck_t *ck, ck_side_t *s, void *sc, int n, const size_t *sizes,
		 const uint64_t *seeds, int tag);
/* post_size 0: post exactly the message size. */
int ck_side_recv(ck_t *ck, ck_side_t *s, void *rc, int n, const size_t *sizes, size_t post_size,
		 const uint64_t *seeds, int tag);
/* Receives: every byte, gaps, guards. Sends: the data was not modified. */
int ck_side_verify(ck_t *ck, ck_side_t *s, const char *what);
/* deregMr + free; returns FH_FAIL if deregMr fails (and failing is wanted). */
int ck_side_release(ck_t *ck, ck_side_t *s);
/* Run the ops of several sides together (message i of each side in turn). */
int ck_sides_run(ck_t *ck, ck_side_t **sides, int nsides, int window);

/* Send (if sc) and/or receive (if rc) n messages of the given sizes; seeds of
 * message i: send_seeds[i] / recv_seeds[i]. Everything verified. */
int ck_exchange(ck_t *ck, void *sc, void *rc, int n, const size_t *sizes,
		const uint64_t *send_seeds, const uint64_t *recv_seeds, int window);
/* n messages of one size over sc/rc between ranks a (sends) and b (receives);
 * the other ranks do nothing. Seeds from ck_seed(a, b, stream, i). */
int ck_oneway(ck_t *ck, void *sc, void *rc, int a, int b, int stream, int n, size_t size,
	      int window);

int ck_close_pair(ck_t *ck, void *sc, void *rc);
/* Check a result code: FH_OK if ncclSuccess, else a failure naming the call. */
int ck_ok(ck_t *ck, ncclResult_t rc, const char *call);

/* ---- check_proc.c: process inspection for the lifecycle cases ---- */

int ck_thread_count(void);
/* Names (comm) of the threads other than the main one, comma-separated. */
void ck_thread_names(char *out, size_t len);
#define CK_MAX_OBJS 256
typedef struct ck_obj {
	char name[256];
	uintptr_t lo, hi; /* [lo, hi) over the PT_LOAD segments */
} ck_obj_t;
typedef struct ck_objs {
	int n;
	ck_obj_t obj[CK_MAX_OBJS];
} ck_objs_t;
void ck_objs_snapshot(ck_objs_t *out);
/* Objects of `now` that are not in `before`, appended to `out` (deduplicated). */
void ck_objs_new(const ck_objs_t *before, const ck_objs_t *now, ck_objs_t *out);
/* A SIGSEGV/SIGBUS/SIGINT/SIGTERM handler that lies inside an object of `gone`
 * that is no longer loaded: describes it in msg and returns -1. */
int ck_handlers_check(const ck_objs_t *gone, char *msg, size_t len);
/* Join a private network namespace with the other ranks (best effort). */
int ck_netns_enter(ck_t *ck);
/* CK_NETNS_PAIR (best effort: ck->netns 0 and netns_why say why not). Sets
 * FI_TCP_IFACE and friends to the link. Needs root and iproute2's ip. */
int ck_netns_pair(ck_t *ck);
/* Runs `ip args` in the rank's namespace, quietly; 0 on success. */
int ck_ip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
