/*
 * perf_raw.h - the raw libfabric baseline of nccl-fabric-perf.
 *
 * Plain tagged messaging over one RDM endpoint per rank, with the provider the
 * plugin chose: no plugin, no protocol, no CTS. It is what the provider itself
 * achieves with the same sizes and window, so the plugin's figure can be read
 * against it. With PF_RAW_WRITE (--raw-op write) the same transfers go as RMA
 * writes with 4 bytes of remote CQ data into the receiver's window, which frees
 * each slot again with a 4-byte message (a credit): the plugin's write path
 * with nothing of the plugin, and a baseline where the provider has no tags. Every libfabric call of the tool is in perf_raw.c; the transfer
 * loop in perf_main.c sees only the small interface below.
 *
 * Functions that take an fh_rank_t return FH_OK, or FH_FAIL after recording
 * the reason with fh_fail().
 */
#ifndef NCCL_FABRIC_PERF_RAW_H
#define NCCL_FABRIC_PERF_RAW_H

#include <stddef.h>
#include <stdint.h>

#include "harness.h"

/* Operation contexts: one per window slot. */
#define PF_RAW_MAX_OPS 256

typedef struct pf_raw pf_raw_t;

/* How messages move. */
enum pf_raw_op {
	PF_RAW_SEND,  /* fi_tsend into a posted fi_trecv */
	PF_RAW_WRITE, /* fi_writedata into the peer's window; a credit frees the slot */
};

/* What pf_raw_poll reports. */
enum pf_raw_kind {
	PF_RAW_DONE,   /* slot's own operation completed (send, receive, this side's write) */
	PF_RAW_LANDED, /* a peer's write landed here: data is its CQ data (slot -1) */
	PF_RAW_CREDIT, /* the peer freed slot (PF_RAW_WRITE, on the writer) */
};

/* One finished operation, as the CQ reported it. */
typedef struct pf_raw_done {
	enum pf_raw_kind kind;
	int slot;      /* the slot given to pf_raw_post or pf_raw_write; the credit's */
	size_t len;    /* bytes received (receives only) */
	uint64_t tag;  /* tag received (receives only) */
	uint32_t data; /* PF_RAW_LANDED: the writer's CQ data */
} pf_raw_done_t;

/* Where a peer writes: the registration's key and the address its first byte
 * has for the provider (its virtual address, or 0 where addresses are offsets
 * into the registration). */
typedef struct pf_raw_target {
	uint64_t addr;
	uint64_t key;
} pf_raw_target_t;

/* fi_getinfo(RDM, FI_TAGGED|FI_MSG, or with PF_RAW_WRITE FI_MSG|FI_RMA and
 * 4 bytes of CQ data; prov_name = prov), preferring the domain
 * named domain when not NULL (the plugin's device; any domain when that one is
 * not offered), then fabric, domain, CQ, AV and endpoint; exchanges endpoint
 * names with rank peer over the out-of-band channel and inserts the peer's
 * address. Both ranks must call it at the same point. With PF_RAW_WRITE the
 * writer (even rank) posts window credit receives, and the target, where the
 * provider's writes take posted receives (FI_RX_CQ_DATA), window of those.
 * When libfabric has no such provider: FH_SKIP if missing_skips, else FH_FAIL.
 * *out is set even after a failure; close it with pf_raw_close. */
int pf_raw_open(fh_rank_t *r, int peer, const char *prov, const char *domain, int missing_skips,
		enum pf_raw_op op, int window, pf_raw_t **out);
/* Closes everything pf_raw_open opened (NULL is fine). */
int pf_raw_close(fh_rank_t *r, pf_raw_t *raw);

/* One line (no newline) saying what was opened: provider, domain, libfabric
 * version, mr_mode, mode, threading, whether buffers are registered. */
void pf_raw_describe(const pf_raw_t *raw, char *buf, size_t len);
const char *pf_raw_provider(const pf_raw_t *raw);
const char *pf_raw_domain(const pf_raw_t *raw);
size_t pf_raw_max_msg_size(const pf_raw_t *raw);

/* Registers [buf, buf+len) when the provider's mr_mode requires it
 * (FI_MR_LOCAL); otherwise does nothing. *desc gets the descriptor to pass
 * with every operation on it (NULL when not registered). */
int pf_raw_reg(fh_rank_t *r, pf_raw_t *raw, void *buf, size_t len, void **mr, void **desc);
int pf_raw_dereg(fh_rank_t *r, pf_raw_t *raw, void *mr);
/* PF_RAW_WRITE: registers [buf, buf+len) for local and remote writes (always:
 * a peer needs its key); *target is what the writer needs. Close with
 * pf_raw_dereg. */
int pf_raw_expose(fh_rank_t *r, pf_raw_t *raw, void *buf, size_t len, void **mr, void **desc,
		  pf_raw_target_t *target);

/* Posts a tagged send of tag to the peer (is_send), or a receive matching
 * exactly that tag, with slot's operation context. Returns 0 when posted, 1
 * when the provider asked to retry later (-FI_EAGAIN; completions must be read
 * first), or -1 after fh_fail(). */
int pf_raw_post(fh_rank_t *r, pf_raw_t *raw, int is_send, int slot, void *buf, size_t len,
		void *desc, uint64_t tag);
/* PF_RAW_WRITE: writes [buf, buf+len) at offset off of the peer's target with
 * CQ data data, slot's operation context. The writer's credit: frees slot for
 * the peer's next write. Both return 0 when posted, 1 to retry later, or -1
 * after fh_fail(). */
int pf_raw_write(fh_rank_t *r, pf_raw_t *raw, int slot, void *buf, size_t len, void *desc,
		 const pf_raw_target_t *target, size_t off, uint32_t data);
int pf_raw_credit(fh_rank_t *r, pf_raw_t *raw, int slot);
/* Reads up to max completions into done. Returns how many (0: none yet), or
 * -1 after fh_fail() with the provider's error text. The write mode's own
 * receives (credits, FI_RX_CQ_DATA) are posted again here; a credit naming no
 * slot of the window fails. */
int pf_raw_poll(fh_rank_t *r, pf_raw_t *raw, pf_raw_done_t *done, int max);

#endif
