/*
 * proto_tag.h - how a 64-bit libfabric tag is carved up. Pure, but for the
 * sequence table (proto_tag.c).
 *
 *   data message (tag):     [ctrl=0][abort][conn id][seq][NCCL tag]
 *   control route (word 0): [ctrl=1][kind:2][0 ...][object id:32]
 *
 * Control messages travel untagged and begin with their route, laid out
 * like a tag (proto_tag_ctrl), which picks the endpoint pool that takes
 * them: the provider matches data against tagged receives only.
 *
 * conn id is the receiving connection's id, allocated by the receiver's
 * endpoint and sent back in the handshake, so many connections share one
 * endpoint. seq counts messages per (connection, NCCL tag): the k-th send
 * with tag t matches the k-th receive buffer posted with tag t, whatever order
 * the provider delivers in, which keeps NCCL's per-connection FIFO matching
 * and lets a grouped receive's buffers be picked by tag.
 *
 * abort marks the stand-in a sender puts in place of a message larger than
 * the receive the peer posted: receives are posted ignoring that bit, so the
 * stand-in completes the receive, and the bit in the completion says it
 * failed. The provider never sees an oversized message.
 *
 * Wide layout (64 tag bits): conn 22, seq 16, NCCL tag 24.
 * Narrow layout (48..63 bits): conn = bits-30, seq 12, NCCL tag 16.
 * NCCL tags are ranks; they are folded to the tag field's width.
 */
#ifndef PROTO_TAG_H
#define PROTO_TAG_H

#include <stdbool.h>
#include <stdint.h>

struct proto_tag_layout {
	unsigned bits;       /* tag bits the provider offers (>= 48) */
	unsigned conn_bits, seq_bits, user_bits;
	unsigned conn_shift, seq_shift, kind_shift;
	uint64_t ctrl_bit, abort_bit;
};

/* Control messages, by what they carry and to whom. */
enum proto_ctrl_kind {
	PROTO_CTRL_CONNECT = 0, /* connector -> listener: connection request */
	PROTO_CTRL_ACCEPT = 1,  /* listener -> connector: ACCEPT or REJECT */
	PROTO_CTRL_CTS = 2,     /* receiver -> sender: buffers posted (clear to send) */
	PROTO_CTRL_PING = 3,    /* either way: is the peer still there? (dropped on arrival) */
};

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
	l->conn_bits = bits - 2 - l->seq_bits - l->user_bits;
	l->seq_shift = l->user_bits;
	l->conn_shift = l->user_bits + l->seq_bits;
	l->ctrl_bit = 1ULL << (bits - 1);
	l->abort_bit = 1ULL << (bits - 2);
	l->kind_shift = bits - 3; /* 2 bits below ctrl */
	return 0;
}

static inline uint32_t proto_tag_conn_mask(const struct proto_tag_layout *l)
{
	return (uint32_t)((1ULL << l->conn_bits) - 1);
}

static inline uint32_t proto_tag_seq_mask(const struct proto_tag_layout *l)
{
	return (uint32_t)((1ULL << l->seq_bits) - 1);
}

static inline uint32_t proto_tag_fold(const struct proto_tag_layout *l, int nccl_tag)
{
	return (uint32_t)nccl_tag & (uint32_t)((1ULL << l->user_bits) - 1);
}

static inline uint64_t proto_tag_data(const struct proto_tag_layout *l, uint32_t conn,
				      uint32_t seq, int nccl_tag)
{
	uint64_t c = conn & proto_tag_conn_mask(l);
	uint64_t s = seq & proto_tag_seq_mask(l);
	return (c << l->conn_shift) | (s << l->seq_shift) | proto_tag_fold(l, nccl_tag);
}

/* Control ids use 32 bits at most; the kind keeps a listener's, a connector's
 * and a sender's messages apart on one endpoint. */
static inline uint64_t proto_tag_ctrl(const struct proto_tag_layout *l, enum proto_ctrl_kind kind,
				      uint32_t id)
{
	return l->ctrl_bit | ((uint64_t)kind << l->kind_shift) | id;
}

static inline bool proto_tag_is_ctrl(const struct proto_tag_layout *l, uint64_t tag)
{
	return (tag & l->ctrl_bit) != 0;
}

/* ---- per-(connection, NCCL tag) sequence numbers (proto_tag.c) ---- */

/* True when seq is one of the half window of sequence numbers just before
 * next (modulo the seq field): a message already sent. A CTS for such a seq
 * announced a receive the sender filled eagerly, without waiting for it. */
static inline bool proto_seq_behind(uint32_t next, uint32_t seq, uint32_t mask)
{
	uint32_t d = (next - 1u - seq) & mask;
	return d <= (mask >> 1);
}

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
