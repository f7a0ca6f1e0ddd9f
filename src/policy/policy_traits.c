/*
 * policy_traits.c - every provider quirk the plugin knows, in one table, and
 * the traits computed from it. Nothing else in the plugin matches a provider's
 * name to work around its behaviour.
 *
 * "trait" rows are answered by policy_traits_for() below and read where they
 * matter; "all" rows are handled the same way for every provider (where the
 * notes say), so they need no trait, and are listed so that a reader finds
 * every quirk here. Versions are the libfabric versions it holds for (1.17:
 * Debian 12's; 2.1: the 2.x builds the tests run on). What showed each quirk
 * is in docs/providers.md ("What showed each quirk").
 *
 * quirk            providers           libfabric       kind   test
 * ---------------  ------------------  --------------  -----  ------------------------------
 * serialize        shm                 1.17; kept on   trait  func.check.shm.full;
 *                                      all                    func.hmem.check.*
 * stream           tcp;ofi_rxm, tcp,   all             trait  unit.traits; func.check.tcp.full
 *                  sockets                                    (send-larger, lazy-cts)
 * eager default    all (inject size)   all             trait  unit.traits; unit.policy
 *                                                             (test_datapath_defaults)
 * split domains    native tcp; split   2.1             trait  unit.traits; func.check.tcp.rails
 *                  wherever the entry
 *                  allows
 * ranking          native tcp before   2.1 (1.17 has   trait  unit.traits; unit.policy
 *                  tcp;ofi_rxm         no native tcp)         (test_select_native_tcp_names)
 * unbound close    tcp;ofi_rxm         before 2.1      trait  unit.traits; func.real.answers
 * shm region       shm                 1.17, 2.1       trait  unit.traits; func.forged_handle.shm
 *                                                             (test_shm_regions);
 *                                                             func.check.shm.faults
 * host entry       shm, sm2            1.17, 2.1       all    unit.traits
 * getopt before    shm, sm2            2.1             all    func.real.answers; func.hmem.*
 *   enable
 * EAGAIN for a     tcp;ofi_rxm         1.17            all    func.check.tcp.faults
 *   dead peer                                                 (peer-death, link-cut)
 * CQ error sign    shm                 1.17 (2.1 is    all    func.check.shm.full
 *                                      positive)              (send-larger)
 * remote write     shm                 2.1             all    func.check.shm.rma
 *   flags
 * no RMA writes    tcp;ofi_rxm         1.17, 2.1       trait  unit.traits; func.check.tcp.rails
 *   by default                                                .faults (close-reconnect);
 *                                                             func.check.rxm.faults
 *                                                             (peer-death, mid-recv)
 * tagged by        tcp (native)        2.1             speed  bench/sweep.sh (rma0 knob)
 *   default
 * early sends      tcp (native)        2.1             speed  unit.traits; func.check.tcp
 *                                                             .early (lf2); bench/sweep.sh
 * one rail (auto)  all but native tcp  all             trait  unit.traits
 *                  and sockets
 * no FI_LOCAL_COMM shm                 1.17            all    unit.policy (test_plan_named);
 *                                                             func.check.shm.full
 * template entry   tcp (native)        2.1             all    unit.policy (test_select_template)
 * signal handlers  shm                 1.17            all    func.check.shm.full
 *                                                             (lifecycle/reload)
 * early CTS lost   shm                 1.17            all    func.check.shm.full
 *                                                             (many-comms/320)
 * unmatched data   shm (SAR buffers)   1.17            all    func.check.shm.full
 *   held forever                                              (close-inflight)
 * drain            tcp;ofi_rxm (any    1.17, 2.1       trait  func.hostile.{tcp,rxm};
 *                  core), native tcp                          func.check.*.close-reconnect
 *                  (not shm)
 * large messages   tcp;ofi_rxm (any    1.17, 2.1       trait  unit.traits; func.hostile
 *   follow a       core)                                      .{tcp,rxm}.abrupt
 *   closed conn.
 * stale            tcp;ofi_rxm (any    1.17            trait  unit.traits; func.check.tcp.faults
 *   connection     core)                                      (peer-stall/close)
 * no per-peer      tcp;ofi_rxm, tcp    1.17, 2.1       trait  unit.sock; func.check.{tcp,rxm}
 *   teardown       (tcp_sockets)                              .faults (peer-stall/close)
 * segments freed   tcp;ofi_rxm (any    2.0 and later   trait  unit.traits; func.hostile
 *   as the wrong   core)               (2.6 still)            .rxm.abrupt (lf2)
 *   type
 *
 * serialize: shm loses messages when one thread posts while another reads
 *   the same endpoint's completions, though it claims FI_THREAD_SAFE; NCCL's
 *   one-process, many-GPU mode does exactly that. Its endpoints take the CQ
 *   lock around every post (ofi_ep_enter). Kept on 2.x until shown fixed.
 * stream: a byte-stream provider (core provider tcp or sockets, layered or
 *   not) takes any message into its stream without the receiver, so its
 *   eager limit defaults to POLICY_STREAM_EAGER.
 * early sends: native tcp keeps a tagged message that arrives before its
 *   receive (up to 64 per peer, each in a buffer of its own), and cuts one
 *   larger than the receive that takes it (FI_ETRUNC) without writing past
 *   it; so a few messages above the eager limit may go before their CTS.
 *   rxm breaks the connection on a message larger than its receive, and shm
 *   hangs: none there.
 * eager default: other providers complete eagerly what they can inject. An
 *   FI_HMEM entry may inject nothing (shm and sm2: 0, their host entries
 *   4096 and 3864), so a device that moves host memory only opens the host
 *   entry (core_plugin.c): that is the "host entry" row.
 * split domains: native tcp runs every endpoint of a domain under one
 *   progress lock, so rails of one domain never run in parallel. Rails after
 *   the first open their own domain wherever the entry needs no registration
 *   on each endpoint (no FI_MR_LOCAL or FI_MR_ENDPOINT); ofi_domain_open
 *   adds its own conditions (no GPU memory; RMA writes only where the
 *   plugin picks registration keys, so each rail's domain registers a
 *   buffer under the same key).
 * ranking: without NCCL_FABRIC_PROVIDER, native tcp is preferred to
 *   tcp;ofi_rxm wherever both are usable, whatever order libfabric lists
 *   them in: NCCL's collectives run faster over it.
 * unbound close: tcp;ofi_rxm of 1.17 crashes in fi_close of an endpoint
 *   with no CQ or AV bound; 2.1 does not (versions between are taken to
 *   crash). Every endpoint the plugin opens, the probe's included, is bound
 *   before it is enabled or closed, which fi_enable needs anyway; where a
 *   bind fails on such a provider, the endpoint is left open rather than
 *   closed (ofi_ep_open, ofi_probe_run).
 * shm region: shm's address is the name of the peer's region under
 *   /dev/shm, which libfabric maps (at fi_av_insert on 1.17, at the first
 *   send on 2.x) and whose spinlock it takes on each post, trusting the
 *   header: a forged name that reaches another process's or an older
 *   libfabric's region crashes the process, and a peer killed while holding
 *   the lock (1.17 holds it through a whole receive) hangs the next post to
 *   it forever. ofi/ofi_shm.c checks the name, the file and the owner's
 *   process before insertion, and the process before a silent peer is
 *   posted to.
 * getopt before enable: shm and sm2 of 2.x read state made at fi_enable in
 *   fi_getopt; the probe enables its endpoint before it asks.
 * EAGAIN for a dead peer: tcp;ofi_rxm keeps reconnecting to a peer that is
 *   gone and answers each post with -FI_EAGAIN. -FI_EAGAIN is a full queue
 *   on every provider, never a verdict: a ping that gets it is retried, and
 *   the peer timeout ends the wait (proto_conn.c, liveness). Native tcp does
 *   the same; over TCP a refused probe of the peer's endpoint address ends
 *   it at once (ofi_ep_peer_refused, proto_live.c).
 * CQ error sign: shm of 1.17 stores the error of a completion negated;
 *   ofi_cq_err_code reads either sign.
 * remote write flags: shm of 2.x flags a peer's RMA write with CQ data
 *   FI_RMA|FI_REMOTE_CQ_DATA only, without FI_REMOTE_WRITE; ofi_ep_progress
 *   takes a completion without context and with CQ data as one.
 * no RMA writes by default: over tcp;ofi_rxm an RMA write to a receiver that
 *   closes may never complete (1.x), and a receiver whose sender dies during
 *   a write crashes in rxm_handle_comp_error (2.x): messages above the eager
 *   limit go as tagged sends unless NCCL_FABRIC_RMA=1.
 * tagged by default: over native tcp, NCCL's collectives ran faster with one
 *   tagged send after the CTS than with RMA writes cut over rails (the sweep
 *   in docs/performance.md); the writes stay one setting away.
 * one rail (auto): several rails pay where the host CPU moves the bytes,
 *   each rail with a core of its own; under rxm, several endpoints per
 *   process make mid-size messages wait for each other's progress.
 * no FI_LOCAL_COMM: shm of 1.17 answers nothing when FI_LOCAL_COMM is asked
 *   for; the single-host pass asks for no locality bit (policy_plan).
 * template entry: libfabric 2.x lists native tcp bare (no address, its name
 *   as domain) when FI_REMOTE_COMM is asked for on a host whose only usable
 *   interface is loopback; policy_select rejects it with advice.
 * signal handlers: shm installs signal handlers that point into libfabric,
 *   so the plugin keeps libfabric loaded past its own dlclose (core_plugin.c).
 * early CTS lost: shm of 1.17 never matches a message that arrived before a
 *   receive was posted for it; every send comm keeps CTS receives posted
 *   ahead (proto_conn.c).
 * unmatched data held forever: a provider keeps a message no receive
 *   matches in its own buffers (shm's SAR buffers then starve later
 *   transfers); a receive comm closing with announced buffers drains them
 *   into a scratch buffer (proto_close.c).
 * drain: unexpected data nobody will take holds the provider for good
 *   (native tcp 2.1 stops reading the peer's socket after 64; tcp;ofi_rxm
 *   keeps the connection's buffers and credits). Where the provider
 *   implements FI_PEEK, each endpoint finds such messages and takes them with
 *   an ordinary receive (ofi_ep_drain_start). shm of 1.17 ignores FI_PEEK
 *   (a peek would post an ordinary receive and swallow a message); shm of
 *   2.1 is left out too: its drain is not trusted (docs/providers.md).
 * large messages follow a closed connection: rxm sends a message
 *   above its buffer (FI_OFI_RXM_BUFFER_SIZE, 16 KiB by default) by
 *   rendezvous (over tcp: the receiver reads it from the sender) or in
 *   segments. The unexpected first packet keeps a pointer to its
 *   connection, which rxm frees (1.17) or empties (2.x: a rendezvous read
 *   through its NULL endpoint) when the peer leaves; a receive that later
 *   takes it crashes the process. A discard (FI_PEEK|FI_DISCARD) frees the packet without
 *   looking at the connection, so the drain discards such messages (each
 *   packet; a rendezvous sender then waits for good, which only a forger
 *   or a peer that already left does), and the eager limit's default is
 *   held to the buffer size, so that a peer that dies after an eager send
 *   leaves nothing of that kind for NCCL's own receive (messages above it
 *   wait for the CTS, whose receive is posted before they arrive). Setting
 *   NCCL_FABRIC_EAGER_MAX above it brings the risk back.
 * segments freed as the wrong type: rxm of 2.0 and later keeps each
 *   message it receives in segments (above its buffer, up to its SAR limit,
 *   8 buffers by default) on its connection until the last one arrives.
 *   When the sender leaves first, rxm frees that record as another type and
 *   calls through a NULL pointer (rxm_close_conn): the receiving process
 *   dies, whatever the plugin does. FI_OFI_RXM_SAR_LIMIT=0 turns segments
 *   off, so messages above the buffer go by rendezvous; the plugin sets it
 *   before opening any endpoint unless the environment sets it already.
 *   Rendezvous is safe from this only because of the row above: nothing
 *   above the buffer arrives unexpected from the plugin's own peers, and
 *   the drain discards what others send.
 * stale connection: rxm keeps its connection to a peer that reset it until
 *   it reads the reset; a send meanwhile fails with FI_ENOTCONN ("Broken
 *   pipe") and the next one connects again. A connection request that fails
 *   so is posted again (within the answer bound). Not on native tcp, where
 *   posting it again breaks the reconnect.
 * no per-peer teardown: nothing withdraws a send or RMA write started to one
 *   peer (fi_cancel does not; fi_av_remove keeps native tcp's connection,
 *   and rxm's only with FI_AV_REMOVE_CLEANUP, which frees connections that
 *   unexpected packets point at). A close whose peer stopped taking data
 *   would return with the provider still holding NCCL's buffer, which NCCL
 *   then frees: the write fails part way through its message and the stream
 *   goes out of step. Over TCP sockets the kernel resets the connection
 *   instead, or it is shut down (ofi/ofi_sock.c).
 */
#include "policy/policy_traits.h"

#include <string.h>
#include <strings.h>

#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

/* The full name, in any case: "shm" is shm alone, never a layering over it. */
static bool name_is(const char *prov, const char *name)
{
	return !strcasecmp(prov, name);
}

/* The core provider of a layered name ("tcp" of "tcp;ofi_rxm"), or the name. */
static bool core_is(const char *prov, const char *core)
{
	size_t n = strcspn(prov, ";");
	return n == strlen(core) && !strncasecmp(prov, core, n);
}

void policy_traits_for(const struct fi_info *info, uint32_t fi_version, struct policy_traits *out)
{
	memset(out, 0, sizeof(*out));
	const char *prov = info && info->fabric_attr && info->fabric_attr->prov_name ?
				   info->fabric_attr->prov_name : "";
	out->serialize = name_is(prov, "shm");
	out->stream = core_is(prov, "tcp") || core_is(prov, "sockets");
	out->tcp_sockets = core_is(prov, "tcp");
	size_t inject = info && info->tx_attr ? info->tx_attr->inject_size : 0;
	out->eager_default = out->stream ? POLICY_STREAM_EAGER : inject;
	int mr_mode = info && info->domain_attr ? info->domain_attr->mr_mode : 0;
	out->split_domains = !(mr_mode & (FI_MR_LOCAL | FI_MR_ENDPOINT));
	out->preferred = name_is(prov, "tcp");
	out->preferred_why = out->preferred ?
				     "native tcp, preferred to tcp;ofi_rxm: NCCL's collectives run faster over it" :
				     "";
	out->yields = name_is(prov, "tcp;ofi_rxm");
	out->close_unbound_crashes = name_is(prov, "tcp;ofi_rxm") && fi_version < FI_VERSION(2, 1);
	out->shm_region = name_is(prov, "shm");
	/* rxm (any core) and native tcp implement FI_PEEK; shm of 1.17 ignores
	 * it (a peek would swallow a message), and 2.1's drain is not trusted */
	size_t n = strlen(prov), rxm = strlen(";ofi_rxm");
	bool is_rxm = n > rxm && !strcasecmp(prov + n - rxm, ";ofi_rxm");
	out->drain = (is_rxm || name_is(prov, "tcp")) && info && (info->caps & FI_TAGGED);
	out->stale_conn_once = is_rxm;
	out->early_sends = name_is(prov, "tcp") ? POLICY_EARLY_SENDS : 0;
	/* rxm sends what exceeds its buffer by rendezvous or in segments, which
	 * a receive taking them after the connection closed follows into the
	 * closed connection */
	if (is_rxm) {
		out->whole_max = POLICY_RXM_BUFFER;
		if (out->eager_default > out->whole_max)
			out->eager_default = out->whole_max;
	}
	/* several rails pay where the host CPU moves the bytes, each rail a core
	 * of its own; under rxm, several endpoints per process made mid-size
	 * messages wait milliseconds (its own progress between them) */
	out->one_rail_why = !out->stream ? "the provider does not move bytes with the host CPU" :
			    is_rxm ?
				    "tcp;ofi_rxm: its endpoints delay each other's mid-size messages "
				    "by milliseconds" : NULL;
	out->no_write_why = name_is(prov, "tcp") ?
				    "native tcp: faster under NCCL's collectives than RMA writes cut "
				    "over rails, measured by bench/sweep.sh" :
			    !name_is(prov, "tcp;ofi_rxm") ? NULL :
			    fi_version < FI_VERSION(2, 0) ?
				    "tcp;ofi_rxm before libfabric 2.0: an RMA write to a receiver that "
				    "closes may never complete" :
				    "tcp;ofi_rxm: a receiver whose sender dies during an RMA write "
				    "crashes in libfabric (rxm_handle_comp_error)";
	if (is_rxm && fi_version >= FI_VERSION(2, 0)) {
		out->env_name = "FI_OFI_RXM_SAR_LIMIT";
		out->env_value = "0";
		out->env_why = "rxm of libfabric 2.0 and later crashes the receiving process when a "
			       "sender leaves during a message sent in segments (rxm_close_conn): "
			       "messages above rxm's buffer go by rendezvous instead";
	}
}
