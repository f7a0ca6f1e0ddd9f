/*
 * harness.h - black-box test harness for NCCL net plugins (fabric_harness).
 *
 * The harness drives libnccl-net-fabric.so exactly as NCCL does: dlopen with
 * RTLD_NOW|RTLD_LOCAL, one ncclNetPlugin_vN table, non-blocking connect/accept,
 * requests polled with test(). It is shared by the conformance checker
 * (tools/check) and the bandwidth tool (tools/perf).
 *
 * Modules:
 *   fh_net    plugin location, loading, and ONE latest-style call interface over
 *             every table version of nccl_versions.h's list (all per-version
 *             translation is there)
 *   fh_log    the logger handed to init(); counts WARN lines
 *   fh_ranks  forked ranks, out-of-band channel, watchdog
 *   fh_data   (seed, offset) byte patterns, guarded buffers
 *   fh_ops    connection setup and a small request engine (post/retry/test)
 *
 * Return convention of harness helpers that take an fh_rank_t: FH_OK, or
 * FH_FAIL/FH_SKIP after the reason was recorded with fh_fail()/fh_skip().
 */
#ifndef FABRIC_HARNESS_H
#define FABRIC_HARNESS_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nccl_versions.h"
#include "nccl_fabric_tools.h"

#define FH_OK 0
#define FH_FAIL 1
#define FH_SKIP 77 /* automake's "skipped" exit status */

#define FH_MAX_RANKS 8
#define FH_MAX_GROUP 8 /* most buffers in one grouped receive we ever post */
/* The versions of src/nccl/nccl_versions.h's list, oldest to newest. */
#define FH_VERSION_MIN NCCL_NET_VERSION_MIN
#define FH_VERSION_MAX NCCL_NET_VERSION_MAX
#define FH_PLUGIN_FILE "libnccl-net-fabric.so"
#define FH_REASON_MAX 768
#define FH_NOTE_MAX 256

#define FH_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* ------------------------------------------------------------------ fh_log */

/* Rank shown in log lines ("[rank N]"); -1 shows the parent. */
void fh_log_set_rank(int rank);
/* The ncclDebugLogger_t passed to init(). WARN and ABORT always go to stderr;
 * INFO and TRACE only when NCCL_DEBUG asks for them. Safe from any thread. */
void fh_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
	       const char *fmt, ...) FH_PRINTF(5, 6);
/* WARN lines the plugin logged in this process so far. */
unsigned long fh_log_warn_count(void);
/* WARN lines, so far, that contain `needle` (set before counting; NULL:
 * none). One needle per process at a time. */
void fh_log_watch(const char *needle);
unsigned long fh_log_watch_count(void);
/* Keep the last plugin message (any level, printed or not) that contains
 * needle; fh_log_kept copies it out (empty and 0 if none yet). */
void fh_log_keep(const char *needle);
int fh_log_kept(char *out, size_t len);

/* A size with an optional K/M/G suffix (KiB, MiB, GiB); 0 or -1. */
int fh_parse_size(const char *s, size_t *out);

/* ------------------------------------------------------------------ fh_net */

/* Which fields of fh_props_t the loaded version actually carries. */
#define FH_HAVE_NETDEVICE 0x01u /* v7+: netDeviceType, netDeviceVersion */
#define FH_HAVE_REGISGLOBAL 0x02u /* v8+ */
#define FH_HAVE_V9 0x04u         /* v9+: forceFlush, vProps, maxP2pBytes, maxCollBytes */
#define FH_HAVE_MULTIREQ 0x08u   /* v11+: maxMultiRequestSize */
#define FH_HAVE_RAIL 0x10u       /* v12+: railId, planeId */

/* Every version's properties, widened to the latest layout. */
typedef struct fh_props {
	unsigned have; /* FH_HAVE_* */
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	int netDeviceType;
	int netDeviceVersion;
	int vndevs;
	int vdevs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
	int vdevs_cap; /* 4 for v9-v11, 8 from v12 */
	size_t maxP2pBytes;
	size_t maxCollBytes;
	int maxMultiRequestSize;
	int railId;
	int planeId;
} fh_props_t;

/* How fh_net_connect/accept pass the device-handle argument (v7+). */
enum fh_devcomm_mode {
	FH_DEVCOMM_PTR_TO_NULL = 0, /* &handle with handle == NULL (NCCL's usual call) */
	FH_DEVCOMM_NULL = 1,        /* the argument itself is NULL */
};

struct fh_net_ops; /* the version's calls (fh_net.c) */

typedef struct fh_net {
	int version; /* FH_VERSION_MIN..FH_VERSION_MAX */
	const struct fh_net_ops *ops;
	char path[4096];
	void *dl;
	const void *table; /* ncclNet_vN_t */
	void *ctx;         /* v11+: the ctx of fh_net_init(); NULL before */
	uint64_t comm_id;  /* v11+: commId handed to init */
	ncclNetCommConfig_t config; /* v10 connect / v11+ init */
	enum fh_devcomm_mode devcomm_mode;
	/* Set by connect/accept when the plugin returned a device handle. */
	atomic_int devcomm_seen;
	atomic_int devcomm_bad_type; /* returned handle's type != props */
	int props_device_type;
	atomic_ulong send_retries; /* isend returned success with NULL request */
	atomic_ulong recv_retries; /* irecv ditto */
} fh_net_t;

/* Plugin path: cli if given, else $NCCL_NET_PLUGIN when it contains '/', else
 * <dir of /proc/self/exe>/../lib/libnccl-net-fabric.so. Returns 0 or -1. */
int fh_plugin_locate(const char *cli, char *out, size_t outlen);

/* dlopen(path, RTLD_NOW|RTLD_LOCAL) and look up ncclNetPlugin_v<version>. Checks
 * that every member NCCL calls unconditionally is non-NULL. On error returns -1
 * with a message in err (and nothing stays loaded). */
int fh_net_open(fh_net_t *net, const char *path, int version, char *err, size_t errlen);
/* dlclose; the table is unusable afterwards. */
void fh_net_unload(fh_net_t *net);
const char *fh_net_name(const fh_net_t *net);
/* NCCL_NET_MAX_REQUESTS for this version: 8 for v6, else 32. */
int fh_net_max_requests(const fh_net_t *net);
/* The plugin's tools table, NULL if it does not export one. */
const ncclFabricTools_v1_t *fh_net_tools(const fh_net_t *net);
int fh_net_has_finalize(const fh_net_t *net);
int fh_net_has_optional(const fh_net_t *net, const char *member);

/* ---- the uniform call interface (latest-style arguments) ---- */
/* init for this net (net->ctx receives the v11+ ctx). */
ncclResult_t fh_net_init(fh_net_t *net);
/* init producing an extra ctx (v11+); for older versions same as fh_net_init. */
ncclResult_t fh_net_init_ctx(fh_net_t *net, void **ctx);
/* v11+: finalize(ctx); older versions: ncclSuccess, nothing called. */
ncclResult_t fh_net_finalize(fh_net_t *net, void *ctx);
ncclResult_t fh_net_devices(fh_net_t *net, int *ndev);
ncclResult_t fh_net_get_properties(fh_net_t *net, int dev, fh_props_t *props);
ncclResult_t fh_net_listen(fh_net_t *net, void *ctx, int dev, void *handle, void **lcomm);
ncclResult_t fh_net_connect(fh_net_t *net, void *ctx, int dev, void *handle, void **scomm);
ncclResult_t fh_net_accept(fh_net_t *net, void *lcomm, void **rcomm);
/* v6/v7 take an int size: sizes above INT_MAX return ncclInvalidArgument
 * without calling the plugin. */
ncclResult_t fh_net_reg_mr(fh_net_t *net, void *comm, void *data, size_t size, int type,
			   void **mhandle);
/* regMrDmaBuf: data lies offset bytes into the DMA-BUF fd (ncclInvalidUsage
 * where the table has none). */
ncclResult_t fh_net_reg_mr_dmabuf(fh_net_t *net, void *comm, void *data, size_t size, int type,
				  uint64_t offset, int fd, void **mhandle);
ncclResult_t fh_net_dereg_mr(fh_net_t *net, void *comm, void *mhandle);
ncclResult_t fh_net_isend(fh_net_t *net, void *scomm, void *data, size_t size, int tag,
			  void *mhandle, void **request);
/* v9+: stores NCCL_NET_OPTIONAL_RECV_COMPLETION in *request first, as NCCL may;
 * callers check that the plugin overwrote it. */
ncclResult_t fh_net_irecv(fh_net_t *net, void *rcomm, int n, void **data, size_t *sizes,
			  int *tags, void **mhandles, void **request);
ncclResult_t fh_net_iflush(fh_net_t *net, void *rcomm, int n, void **data, int *sizes,
			   void **mhandles, void **request);
ncclResult_t fh_net_test(fh_net_t *net, void *request, int *done, int *sizes);
ncclResult_t fh_net_close_send(fh_net_t *net, void *scomm);
ncclResult_t fh_net_close_recv(fh_net_t *net, void *rcomm);
ncclResult_t fh_net_close_listen(fh_net_t *net, void *lcomm);
/* v11+ optional member; ncclInvalidUsage from the harness when absent. */
ncclResult_t fh_net_set_net_attr(fh_net_t *net, void *ctx, ncclNetAttr_t *attr);

const char *fh_result_str(ncclResult_t rc);

/* ---------------------------------------------------------------- fh_ranks */

typedef struct fh_rank {
	int rank;
	int nranks;
	int oob[FH_MAX_RANKS]; /* stream socket to each peer; -1 for self */
	int result_fd;         /* to the parent: stage lines and the final text */
	double timeout_mult;
	pthread_mutex_t lock; /* reason/note may be set from case threads */
	int failed;
	char reason[FH_REASON_MAX];
	char note[FH_NOTE_MAX];
	void *user;
} fh_rank_t;

/* Body of one rank (runs in the forked child). Returns FH_OK/FH_FAIL/FH_SKIP. */
typedef int (*fh_rank_fn)(fh_rank_t *r, void *arg);

typedef struct fh_outcome {
	int status; /* FH_OK, FH_FAIL or FH_SKIP */
	int timed_out;
	double seconds;
	int shm_left;    /* /dev/shm segments the ranks left behind (removed) */
	char text[2048]; /* FAIL/SKIP reason, or PASS notes */
} fh_outcome_t;

/* NCCL_FABRIC_TEST_TIMEOUT_MULTIPLIER (default 1). */
double fh_timeout_multiplier(void);
/* Fork nranks ranks running fn, and wait at most timeout_s (already scaled).
 * No plugin may be loaded in the calling process. A hang is killed and
 * reported as "timeout (hang)", a crash as the signal that killed the rank. */
void fh_launch(int nranks, double timeout_s, fh_rank_fn fn, void *arg, fh_outcome_t *out);

/* Count libfabric shm segments (/dev/shm/<pid>:*) of process pid, removing
 * them if remove (only for dead ranks); first gets the first one's path. */
int fh_shm_segments(pid_t pid, int remove, char *first, size_t len);

/* Record the first failure reason; returns FH_FAIL. */
int fh_fail(fh_rank_t *r, const char *fmt, ...) FH_PRINTF(2, 3);
int fh_skip(fh_rank_t *r, const char *fmt, ...) FH_PRINTF(2, 3);
/* Append to the note printed with PASS. */
void fh_note(fh_rank_t *r, const char *fmt, ...) FH_PRINTF(2, 3);
/* Tell the parent what the rank is doing now; shown if the case hangs. */
void fh_stage(fh_rank_t *r, const char *fmt, ...) FH_PRINTF(2, 3);
int fh_failed(fh_rank_t *r);

int fh_oob_send(fh_rank_t *r, int peer, const void *buf, size_t len);
int fh_oob_recv(fh_rank_t *r, int peer, void *buf, size_t len);
/* 1 if peer has sent something (or closed), 0 if not, without blocking. */
int fh_oob_ready(fh_rank_t *r, int peer);
int fh_oob_barrier(fh_rank_t *r);

double fh_now(void);
/* Give the CPU away while polling (ranks share few cores with progress threads). */
void fh_relax(unsigned *idle);

/* ----------------------------------------------------------------- fh_data */

uint64_t fh_mix64(uint64_t x);
/* Byte at offset off of the pattern for seed. */
uint8_t fh_pattern_byte(uint64_t seed, size_t off);
void fh_pattern_fill(void *buf, size_t len, uint64_t seed);
/* 0 if buf holds the pattern; else -1 with the first bad offset. */
int fh_pattern_check(const void *buf, size_t len, uint64_t seed, size_t *bad_off);
uint64_t fh_checksum(const void *buf, size_t len);

/* Page-aligned mmap'd buffer with guard bytes on both sides (a write after
 * munmap faults instead of corrupting the heap). */
typedef struct fh_buf {
	unsigned char *base;
	size_t map_len;
	unsigned char *ptr; /* usable area */
	size_t size;
	size_t guard;
	void *mh;   /* regMr handle */
	void *comm; /* comm it is registered on */
} fh_buf_t;

int fh_buf_alloc(fh_buf_t *b, size_t size, size_t guard);
void fh_buf_free(fh_buf_t *b);
/* 0 if both guards are intact, else -1 with the offset (relative to ptr,
 * negative before it) of the first changed guard byte. */
int fh_buf_guard_check(const fh_buf_t *b, long *bad_off);
/* regMr(comm, ptr, max(size,1), NCCL_PTR_HOST); with_guard registers the
 * guards too (so the provider itself cannot catch overruns). */
ncclResult_t fh_buf_reg(fh_net_t *net, fh_buf_t *b, void *comm, int with_guard);
ncclResult_t fh_buf_dereg(fh_net_t *net, fh_buf_t *b);

/* ------------------------------------------------------------------ fh_ops */

/* Open a send comm to rank send_to and a recv comm from rank recv_from (either
 * may be -1) through the OOB channel: listen, ship the handle, then call connect
 * and accept alternately, as NCCL does, until both are done. Fails if a single
 * connect/accept call blocks for long. */
int fh_link(fh_rank_t *r, fh_net_t *net, int dev, int send_to, int recv_from, void **scomm,
	    void **rcomm);
/* Both ends in this process on one thread, through one listen handle. */
int fh_link_self(fh_rank_t *r, fh_net_t *net, int dev, void **scomm, void **rcomm);
/* Call connect until it returns a comm, an error or the time runs out.
 * Returns the last result; *scomm stays NULL unless connected. */
ncclResult_t fh_connect_until(fh_rank_t *r, fh_net_t *net, int dev, void *handle, void **scomm,
			      double seconds, int *timed_out);

/* Ends this rank at once, as a killed process would end (the kernel closes
 * its sockets; nothing of the plugin runs), counting as passed with note:
 * the victim of a peer-death case. */
void fh_rank_die(fh_rank_t *r, const char *note) __attribute__((noreturn));

typedef enum { FH_OP_SEND = 0, FH_OP_RECV = 1, FH_OP_FLUSH = 2 } fh_op_kind_t;
enum { FH_OP_PENDING = 0, FH_OP_POSTED = 1, FH_OP_DONE = 2 };
#define FH_NO_CHECK ((size_t)-1)

typedef struct fh_op {
	fh_op_kind_t kind;
	void *comm;
	int n;
	void *data[FH_MAX_GROUP];
	size_t size[FH_MAX_GROUP]; /* posted */
	int tag[FH_MAX_GROUP];
	void *mh[FH_MAX_GROUP];
	size_t expect[FH_MAX_GROUP]; /* size test() must report, FH_NO_CHECK */
	/* filled in */
	int state;
	void *req;
	int got[FH_MAX_GROUP]; /* sizes test() reported (-1: left untouched) */
	unsigned retries;
} fh_op_t;

void fh_op_send(fh_op_t *op, void *comm, void *data, size_t size, int tag, void *mh);
/* A one-buffer receive expecting exactly size bytes. */
void fh_op_recv(fh_op_t *op, void *comm, void *data, size_t size, int tag, void *mh);
/* Add one buffer to a (grouped) receive. */
void fh_op_recv_add(fh_op_t *op, void *data, size_t size, int tag, void *mh, size_t expect);
void fh_op_flush(fh_op_t *op, void *comm, void *data, size_t size, void *mh);

/* One attempt to post op. FH_OK with op->state POSTED, or still PENDING when
 * the plugin asked to retry (NULL request, counted). */
int fh_op_post(fh_rank_t *r, fh_net_t *net, fh_op_t *op);
/* One test() of a posted op; sets DONE and checks reported sizes. */
int fh_op_test(fh_rank_t *r, fh_net_t *net, fh_op_t *op);
/* Drive ops to completion like NCCL's proxy: per comm, post in array order with
 * at most window in flight, test the oldest in flight, retry NULL requests. */
int fh_ops_run(fh_rank_t *r, fh_net_t *net, fh_op_t *ops, int nops, int window);

#endif /* FABRIC_HARNESS_H */
