/*
 * cfg.h - every NCCL_FABRIC_* setting, declared once.
 *
 * CFG_SETTINGS is the single list: name, type, default, bounds, help. It
 * generates the setting ids, the parser, and the dump that nccl-fabric-info and
 * the README print. Each value remembers where it came from. Settings are read
 * once per plugin lifetime (at the first init) and are frozen afterwards.
 */
#ifndef CFG_H
#define CFG_H

#include <stdint.h>
#include <stdio.h>

enum cfg_type { CFG_STR, CFG_INT, CFG_BOOL, CFG_ENUM };

/* Values of the NCCL_FABRIC_HMEM enum, in the order of its name list. */
enum cfg_hmem_mode { CFG_HMEM_AUTO = 0, CFG_HMEM_FORCE = 1, CFG_HMEM_OFF = 2 };
/* Values of NCCL_FABRIC_FLUSH. */
enum cfg_flush_mode { CFG_FLUSH_MODE_AUTO = 0, CFG_FLUSH_MODE_RMA = 1, CFG_FLUSH_MODE_CUDA = 2 };
/* Values of NCCL_FABRIC_RMA_PLUGIN. */
enum cfg_rma_plugin_mode { CFG_RMA_PLUGIN_AUTO = 0, CFG_RMA_PLUGIN_FORCE = 1, CFG_RMA_PLUGIN_OFF = 2 };
/* Most rails (endpoints) a device opens: NCCL_FABRIC_RAILS's bound, the
 * domain's endpoint table and the rail addresses a CONNECT carries. */
#define CFG_MAX_RAILS 8

/*     id           type           default  min  max      enum names    help */
#define CFG_SETTINGS(X)                                                                        \
	X(PROVIDER, CFG_STR, "", 0, 0, NULL,                                               \
	  "Comma list of libfabric providers, in order of preference. An item matches a "      \
	  "provider by its full name (tcp;ofi_rxm) or its core name (tcp); ^name excludes. "   \
	  "Single-host providers such as shm are used only when named here. Empty: the "      \
	  "first provider libfabric offers that reaches other hosts.")                         \
	X(HMEM, CFG_ENUM, "auto", 0, 0, "auto|force|off",                                  \
	  "GPU memory through the provider's FI_HMEM. auto: only when the provider promises "  \
	  "not to call the CUDA API (FI_OPT_CUDA_API_PERMITTED answered 0). force: whenever "  \
	  "it advertises FI_HMEM and a GPU is present, whatever it answered (risk: a "         \
	  "provider that calls CUDA under NCCL can deadlock). off: host memory only.")         \
	X(DMABUF, CFG_BOOL, "1", 0, 1, NULL,                                               \
	  "Offer NCCL DMA-BUF registration (NCCL_PTR_DMABUF) when GPU memory is used, "       \
	  "libfabric >= 1.20 and the GPU supports DMA-BUF. 0 turns it off.")                  \
	X(FLUSH, CFG_ENUM, "auto", 0, 0, "auto|rma|cuda",                                  \
	  "How iflush orders GPU-direct writes before NCCL reads them. rma: an RDMA read "     \
	  "of the received buffer (needs FI_RMA|FI_READ); cuda: the CUDA driver's "           \
	  "cuFlushGPUDirectRDMAWrites; auto: rma where the provider offers it, else cuda. "  \
	  "Without either, GPU memory is not used.")                                         \
	X(MAX_RECVS, CFG_INT, "8", 1, 8, NULL,                                             \
	  "Largest grouped receive offered to NCCL (maxRecvs).")                              \
	X(RAILS, CFG_INT, "auto", 0, CFG_MAX_RAILS, "auto",                               \
	  "Endpoints (rails) per device; each is an independent engine with its own "          \
	  "completion queue and control path. The receiver gives each connection a home "     \
	  "rail, in turn; its messages take it (or the rails in turn: NCCL_FABRIC_SPREAD=1) " \
	  "and RMA writes from NCCL_FABRIC_STRIPE_MIN up are cut over all rails. "             \
	  "auto (or 0, the default): over native tcp, half the CPUs this process may use, "   \
	  "shared by the plugin processes on this host, at most 4; one rail elsewhere (a NIC " \
	  "moves the bytes, or tcp;ofi_rxm, whose endpoints hold each other up). "            \
	  "nccl-fabric-info and the INFO log say what was chosen and why.")                   \
	X(PROGRESS_THREADS, CFG_ENUM, "auto", 0, 0, "auto|on|off",                          \
	  "One thread per rail reads its completions while the rail moves large messages, so " \
	  "rails copy in parallel, and sleeps otherwise (closed connections still drain "      \
	  "while NCCL is idle). auto: on when there are several rails. Costs up to a CPU "     \
	  "core per busy rail.")                                                               \
	X(EAGER_MAX, CFG_INT, "-1", -1, 1048576, NULL,                                     \
	  "Largest message, in bytes, sent at once without waiting for the receiver's "        \
	  "clear-to-send; larger ones wait for it and then move once. -1: what the provider "  \
	  "completes without the receiver (stream providers 65536, NCCL's LL receive size; "   \
	  "tcp;ofi_rxm before libfabric 2.0 16384, its buffer; others their inject size).") \
	X(EARLY_SENDS, CFG_INT, "-1", -1, 16, NULL,                                       \
	  "Messages above NCCL_FABRIC_EAGER_MAX and at most NCCL_FABRIC_EARLY_MAX bytes that " \
	  "a connection may send before their clear-to-send arrives, at a time; each frees "  \
	  "its place when the receiver's CTS for it comes. A short exchange then skips the "  \
	  "CTS's wait, and a long stream is still paced by its receiver. -1: 4 over native "  \
	  "tcp, which keeps such a message until its receive is posted; none elsewhere (the " \
	  "setting is ignored there). 0: none.")                                               \
	X(EARLY_MAX, CFG_INT, "262144", 0, 4194304, NULL,                                  \
	  "Largest message, in bytes, that may go before its clear-to-send as one of "         \
	  "NCCL_FABRIC_EARLY_SENDS.")                                                          \
	X(RMA, CFG_BOOL, "1", 0, 1, NULL,                                                  \
	  "1 (the default): messages above NCCL_FABRIC_EAGER_MAX go as RMA writes with remote " \
	  "CQ data into the buffer the receiver announced, where the provider has FI_RMA and " \
	  "4 bytes of CQ data or more, but not over tcp (native or tcp;ofi_rxm) unless set "  \
	  "(nccl-fabric-info says which and why); a receive comm that closes "                 \
	  "revokes its buffers and waits for writes on their way. 0: one tagged send after "  \
	  "the clear-to-send.")                                                                \
	X(STRIPE_MIN, CFG_INT, "131072", 0, 1073741824, NULL,                              \
	  "Messages of at least this many bytes that go as RMA writes (NCCL_FABRIC_RMA) are "  \
	  "cut by the sender into pieces of at least 64 KiB, one per rail, written on all "    \
	  "the connection's rails at once; the receive completes when every piece has "       \
	  "landed. 0: every message takes its connection's home rail whole.")                  \
	X(SPREAD, CFG_BOOL, "0", 0, 1, NULL,                                               \
	  "With several rails, a connection's messages take its rails in turn (the k-th "      \
	  "message of an NCCL tag on rail home + k), so one connection moves on all rails at "  \
	  "once; the CTS and pings stay on its home rail. Both ends must agree: the "          \
	  "receiver's answer to the connection request settles it. 0: every message takes "   \
	  "its connection's home rail (the default until measured under NCCL).")              \
	X(RMA_PLUGIN, CFG_ENUM, "auto", 0, 0, "auto|force|off",                            \
	  "NCCL's RMA plugin (device-initiated networking, ncclRmaPlugin_v14/v13). auto: "     \
	  "offered where GPU memory goes to the provider (FI_HMEM, no CUDA calls) and it has " \
	  "FI_RMA and FI_ATOMIC. force: also on host memory only, where the provider has "     \
	  "FI_RMA and FI_ATOMIC (tests; NCCL's windows are GPU memory). off: never.")          \
	X(SPEED, CFG_INT, "0", 0, 100000000, NULL,                                         \
	  "Link speed reported to NCCL, in Mbps. 0: the NIC's link attributes, else "          \
	  "/sys/class/net/<if>/speed, else 10000.")                                           \
	X(TIMEOUT, CFG_INT, "300", 1, 86400, NULL,                                         \
	  "Seconds a connection may wait for its peer during connect/accept before it fails " \
	  "with an error instead of waiting forever.")                                        \
	X(PEER_TIMEOUT, CFG_INT, "8", 1, 86400, NULL,                                     \
	  "Seconds a connection NCCL waits on may go without an answer from its peer before "  \
	  "its operations fail with ncclRemoteError. After 1 s without a sign of life the "    \
	  "plugin pings the peer each second and its endpoint answers; a ping that fails "     \
	  "ends the wait at once.")                                                            \
	X(CQ_BATCH, CFG_INT, "32", 1, 256, NULL,                                           \
	  "Completions read from a completion queue per call.")

enum cfg_id {
#define CFG_ID(id, type, def, min, max, names, help) CFG_##id,
	CFG_SETTINGS(CFG_ID)
#undef CFG_ID
	CFG_COUNT
};

enum cfg_source { CFG_SRC_DEFAULT, CFG_SRC_ENV, CFG_SRC_INVALID_ENV };

struct cfg_desc {
	const char *name; /* full environment name, NCCL_FABRIC_... */
	enum cfg_type type;
	const char *def;
	int64_t min, max;
	const char *enum_names; /* "a|b|c" for CFG_ENUM */
	const char *help;
};

struct cfg_value {
	int64_t i;            /* INT, BOOL, ENUM (index into enum_names) */
	char s[256];          /* the value as text (STR settings use only this) */
	enum cfg_source source;
	char invalid[128];    /* the rejected text when source is CFG_SRC_INVALID_ENV */
};

struct cfg_values {
	struct cfg_value v[CFG_COUNT];
};

typedef const char *(*cfg_lookup_fn)(const char *name, void *arg);

extern const struct cfg_desc cfg_descs[CFG_COUNT];

/* Fills cfg from lookup (getenv when NULL). Invalid values keep the default,
 * are marked CFG_SRC_INVALID_ENV and are returned as a count so the caller can
 * WARN once. Pure apart from the lookup. */
int cfg_load(struct cfg_values *cfg, cfg_lookup_fn lookup, void *arg);
/* Parses text into one setting; returns 0 or -EINVAL. */
int cfg_parse(const struct cfg_desc *d, const char *text, struct cfg_value *out);
const char *cfg_source_name(enum cfg_source src);
void cfg_dump(const struct cfg_values *cfg, FILE *out, int json);

#endif
