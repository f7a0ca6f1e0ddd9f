/*
 * proto_wire.h - bytes that cross between processes: the listen handle NCCL
 * ships to the peer, and the two control messages of the handshake.
 *
 * Handshake: connect() sends CONNECT (with its own address and a reply id) to
 * the listener's endpoint, tagged with the listen id from the handle; accept()
 * answers ACCEPT with the id of the new receiving connection, which the sender
 * then puts in every data tag, or REJECT with a reason. Every structure starts
 * with a magic and a version and ends with a checksum, so a corrupt or foreign
 * handle is an error message, never a crash.
 */
#ifndef PROTO_WIRE_H
#define PROTO_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "nccl/nccl_net.h"
#include "ofi/ofi.h"

#define PROTO_MAGIC 0x4641424eu /* "NBAF" little-endian: "FABN" */
#define PROTO_VERSION 9 /* 2: per-message rails, eager sends, RMA writes; 3: connection secrets, ping/pong;
                          * 4: lazy CTS, pongs count the messages taken, goodbye;
                          * 5: a connection's messages take the one rail its ACCEPT names;
                          * 6: HELD answers every CONNECT that waits for accept;
                          * 7: an RMA write's CQ data names the pieces it was cut into;
                          * 8: a receiver's goodbye revokes its buffers, answered by STOPPED;
                          * 9: CONNECT offers, ACCEPT settles, messages taking the rails in turn */

struct proto_handle {
	uint32_t magic;
	uint8_t version;
	uint8_t addr_len;
	uint16_t reserved;
	uint32_t listen_id;
	uint32_t tag_bits;
	uint64_t prov_hash; /* provider and address format: a handle from another provider is foreign */
	uint64_t nonce;     /* the listen comm's; CONNECT echoes it */
	uint8_t addr[OFI_ADDR_MAX];
	uint64_t checksum;  /* FNV-1a of every byte before it */
};
_Static_assert(sizeof(struct proto_handle) <= NCCL_NET_HANDLE_MAXSIZE, "handle exceeds NCCL's 128 bytes");
_Static_assert(sizeof(struct proto_handle) == 128, "handle layout");

/* CONNECT is answered at once by HELD (queued until the listener's accept)
 * or REJECT; ACCEPT follows HELD when accept takes the request. */
enum proto_msg_type {
	PROTO_MSG_CONNECT = 1,
	PROTO_MSG_ACCEPT = 2,
	PROTO_MSG_REJECT = 3,
	PROTO_MSG_HELD = 4,
};

enum proto_reject_reason {
	PROTO_REJECT_NONE = 0,
	PROTO_REJECT_NONCE = 1,     /* the handle does not belong to this listen comm */
	PROTO_REJECT_PROVIDER = 2,  /* other provider or tag layout */
	PROTO_REJECT_RESOURCES = 3, /* the listener could not create the connection */
	PROTO_REJECT_NO_LISTENER = 4, /* no listen comm with that id: closed, or a stale handle */
};

#define PROTO_MAX_RAILS CFG_MAX_RAILS

/* The k-th message of a tag takes rail home + k (mod the rails), so one
 * connection's messages move on all its rails at once; else every message
 * takes the home rail. Both ends must agree: the receiver's ACCEPT settles it. */
#define PROTO_FLAG_SPREAD 1u

/* Control messages travel untagged (fi_send into the endpoint's control
 * receives), apart from tagged data: a data message never walks past posted
 * control receives in the provider's matching list. Each starts with its
 * route, the addressee's control tag (proto_tag_ctrl: kind and object id),
 * by which the endpoint hands it to its pool's handler. */
struct proto_msg {
	uint64_t route;
	uint32_t magic;
	uint8_t version;
	uint8_t type;
	uint8_t nrails;     /* CONNECT: rails offered; ACCEPT: rails agreed (1..PROTO_MAX_RAILS) */
	uint8_t rail;       /* ACCEPT: the rail the connection's messages take; below nrails */
	uint32_t id;        /* CONNECT: connector's reply id; ACCEPT: receiving connection id */
	union {
		uint32_t reason; /* REJECT: enum proto_reject_reason */
		uint32_t flags;  /* CONNECT: offered, ACCEPT: agreed (PROTO_FLAG_*) */
	};
	uint8_t alen[PROTO_MAX_RAILS]; /* length of each rail's address */
	uint64_t nonce;
	uint64_t prov_hash;
	/* CONNECT: the connection's secret, chosen by the connector. Every later
	 * control message of the connection (CTS, ping, pong) carries it; one
	 * without it is dropped, so nobody but the two ends can speak for it. */
	uint64_t secret;
	uint8_t addr[PROTO_MAX_RAILS][OFI_ADDR_MAX]; /* the sender's rail endpoints */
	uint64_t checksum;
};
_Static_assert(sizeof(struct proto_msg) == 768, "control message layout");

/* Clear to send: what a receive posted, one per irecv. A sender with a
 * message above the eager limit waits for it, so it never hands the provider
 * a message larger than the buffer waiting for it; with PROTO_CTS_RMA it
 * writes the message straight into the announced buffer. Smaller messages go
 * at once, and their CTS is dropped as stale when it arrives. */
#define PROTO_CTS_MAX 8
#define PROTO_CTS_RMA 1u /* addr, key and slot are valid: write there */
struct proto_cts_entry {
	int32_t tag;     /* NCCL tag */
	uint32_t seq;    /* per-tag sequence number, masked to the tag layout */
	uint64_t size;   /* bytes posted */
	uint64_t addr;   /* RMA: target address (virtual or offset, per FI_MR_VIRT_ADDR) */
	uint64_t key;    /* RMA: the buffer's registration key */
	uint32_t slot;   /* RMA: request << 3 | buffer, echoed in the write's CQ data */
	uint32_t flags;  /* PROTO_CTS_* */
};
struct proto_cts {
	uint64_t route;
	uint32_t count;
	uint32_t conn_id; /* the receiving connection, for sanity checks */
	uint64_t secret;  /* the connection's (see proto_msg) */
	struct proto_cts_entry e[PROTO_CTS_MAX];
};
_Static_assert(sizeof(struct proto_cts_entry) == 40, "CTS entry layout");
_Static_assert(sizeof(struct proto_cts) == 344, "CTS layout");

/* Liveness: a connection waiting on its peer pings it; the peer answers with
 * a pong to the pinging object. Both take the connection's home rail, into
 * the CTS pool there (control kind PING, tag id = the addressee), and must
 * name the addressee's peer (from_id) and carry the connection's secret. */
#define PROTO_PING_MAGIC 0x474e4950u /* "PING" */
/* PROTO_BYE: a receive comm closing tells its sender how many messages it
 * took, and revokes the buffers it announced for RMA writes. PROTO_STOPPED:
 * the sender's answer to it (or its own close's word), once no write of it is
 * in flight: it writes no more, and wrote this many pieces in all (taken). */
/* PROTO_ABORT (writes only: providers without tags): the sender's message is
 * larger than the buffer the CTS announced (taken: the CTS slot); nothing is
 * written, and the receive fails. */
enum proto_ping_type {
	PROTO_PING = 1,
	PROTO_PONG = 2,
	PROTO_BYE = 3,
	PROTO_STOPPED = 4,
	PROTO_ABORT = 5,
};
struct proto_ping {
	uint64_t route;
	uint32_t magic;
	uint32_t type;     /* enum proto_ping_type */
	uint32_t from_id;  /* the sending object's id: the addressee's peer */
	uint32_t taken;    /* pong or goodbye of a receive comm: messages it took in;
			    * STOPPED: pieces the sender wrote (mod 2^32) */
	uint64_t secret;
};
_Static_assert(sizeof(struct proto_ping) == 32, "ping layout");

/* Remote CQ data of an RMA write: which buffer of which connection it fills,
 * the message's whole size, and into how many pieces the sender cut it (each
 * piece a write of its own, on its own rail, with the same CQ data). 64 bits:
 * size 32 | pieces - 1 3 | slot 8 | conn id 21. A provider with 4 bytes of
 * CQ data (EFA, verbs, opx) carries the low 32 bits only: the receiver then
 * sums the size from the pieces' completions, which report the bytes each
 * write brought (PROTO_IMM_LOW). */
#define PROTO_IMM_LOW 0xffffffffULL
#define PROTO_IMM_CONN_MASK 0x1fffffu
_Static_assert(PROTO_MAX_RAILS <= 8, "pieces - 1 takes 3 bits of the CQ data");
static inline uint64_t proto_imm(uint32_t conn, uint32_t slot, uint32_t size, uint32_t pieces)
{
	return (uint64_t)size << 32 | (uint64_t)((pieces - 1) & 7) << 29 |
	       (uint64_t)(slot & 0xff) << 21 | (conn & PROTO_IMM_CONN_MASK);
}
static inline void proto_imm_parse(uint64_t imm, uint32_t *conn, uint32_t *slot, uint32_t *size,
				   uint32_t *pieces)
{
	*conn = (uint32_t)imm & PROTO_IMM_CONN_MASK;
	*slot = (uint32_t)(imm >> 21) & 0xff;
	*pieces = ((uint32_t)(imm >> 29) & 7) + 1;
	*size = (uint32_t)(imm >> 32);
}

uint64_t proto_prov_hash(const char *prov_name, uint32_t addr_format, unsigned tag_bits);

void proto_handle_encode(struct proto_handle *h, uint32_t listen_id, unsigned tag_bits,
			 uint64_t prov_hash, uint64_t nonce, const void *addr, size_t addr_len);
/* 0 when buf holds a handle of this provider; else -1 with the reason in why. */
int proto_handle_check(const void *buf, uint64_t prov_hash, char *why, size_t why_len);

void proto_msg_seal(struct proto_msg *m, uint64_t route);
/* 0 when the message is well-formed; else -1 with the reason. */
int proto_msg_check(const struct proto_msg *m, size_t len, char *why, size_t why_len);
const char *proto_reject_text(uint32_t reason);

#endif
