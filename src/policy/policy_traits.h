/*
 * policy_traits.h - what the plugin must know about one provider, from its
 * name, the libfabric version and its fi_info entry. policy_traits.c holds
 * the table of every quirk: which providers, which libfabric versions, and
 * the test that shows it. The rest of the plugin asks these traits and never
 * matches a provider's name itself.
 */
#ifndef POLICY_TRAITS_H
#define POLICY_TRAITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>

struct policy_traits {
	/* Posts wait while another thread reads the same endpoint's completions
	 * (and the other way round): one thread in the provider at a time per
	 * endpoint. */
	bool serialize;
	/* A byte-stream provider: it takes any message into its stream without
	 * waiting for the receiver. */
	bool stream;
	/* The eager limit's default: what the provider completes without a
	 * receive posted (stream: NCCL's LL receive size; else the entry's
	 * inject size). */
	size_t eager_default;
	/* Messages above the eager limit a connection may send before their
	 * clear-to-send, at a time, by default: native tcp keeps such a message
	 * whole until its receive is posted, and cuts one larger than its
	 * receive with an error completion, writing nothing past it. 0 elsewhere:
	 * rxm breaks the connection on a message larger than its receive. */
	int early_sends;
	/* Rails after the first may open their own fi_domain: the entry needs no
	 * registration on each endpoint (no FI_MR_LOCAL, no FI_MR_ENDPOINT). The
	 * domain still decides (GPU memory and RMA writes need one domain). */
	bool split_domains;
	/* Ranking without NCCL_FABRIC_PROVIDER: where a preferred provider is
	 * usable, a provider that yields comes after every other one. */
	bool preferred;
	bool yields;
	const char *preferred_why; /* the selection's reason, where preferred */
	/* Known bug: fi_close of an endpoint with no CQ or AV bound crashes the
	 * process. Where binding failed, the endpoint is left open instead. */
	bool close_unbound_crashes;
	/* A peer address names a region under /dev/shm that libfabric maps and
	 * locks unchecked: a forged name crashes the process, and a peer that
	 * died holding the region's lock hangs the next post to it. Addresses
	 * are checked before insertion and a silent peer's process before a
	 * post (ofi/ofi_shm.c). */
	bool shm_region;
	/* Tagged receives take FI_PEEK (fi_trecvmsg), so data messages no
	 * connection will take can be found and drained (ofi_ep_drain_start).
	 * Where it is false the provider treats such a receive as an ordinary
	 * one (it would swallow a message), or was not seen to drain safely. */
	bool drain;
	/* The largest unexpected message a receive may take; 0: any. A larger
	 * one (rendezvous or segments) is taken through the sender's
	 * connection, and where that connection has closed meanwhile, the
	 * provider touches freed memory. The drain discards such messages
	 * unread (ofi_drain.c), and the eager limit's default is held to it, so
	 * that no message the plugin sends before its receive is posted is of
	 * that kind. */
	size_t whole_max;
	/* The provider moves data over TCP sockets (native tcp, rxm over tcp).
	 * libfabric cannot withdraw an operation it started to one peer; a
	 * close whose peer stopped taking data has the kernel reset that peer's
	 * connections instead (ofi/ofi_sock.c), so the provider lets go of
	 * NCCL's buffers before close returns. */
	bool tcp_sockets;
	/* A send on a connection the peer reset fails once (FI_ENOTCONN) before
	 * the provider connects again: a connection request is posted again. */
	bool stale_conn_once;
	/* NCCL_FABRIC_RAILS=auto may open several rails: NULL, or why it opens
	 * one (the NIC moves the bytes, or the provider's endpoints stall each
	 * other). */
	const char *one_rail_why;
	/* Large messages should not go as RMA writes by default: NULL, or why
	 * (NCCL_FABRIC_RMA=1 in the environment still asks for them). */
	const char *no_write_why;
	/* A libfabric variable the plugin sets before it opens any endpoint,
	 * where the environment has none: NULL, or its name, its value and why
	 * (ofi_discover applies it). */
	const char *env_name;
	const char *env_value;
	const char *env_why;
};

/* The eager limit a stream provider takes by default: what NCCL's LL
 * protocol posts per receive (its buffer in 8 steps), so every LL message
 * goes at once and its receive needs no CTS. */
#define POLICY_STREAM_EAGER 65536
/* Early sends native tcp allows at a time (NCCL_FABRIC_EARLY_SENDS=-1): enough
 * for a short exchange to skip the CTS's wait, few enough that a long stream
 * is paced by its receiver, whose unposted receives would otherwise have the
 * provider allocate and copy every message. */
#define POLICY_EARLY_SENDS 4
/* rxm's buffer size by default (FI_OFI_RXM_BUFFER_SIZE): larger messages
 * go by rendezvous or in segments. */
#define POLICY_RXM_BUFFER 16384

/* Pure: the provider's name is info->fabric_attr->prov_name; fi_version is
 * the run-time libfabric's (fi_version()). Never fails: an entry without a
 * name or attributes gets no quirk. */
void policy_traits_for(const struct fi_info *info, uint32_t fi_version, struct policy_traits *out);

#endif
