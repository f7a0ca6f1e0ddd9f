/*
 * proto_tag.h - how a 64-bit libfabric tag is carved up. Pure.
 *
 *   data message:   [ctrl=0][conn id][seq][NCCL tag]
 *   control message:[ctrl=1][dir][0...][object id]
 *
 * conn id is the receiving connection's id, allocated by the receiver's
 * endpoint and sent back in the handshake, so many connections share one
 * endpoint. seq counts messages per (connection, NCCL tag): the k-th send
 * with tag t matches the k-th receive buffer posted with tag t, whatever order
 * the provider delivers in, which keeps NCCL's per-connection FIFO matching
 * and lets a grouped receive's buffers be picked by tag. It is also what a
 * connection striped over several endpoints will need.
 *
 * Wide layout (64 tag bits): conn 23, seq 16, NCCL tag 24.
 * Narrow layout (48..63 bits): conn = bits-29, seq 12, NCCL tag 16.
 * NCCL tags are ranks; they are folded to the tag field's width.
 */
#ifndef FAB_PROTO_TAG_H
#define FAB_PROTO_TAG_H

#include <stdbool.h>
#include <stdint.h>

struct proto_tag_layout {
	unsigned bits;       /* tag bits the provider offers (>= 48) */
	unsigned conn_bits, seq_bits, user_bits;
	unsigned conn_shift, seq_shift;
	uint64_t ctrl_bit, dir_bit;
};

enum proto_ctrl_dir { PROTO_TO_LISTENER = 0, PROTO_TO_CONNECTOR = 1 };

static inline int proto_tag_layout_init(struct proto_tag_layout *l, unsigned bits)
{
	if (bits < 48)
		return -1;
	if (bits > 64)
		bits = 64;
	l->bits = bits;
	if (bits == 64) {
		l->seq_bits = 16;
		l->user_bits = 24;
	} else {
		l->seq_bits = 12;
		l->user_bits = 16;
	}
	l->conn_bits = bits - 1 - l->seq_bits - l->user_bits;
	l->seq_shift = l->user_bits;
	l->conn_shift = l->user_bits + l->seq_bits;
	l->ctrl_bit = 1ULL << (bits - 1);
	l->dir_bit = 1ULL << (bits - 2);
	return 0;
}

static inline uint32_t proto_tag_conn_mask(const struct proto_tag_layout *l)
{
	return (uint32_t)((1ULL << l->conn_bits) - 1);
}

static inline uint32_t proto_tag_fold(const struct proto_tag_layout *l, int nccl_tag)
{
	return (uint32_t)nccl_tag & (uint32_t)((1ULL << l->user_bits) - 1);
}

static inline uint64_t proto_tag_data(const struct proto_tag_layout *l, uint32_t conn,
				      uint32_t seq, int nccl_tag)
{
	uint64_t c = conn & proto_tag_conn_mask(l);
	uint64_t s = seq & ((1ULL << l->seq_bits) - 1);
	return (c << l->conn_shift) | (s << l->seq_shift) | proto_tag_fold(l, nccl_tag);
}

/* Control ids use 32 bits at most; the direction bit keeps a listener's and a
 * connector's ids apart on the same endpoint. */
static inline uint64_t proto_tag_ctrl(const struct proto_tag_layout *l, enum proto_ctrl_dir dir,
				      uint32_t id)
{
	return l->ctrl_bit | (dir == PROTO_TO_CONNECTOR ? l->dir_bit : 0) | id;
}

static inline bool proto_tag_is_ctrl(const struct proto_tag_layout *l, uint64_t tag)
{
	return (tag & l->ctrl_bit) != 0;
}

/* ---- per-(connection, NCCL tag) sequence numbers ---- */

struct proto_seq_entry {
	uint32_t tag; /* folded */
	uint32_t seq;
};

struct proto_seq_table {
	int n, cap;
	struct proto_seq_entry *e;
};

/* Returns the entry for tag (creating it; NULL on allocation failure). The
 * caller reads e->seq and increments it; undoing a failed post decrements. */
struct proto_seq_entry *proto_seq_get(struct proto_seq_table *t, uint32_t folded_tag);
void proto_seq_free(struct proto_seq_table *t);

#endif
