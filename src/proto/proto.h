/*
 * proto.h - connections and requests over tagged messages and RMA writes.
 *
 * A comm is cheap: an id in the domain's id space, a sequence table, and a
 * fixed pool of requests (no allocation per operation). Its messages, CTS and
 * pings take one of the device's rails, its home, which the receiver gives
 * each connection in turn at accept: connections spread over the rails, and
 * a connection's test() reads one CQ. Each rail is an endpoint with its own
 * CQ, control receives and, where it pays, its own progress thread.
 *
 * A message of at most eager_max bytes is sent at once. A larger one waits
 * for the receiver's clear-to-send (CTS), which carries the buffer's size and,
 * where the provider can, its address and key: the message then moves as one
 * RMA write whose CQ data names the buffer. A receive whose buffers all take
 * any eager message sends its CTS late (PROTO_LAZY_CTS_NS), and usually never;
 * closeSend then learns from the receiver's pongs that it took every message. Every operation posted to
 * libfabric counts in comm->pending; a comm closed while operations are still
 * posted cancels them and becomes a zombie of its domain until the last
 * completion arrives (or the domain closes), so a late completion never
 * touches freed memory.
 */
#ifndef PROTO_H
#define PROTO_H

#include <stdatomic.h>

#include <limits.h>
#include <pthread.h>

#include "net/net.h"
#include "policy/policy.h"
#include "ofi/ofi.h"
#include "proto/proto_cts.h"
#include "proto/proto_tag.h"
#include "proto/proto_wire.h"
#include "util/freelist.h"

#define PROTO_MAX_RECVS 8
#define PROTO_RECV_REQS NCCL_NET_MAX_REQUESTS
/* Smallest piece of a striped RMA write: below it a rail's own costs (a
 * completion, a CQ read) outweigh what parallel rails gain. */
#define PROTO_PIECE_MIN (64u << 10)
/* Early sends a connection may have waiting for their CTS: NCCL_FABRIC_EARLY_SENDS's bound. */
#define PROTO_EARLY_MAX 16
#define PROTO_SEND_REQS (NCCL_NET_MAX_REQUESTS * PROTO_MAX_RECVS)
#define PROTO_COMM_MAGIC 0x4642434dU /* "MCBF" */
/* Control pools of each endpoint (ofi_ep pools, in start order). */
#define PROTO_POOL_CTS 0     /* CTS and pings, every rail */
#define PROTO_POOL_CONNECT 1 /* connection requests, rail 0 */
#define PROTO_POOL_ACCEPT 2  /* answers to our connection requests, rail 0 */
#define PROTO_CONNECT_POOL 64
#define PROTO_ACCEPT_POOL 8
/* Connection requests queued per listen comm until accept takes them. */
#define PROTO_LISTEN_INBOX 64
/* CTS receives each endpoint keeps posted for all its send comms. */
#define PROTO_CTS_POOL 128
/* ... and this many more per object registered on it (grown at connect). */
#define PROTO_CTS_PER_SEND 4
/* Under FI_RX_CQ_DATA each RMA write landing on an endpoint takes one of its
 * control receives until the CQ read that posts it again: this many more per
 * object (grown at accept; NCCL keeps 8 receives in flight per connection),
 * so a burst of writes finds them posted. (Beyond, efa-direct retries the
 * write until one is, without end by default.) */
#define PROTO_CTS_PER_RECV_RXCQ 16
/* How long close waits for operations already moving NCCL's data. */
#define PROTO_CLOSE_WAIT_NS (5ULL * 1000000000ULL)
/* How long a closed receive comm keeps its sink posted (proto_recv.sink):
 * past the sender's own close wait, nothing it posted before can still come
 * but from a peer that stopped. */
#define PROTO_SINK_NS (2 * PROTO_CLOSE_WAIT_NS)
/* Over TCP sockets, after that wait: how long the kernel lets the peer's
 * connection go unacknowledged before resetting it (TCP_USER_TIMEOUT), and
 * how long close then waits for the reset. */
#define PROTO_RESET_TIMEOUT_MS 1000u
#define PROTO_RESET_WAIT_NS (4ULL * 1000000000ULL)
/* ... and only when the peer showed no sign of life for this long (a peer
 * that is alive, closing too, is never reset: proto_close.c, comm_may_reset). */
#define PROTO_CLOSE_QUIET_NS (3ULL * 1000000000ULL)
/* How long a CONNECT may go unanswered (no HELD, ACCEPT or REJECT) before
 * connect fails: the listener's endpoint answers within its idle-read
 * interval, so silence means nothing listens at that address (a stale or
 * corrupt handle, or a process that is gone). */
#define PROTO_CONNECT_ANSWER_NS (4ULL * 1000000000ULL)
/* How long closeSend waits for the receiver to have taken every message it
 * was sent (see proto_send.sent). */
#define PROTO_CLOSE_ACK_NS (2ULL * 1000000000ULL)
/* ... asking again this often. */
#define PROTO_CLOSE_PING_NS 1000000ULL
/* A receive whose buffers all take any eager message needs its CTS only when
 * a larger message comes (the sender waits for the CTS, then sends a
 * stand-in that fails the receive with both sizes): it is sent only if the
 * receive still waits after this long, and skipped when it completes first. */
#define PROTO_LAZY_CTS_NS 1000000ULL
/* A connection NCCL waits on that has seen no sign of life from its peer for
 * this long pings it, and again each interval; the peer's endpoint answers
 * with a pong (a thread reads every idle endpoint, so a peer busy elsewhere
 * still answers). No answer for NCCL_FABRIC_PEER_TIMEOUT, or a ping the
 * provider fails: the peer is gone and the comm's operations end with
 * proto_gone_rc's code (ncclRemoteError for NCCL). This catches a dead
 * process on every provider (shm delivers into a dead process's queue
 * without an error), a cut link (tcp takes the ping into the kernel's
 * buffer) and a peer that closed its end. */
#define PROTO_PING_NS (1ULL * 1000000000ULL)


/* One NCCL device: the data path's configuration, fixed at init by core, and
 * its libfabric domain, opened at first use. */
struct proto_device {
	int index;
	struct policy_dev_choice choice;
	const struct fi_info *info;   /* the entry endpoints are opened with */
	struct fi_info *directed_info;/* info asked again with FI_DIRECTED_RECV (owned), or NULL */
	struct net_props props;
	char pci_path[PATH_MAX];
	char speed_source[64];
	struct proto_tag_layout layout;
	uint64_t prov_hash;
	const char *provider;         /* the selected provider's name (discovery's) */
	char procs_dir[128];          /* where automatic rails count this host's processes */
	/* what the data path reads, fixed at init: no global lookups per message;
	 * nrails and progress_threads are decided again at open when automatic */
	struct policy_device_plan plan;
	const struct policy_device_why *why; /* the plan's reasons (the report's), for the log */
	pthread_mutex_t open_lock;
	struct ofi_domain *dom;       /* NULL until first use */
	/* Send comms with pieces of a striped write the provider refused for a
	 * moment (-FI_EAGAIN): any test() of the device posts them (proto_sends_due),
	 * not only their own request's, since a caller may wait on a receive whose
	 * sender waits for our piece. */
	pthread_mutex_t due_lock;
	struct dlist due_sends;       /* proto_send.due_link */
	atomic_int ndue;              /* comms on it */
	char open_error[POLICY_REASON_LEN];
};

/* Takes a device's plan (policy_device) in one call: the entry, the plan the
 * data path reads and, for the open log, its reasons (which stay the
 * caller's). */
void proto_device_init(struct proto_device *dev, int index, const struct policy_dev_choice *choice,
		       const struct fi_info *info, const char *provider, const char *procs_dir,
		       const struct policy_device_plan *plan, const struct policy_device_why *why);

enum proto_comm_kind { PROTO_LISTEN = 1, PROTO_SEND = 2, PROTO_RECV = 3 };

struct proto_comm {
	uint32_t magic;
	enum proto_comm_kind kind;
	struct proto_device *dev;
	struct ofi_ep *ep;         /* rail 0: the handshake and flushes */
	int nrails;                /* rails of the device it agreed with its peer */
	int home;                  /* the rail its CTS and pings take (ACCEPT.rail), and its
				    * messages unless spread */
	bool spread;               /* its messages take the rails in turn (PROTO_FLAG_SPREAD) */
	struct ofi_ep *rails[PROTO_MAX_RAILS];
	atomic_int pending;        /* operations posted, not yet completed */
	struct ofi_obj reg;        /* id in the domain's id space (reg.id) */
	struct ofi_zombie zombie;
	struct util_freelist reqs;  /* free requests of this comm */
	void (*fini)(struct proto_comm *c); /* kind-specific cleanup, or NULL */
	struct ofi_mr *ctrl_mr;    /* FI_MR_LOCAL: registration of the control buffers */
	uint64_t secret;           /* the connection's, in its control messages (proto_msg) */
	/* liveness: see PROTO_PING_NS */
	_Atomic uint64_t last_ns;  /* last sign of life: a completion of this comm, or a pong */
	struct ofi_op ping_op, pong_op, bye_op, stop_op;
	struct proto_ping ping_msg, pong_msg, bye_msg, stop_msg;
	atomic_flag alive_busy;    /* one thread at a time runs the liveness check */
	uint64_t ping_ns;          /* when the last ping was tried */
	uint64_t ping_sent_ns;     /* ... and posted (a provider busy with bulk data answers
				    * -FI_EAGAIN: an unasked peer is never judged) */
	uint64_t probe_ns;         /* since when pings go unanswered (0: not probing) */
	_Atomic uint64_t exit_check_ns; /* when proto_comm_exited last looked (shm) */
	atomic_int dead;           /* the FI_* error that showed the peer is gone, or 0 */
	atomic_bool dead_handled;  /* its operations were failed and cancelled */
	const char *peer_text;     /* for messages (the kind's own buffer) */
	fi_addr_t ping_peer;       /* the peer's home rail */
	fi_addr_t peer_rail0;      /* the peer's rail 0 on ours: the process, for the silent mark */
	uint32_t ping_id;          /* the peer object's id, in the ping's tag */
	uint32_t closed_id;        /* reg.id before close unregistered it: still its from_id */
};

enum proto_req_kind { PROTO_REQ_SEND = 1, PROTO_REQ_RECV = 2, PROTO_REQ_FLUSH = 3 };

struct proto_req {
	enum proto_req_kind kind;
	struct proto_comm *comm;
	struct util_free_node free_node;
	int n;                     /* buffers (1 for a send) */
	int nposted;               /* operations handed to libfabric so far */
	int nops;                  /* completions that finish the request */
	atomic_int ncomplete;
	atomic_int status;         /* the first failure's -FI_* code, or 0 */
	bool in_use;
};

/* How a send moves its bytes. */
enum proto_send_how {
	PROTO_SEND_EAGER = 1,  /* tagged, at once, without waiting for the CTS */
	PROTO_SEND_TAGGED = 2, /* tagged, after the CTS (provider without RMA writes) */
	PROTO_SEND_RMA = 3,    /* one RMA write into the announced buffer, with CQ data */
	PROTO_SEND_ABORT = 4,  /* a stand-in: the receiver posted less than this */
	PROTO_SEND_EARLY = 5,  /* tagged, above the eager limit, before its CTS (early sends) */
};

struct proto_send_req {
	struct proto_req h;
	enum proto_send_how how;
	size_t size;
	uint64_t abort_size;       /* payload of the stand-in for an oversized send */
	struct proto_ping abort_msg; /* ... or, writes only, the word that stands in */
	struct ofi_op op;          /* the send, or an RMA write's first piece */
	/* RMA writes: the message cut into pieces, piece k on rail home + k */
	int pieces;                /* 1: whole */
	int cursor;                /* pieces posted so far (test() posts the rest) */
	size_t piece;              /* bytes of each piece but the last */
	const void *data;
	struct ofi_mr *mr;
	struct proto_cts_entry cts;
	int rail;                  /* the message's rail (proto_msg_rail); its pieces follow it */
	struct ofi_op *more;       /* pieces 1.. (its nrails - 1 of the comm's piece_ops), or NULL */
};

struct proto_recv_req {
	struct proto_req h;
	void *data[PROTO_MAX_RECVS];
	size_t posted[PROTO_MAX_RECVS];
	_Atomic size_t got[PROTO_MAX_RECVS];
	struct ofi_mr *mr[PROTO_MAX_RECVS]; /* NCCL's registrations (NULL: none) */
	uint64_t wire[PROTO_MAX_RECVS];
	int tags[PROTO_MAX_RECVS];
	uint8_t rail[PROTO_MAX_RECVS]; /* each buffer's message's rail (proto_msg_rail) */
	atomic_uint rma_expect;    /* bit per buffer announced for an RMA write */
	atomic_uint rma_done;      /* bit per buffer the write filled (its receive cancelled) */
	atomic_uint cancel_due;    /* bit per filled buffer whose receive test() cancels */
	/* pieces of a striped write, under the domain's id_lock (proto_rma_landed) */
	uint8_t landed[PROTO_MAX_RECVS], pieces[PROTO_MAX_RECVS];
	uint32_t landing_size[PROTO_MAX_RECVS];
	unsigned rails_held;       /* rails (bit k: rail k) kept busy for its pieces */
	int cursor;                /* next buffer to post */
	struct ofi_op ops[PROTO_MAX_RECVS]; /* a tagged receive per buffer */
	/* A host buffer smaller than eager_max must show an eager message larger
	 * than itself by what arrived, never cut by the provider: it receives
	 * with the domain's spill as a second iov (bit in spill), or, where the
	 * provider takes one iov only, into a bounce buffer of eager_max bytes
	 * that is copied out. */
	uint32_t spill;
	struct ofi_buf *bounce[PROTO_MAX_RECVS];
	_Atomic uint64_t sunk;     /* ops re-posted into the closing comm's sink */
	struct proto_cts cts;      /* what this receive posted, for the sender */
	struct ofi_op cts_op;
	bool cts_sent;
	/* lazy CTS (every buffer within the eager limit): 1 while neither posted
	 * nor skipped; whoever moves it to 0 posts or skips it */
	atomic_int cts_lazy;
	uint64_t cts_due_ns;
	_Atomic uint64_t cts_failed_ns; /* when sending the CTS failed (0: it did not) */
	int cts_err;
	fi_addr_t flush_self;      /* a flush reads the buffer back from ourselves */
	uint64_t flush_addr, flush_key;
};

enum proto_send_state { PROTO_CONNECTING, PROTO_READY };

struct proto_send {
	struct proto_comm c;
	_Atomic enum proto_send_state state;
	fi_addr_t peer[PROTO_MAX_RAILS];
	uint32_t remote_id;        /* the receiving connection's id: goes in every data tag */
	uint32_t reply_id;         /* c.reg.id: where the listener answers and CTS arrive */
	uint64_t listen_tag;
	struct proto_msg out, in;  /* CONNECT, and ACCEPT/REJECT (the ACCEPT pool fills it) */
	struct ofi_op out_op;
	bool out_posted;
	atomic_int in_done, out_err;
	atomic_bool out_again;     /* the CONNECT went down with a stale connection: post it again */
	atomic_bool held;          /* the listener queued our CONNECT (HELD) */
	uint64_t start_ns, out_ns; /* connect's first call; the CONNECT's post */
	/* pending-connect registry: NCCL calls connect again with the same handle */
	struct dlist pending_link;
	const void *handle_ptr;
	uint64_t handle_sum;
	char peer_text[64];
	struct proto_seq_table seq;
	/* receives the peer announced (CTS), consumed by isend; cts_lock also
	 * guards seq, which the CTS handler reads to drop stale announcements */
	pthread_mutex_t cts_lock;
	struct proto_cts_table cts;
	/* Early sends whose CTS has not come yet (under cts_lock): their keys
	 * (proto_cts_key). The CTS handler frees a place when that CTS comes. */
	uint64_t early[PROTO_EARLY_MAX];
	size_t early_size[PROTO_EARLY_MAX];
	int nearly;
	/* Messages handed to the provider (less writes whose pieces were
	 * dropped: see send_pieces_end), and how many of them the receiver
	 * said it took (its pongs). closeSend waits (bounded) until the receiver
	 * took them all, asking by ping: a provider may drop unmatched data of a
	 * peer that disconnected (native tcp does), and unread bytes in a stream
	 * socket reset the connection when it closes. The receiver's goodbye
	 * (peer_closed) ends the wait: what it did not take it never will. */
	atomic_uint sent;
	atomic_uint acked;
	atomic_bool peer_closed;
	atomic_bool answered;      /* a pong or goodbye of the peer arrived */
	/* RMA writes into the receiver's buffers. Its goodbye revokes every
	 * buffer it announced: no write is posted after it (peer_closed), and
	 * once those in flight have completed the sender says how many pieces it
	 * wrote in all (PROTO_STOPPED), as its own close does; the receiver's
	 * close waits until that many have landed (proto_recv.pieces_in). */
	/* Serialises the comm's requests between its own isend/test and another
	 * thread's proto_sends_due, which only tries it: a request whose last
	 * piece goes out is not reported done, and reused, under its poster. */
	pthread_mutex_t post_lock;
	struct dlist due_link;     /* in dev->due_sends (under its due_lock) */
	bool due;
	atomic_bool due_asked;     /* pieces left under post_lock: listed once it is released */
	atomic_uint writing;       /* pieces posted, not completed */
	atomic_uint written;       /* pieces completed without error */
	struct ofi_op *piece_ops;  /* (nrails - 1) per request where writes are striped */
	struct proto_send_req reqs[PROTO_SEND_REQS];
};

struct proto_recv {
	struct proto_comm c;
	fi_addr_t peer[PROTO_MAX_RAILS];
	fi_addr_t src[PROTO_MAX_RAILS]; /* data receives' source: the peer (directed), or any */
	uint32_t id;
	struct proto_msg ack;
	uint32_t reply_id;         /* the connector's id: where ACCEPT goes */
	struct ofi_op ack_op;
	bool ack_posted;
	atomic_uint taken;         /* messages that arrived (pongs and the goodbye tell the sender) */
	atomic_bool big_last;      /* the last message that arrived was above the eager limit:
				    * the next receives wake their rail's progress thread */
	atomic_uint pieces_in;     /* RMA write notices that named this connection */
	atomic_uint peer_written;  /* the sender's PROTO_STOPPED: pieces it wrote in all */
	atomic_bool peer_stopped;  /* ... which arrived: it writes no more */
	char peer_text[64];
	struct proto_seq_table seq;
	/* Closing: what the sender may still send drains into sink, each
	 * cancelled receive posted again there (proto_recv_req.sunk), until
	 * sink_done (PROTO_SINK_NS, or sooner when closed comms hold many sink
	 * receives: struct ofi_zombie) cancels them for good. */
	void *sink;
	size_t sink_len;
	struct ofi_mr *sink_mr;
	atomic_bool sink_done;
	struct proto_recv_req reqs[PROTO_RECV_REQS];
};

struct proto_listen {
	struct proto_comm c;
	uint32_t id;
	uint64_t nonce;
	/* connection requests the endpoint's CONNECT pool queued for us */
	pthread_mutex_t inbox_lock;
	struct proto_msg inbox[PROTO_LISTEN_INBOX];
	int inbox_head, inbox_n;
	struct proto_recv *accepting; /* made, its ACCEPT not yet posted */
	uint64_t wait_start_ns, last_call_ns;
	bool counted;                 /* in its device's count of listen comms */
};

/* ---- a comm's life (proto_comm.c) ---- */

/* Sets up what every kind of comm has and registers its id in the domain;
 * size is the whole object's (FI_MR_LOCAL registers it for the control
 * messages inside). On failure the caller frees it with proto_comm_free. */
int proto_comm_init(struct proto_comm *c, enum proto_comm_kind kind, struct proto_device *dev,
		    struct ofi_domain *dom, size_t size, int nrails);
/* Frees a comm that has no operation posted (one whose creation failed). */
void proto_comm_free(struct proto_comm *c);
/* Finds a comm from a pointer NCCL handed back; NULL when it is not one of ours. */
struct proto_comm *proto_comm_from(void *p, enum proto_comm_kind kind);
/* Takes (releases) the CQ locks of every rail of the comm: no completion of
 * its operations runs meanwhile. */
void proto_comm_lock_rails(struct proto_comm *c);
void proto_comm_unlock_rails(struct proto_comm *c);
/* Cancels every operation of the comm still posted. The caller holds the CQ
 * locks of all the comm's rails (proto_comm_lock_rails), so no completion
 * runs while it cancels. */
void proto_comm_cancel_locked(struct proto_comm *c);

/* Progresses the comm's home rail (the data path); negative on a CQ failure. */
int proto_comm_progress(struct proto_comm *c);
/* ... and every other rail of it, rail 0's handshake and flushes included. */
int proto_comm_progress_all(struct proto_comm *c);
/* Progresses the rails in the bit mask rails (bit k: rail k). */
int proto_comm_progress_rails(struct proto_comm *c, unsigned rails);

/* The rail of the comm's message number seq of its tag: the home rail, or,
 * spread, home + seq (both ends count each tag's messages alike). */
static inline int proto_msg_rail(const struct proto_comm *c, uint32_t seq)
{
	if (!c->spread)
		return c->home;
	return (int)(((uint32_t)c->home + seq % (uint32_t)c->nrails) % (uint32_t)c->nrails);
}

/* The request pools: every request of a comm on its free list, at creation. */
void proto_send_reqs_init(struct proto_send *s);
void proto_recv_reqs_init(struct proto_recv *r);
/* A free request of the comm (in use from now on), or NULL when all are taken. */
struct proto_req *proto_req_get(struct proto_comm *c);
void proto_req_put(struct proto_req *r);
/* Starts a request over for n buffers: nothing posted, complete or failed. */
void proto_req_reset(struct proto_req *r, int n);

/* Every operation a comm hands libfabric goes through these, so that
 * comm->pending counts exactly what is posted. */
void proto_op_init(struct ofi_op *op, ofi_op_complete_fn fn, void *owner, int index);
/* Every post, in the same steps. Before the post call, on the endpoint it
 * posts to (a completion may arrive on another thread before that call
 * returns): the operation counts as posted in the comm, holds the
 * registration hold (NULL: none) and, with bulk, its endpoint's bulk count
 * (ofi_ep_bulk_begin) ... */
void proto_op_post_begin(struct proto_comm *c, struct ofi_op *op, struct ofi_ep *ep,
			 struct ofi_mr *hold, bool bulk);
/* ... and after it, with its result rc: a failure undoes all of that.
 * Returns rc. */
ssize_t proto_op_post_end(struct proto_comm *c, struct ofi_op *op, ssize_t rc);
/* Last action of every completion callback: after it the comm may be freed. */
void proto_op_done(struct proto_comm *c, struct ofi_op *op);
/* ... of a data operation's, in this order: the completion is a sign of
 * life of the peer; the operation ends (its bulk transfer, its posted mark);
 * it counts in its request (ncomplete), after which test() may hand the
 * request and the operation out again; then in the comm, after which the
 * comm may be freed. The caller touches neither afterwards. */
void proto_op_complete(struct proto_comm *c, struct ofi_op *op, atomic_int *ncomplete);
/* Cancels the operation if it is posted. Callers hold the CQ locks of the
 * comm's rails: no completion runs between the check and the cancel. */
void proto_op_cancel(struct ofi_op *op);

/* The descriptor of the comm's control messages (FI_MR_LOCAL), or NULL. */
static inline void *proto_ctrl_desc(struct proto_comm *c)
{
	return c->ctrl_mr ? c->ctrl_mr->desc : NULL;
}

/* The device table listen and connect look devices up in: core's, from init
 * to finalize (NULL then). */
void proto_devices_set(struct proto_device *devs, int ndevs);
/* Device dev of that table; NULL with a WARN naming the call (what) when there
 * is no such device or no table. */
struct proto_device *proto_device_of(int dev, const char *what);
/* Opens the device's domain on first use (the device's own lock). */
int proto_device_open(struct proto_device *dev, struct ofi_domain **out);
/* Counts a listen comm in its device's listen comms (which the CONNECT pool is
 * sized for) until it is freed; returns how many the device has now. */
int proto_listen_count(struct proto_listen *l);
/* A connection made (closed), for the resources line. */
void proto_comm_opened(void);
void proto_comm_closed(void);
/* Connections open, the most open at once, and made: the resources line. */
void proto_comm_counts(int *live, int *peak, long *total);
/* A new plugin context counts from the connections still open. */
void proto_comm_counts_reset(void);

/* ---- a comm's close (proto_close.c) ---- */

/* Closes a comm: waits (bounded) for what its peer still has to take or
 * write, cancels its operations, and releases it when its pending count is
 * zero, or turns it into a zombie. */
void proto_comm_retire(struct proto_comm *c);
/* The latest sign of life of c's peer on c or any other open comm of this
 * endpoint to the same peer; *others (if given): how many such comms there
 * are. Walks the domain's registry: for rare decisions, not the data path. */
uint64_t proto_peer_last_ns(struct proto_comm *c, int *others);

/* ---- liveness (proto_live.c) ---- */

/* The comm's ping, pong and goodbye operations, and its first sign of life. */
void proto_live_init(struct proto_comm *c);
/* Posts a ping, pong or goodbye (type) to the comm's peer on its home rail,
 * from op and its message buffer; 0 or the provider's error (then nothing is
 * posted). */
ssize_t proto_ping_post(struct proto_comm *c, struct ofi_op *op, struct proto_ping *msg,
			enum proto_ping_type type);
/* Writes only: tells the receiver that the message for its buffer slot is
 * larger than the buffer (PROTO_ABORT), from op and msg. */
ssize_t proto_abort_post(struct proto_send *s, struct ofi_op *op, struct proto_ping *msg,
			 uint32_t slot);
/* A ping, pong or goodbye for object id of ep's domain, from the CTS pool
 * (CQ lock held). */
void proto_ping_handler(struct ofi_ep *ep, const void *msg, size_t len, uint32_t id);

/* Liveness of a connection NCCL is waiting on: posts a ping after
 * PROTO_PING_NS without completions, and once the peer is known gone, fails
 * and cancels the comm's operations (once). Returns 0, or the FI_* error
 * that showed the peer is gone. Caller holds no CQ lock. */
int proto_comm_alive(struct proto_comm *c);
/* Before a post that reaches the peer (a message, a CTS): whether a silent
 * shm peer's process has exited, in which case the post could hang in the
 * provider. Looks at most every PROTO_EXIT_CHECK_NS, and only once the peer
 * has been silent that long, so a busy connection pays nothing. Marks the
 * comm dead; returns its FI_* error, or 0. */
int proto_comm_exited(struct proto_comm *c);
#define PROTO_EXIT_CHECK_NS 10000000ULL
/* How long a liveness probe of a TCP peer's endpoint address waits for an
 * answer (ofi_ep_peer_refused); a host that is down gives none, and the
 * peer timeout decides. */
#define PROTO_PROBE_WAIT_MS 20

/* What the operations of a comm whose peer is gone fail with (dead: the FI_*
 * code that showed it, which the WARNs name): -FI_ETIMEDOUT when its pings
 * went unanswered, else (a ping failed) -FI_ECONNABORTED. */
static inline int proto_gone_rc(int dead)
{
	return dead == FI_ETIMEDOUT ? -FI_ETIMEDOUT : -FI_ECONNABORTED;
}

/* ---- connections (proto_conn.c) ---- */

/* Closes connects NCCL started and never finished (finalize). */
void proto_pending_connects_close(int dev_index);
/* Starts what every endpoint of a device needs: the shared CTS receives and
 * the handler of RMA writes' CQ data. */
int proto_ep_start(struct proto_device *dev, struct ofi_ep *ep);
/* Prints a peer address for messages. */
void proto_addr_text(const struct fi_info *info, const void *addr, size_t len, char *buf,
		     size_t buf_len);

/* ---- the clear-to-send (proto_cts.c) ---- */

/* The receiver, at irecv: starts the receive's CTS for n buffers ... */
void proto_cts_init(struct proto_recv_req *q, int n);
/* ... announces buffer i (its size, tag and sequence number seq; with rma,
 * where it can take the message as an RMA write, its address and key) ... */
void proto_cts_announce(struct proto_recv_req *q, int i, uint32_t seq, bool rma);
/* ... and makes the CTS lazy (PROTO_LAZY_CTS_NS) when every buffer takes any
 * eager message whole. */
void proto_cts_lazy(struct proto_recv_req *q);
/* Posts the receive's CTS on the comm's home rail, a lazy one only once it is
 * due. Returns 0 (posted, or lazy and not due: q->cts_sent says which),
 * -FI_EAGAIN or an error. */
int proto_cts_send(struct proto_recv_req *q);
/* test(): a lazy CTS neither posted nor due once every buffer is full is
 * skipped (counted done) ... */
void proto_cts_skip_lazy(struct proto_req *r);
/* ... and a receive whose CTS could not be delivered is failed once it has
 * waited PROTO_CTS_FAIL_GRACE_NS for messages sent before. */
void proto_cts_check_failed(struct proto_recv_req *q);
/* The sender: a CTS (or a ping: they share one pool) for a send comm of ep's
 * domain, into the comm's table (ofi_rx_handler_fn; CQ lock held). */
void proto_cts_handler(struct ofi_ep *ep, void *arg, const void *msg, size_t len, uint64_t tag);
/* The sender: an early send with this key (proto_cts_key) no longer waits for
 * its CTS; its place is free (cts_lock held). Returns its size, 0 if none. */
size_t proto_early_forget(struct proto_send *s, uint64_t key);

/* ---- the data path (proto_data.c) ---- */

/* First failure (a negative -FI_* code) wins; later ones keep their WARN
 * lines but not the result. */
static inline void proto_req_fail(struct proto_req *r, int rc)
{
	int expected = 0;
	atomic_compare_exchange_strong(&r->status, &expected, rc);
}

/* A peer's RMA write filled one of our buffers (ofi_rw_handler_fn). */
void proto_rma_landed(struct ofi_ep *ep, void *arg, uint64_t imm, size_t len);
/* Answers the receiver's revocation (PROTO_STOPPED) when no write is in flight. */
void proto_send_stop(struct proto_send *s);
/* Posts what the provider refused for a moment of the device's striped writes
 * (dev->due_sends); skips a comm another thread is posting on. */
void proto_sends_due(struct proto_device *dev);
/* Takes the send comm off its device's due list (close). */
void proto_send_undue(struct proto_send *s);
/* The devices of the table core handed over (proto_devices_set); their count. */
int proto_devices(struct proto_device **devs);
/* Ends a receive's hold on its comm's other rails (test() when it is done;
 * close for the ones NCCL never saw done). */
void proto_recv_release_rails(struct proto_recv_req *q);

#endif
