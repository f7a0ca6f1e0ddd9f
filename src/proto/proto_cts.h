/*
 * proto_cts.h - the sender's table of receives announced by CTS messages,
 * keyed by (folded NCCL tag, sequence number). Open addressing with linear
 * probing and backward-shift deletion; fixed capacity, no allocation. Pure;
 * the send comm's cts_lock guards it. The rest of the CTS's life (built and
 * sent by the receiver, received by the sender) is in proto_cts.c too,
 * declared in proto.h.
 */
#ifndef PROTO_CTS_H
#define PROTO_CTS_H

#include <stdbool.h>
#include <stdint.h>

#include "proto/proto_wire.h"

/* NCCL keeps at most 32 receives of 8 buffers in flight per connection: 256
 * announced sizes; twice that keeps probe chains short. */
#define PROTO_CTS_SLOTS 512

struct proto_cts_slot {
	uint64_t key; /* 0: empty */
	struct proto_cts_entry e;
};

struct proto_cts_table {
	int used;
	struct proto_cts_slot slot[PROTO_CTS_SLOTS];
};

static inline uint64_t proto_cts_key(uint32_t folded_tag, uint32_t seq)
{
	return (((uint64_t)folded_tag << 32) | seq) + 1;
}

/* 0, or -1 when the table is full or the key is already there. */
int proto_cts_put(struct proto_cts_table *t, uint64_t key, const struct proto_cts_entry *e);
/* Removes the key; true and its entry when present. */
bool proto_cts_take(struct proto_cts_table *t, uint64_t key, struct proto_cts_entry *e);

#endif
