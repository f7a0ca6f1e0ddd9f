/*
 * perf_raw.h - the raw libfabric baseline of nccl-fabric-perf.
 *
 * Plain tagged messaging over one RDM endpoint per rank, with the provider the
 * plugin chose: no plugin, no protocol, no CTS. It is what the provider itself
 * achieves with the same sizes and window, so the plugin's figure can be read
 * against it. Every libfabric call of the tool is in perf_raw.c; the transfer
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

/* One finished operation, as the CQ reported it. */
typedef struct pf_raw_done {
	int slot;      /* the slot given to pf_raw_post */
	size_t len;    /* bytes received (receives only) */
	uint64_t tag;  /* tag received (receives only) */
} pf_raw_done_t;

/* fi_getinfo(RDM, FI_TAGGED|FI_MSG, prov_name = prov), preferring the domain
 * named domain when not NULL (the plugin's device; any domain when that one is
 * not offered), then fabric, domain, CQ, AV and endpoint; exchanges endpoint
 * names with rank peer over the out-of-band channel and inserts the peer's
 * address. Both ranks must call it at the same point. When libfabric has no
 * such provider: FH_SKIP if missing_skips, else FH_FAIL. *out is set even
 * after a failure; close it with pf_raw_close. */
int pf_raw_open(fh_rank_t *r, int peer, const char *prov, const char *domain, int missing_skips,
		pf_raw_t **out);
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

/* Posts a tagged send of tag to the peer (is_send), or a receive matching
 * exactly that tag, with slot's operation context. Returns 0 when posted, 1
 * when the provider asked to retry later (-FI_EAGAIN; completions must be read
 * first), or -1 after fh_fail(). */
int pf_raw_post(fh_rank_t *r, pf_raw_t *raw, int is_send, int slot, void *buf, size_t len,
		void *desc, uint64_t tag);
/* Reads up to max completions into done. Returns how many (0: none yet), or
 * -1 after fh_fail() with the provider's error text. */
int pf_raw_poll(fh_rank_t *r, pf_raw_t *raw, pf_raw_done_t *done, int max);

#endif
