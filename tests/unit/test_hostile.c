/*
 * test_hostile.c - a hostile process next to a working connection.
 *
 * The victim process listens, connects to itself through that listen comm and
 * streams messages of every size class (eager, bounced, after the CTS), each
 * byte and each size test() reports checked. Meanwhile a hostile process that
 * holds the victim's listen handle (as any rank of a job could) sends the
 * victim's endpoint every kind of message the plugin's wire knows, forged:
 * garbage and well-formed CONNECT (wrong nonce, unusable addresses), CTS,
 * pings and pongs, ACCEPT and REJECT for guessed ids and wrong secrets, and
 * data messages with guessed connection ids, sequence numbers and the NCCL
 * tag in use. The stream must arrive intact, the garbage must be counted as
 * dropped, and the listen comm must still take a new connection afterwards.
 *
 * Unless it sends oversized control messages (which tcp;ofi_rxm answers by
 * breaking the connection they came on: the sender's own), the hostile
 * process also holds a legitimate connection to the victim and streams
 * checked messages on it (the peer stream): its forgeries share the
 * provider's connection between the two endpoints with that stream, as a
 * faulty rank's would. Data forgeries match no receive (random connection
 * ids, directed receives); unless the victim's endpoint drains them
 * (traits.drain), they hold that connection for good: native tcp stops
 * reading the socket after 64, tcp;ofi_rxm runs out of its credits. So the
 * victim streams for HOSTILE_SECONDS (6 by default) while the forgeries go
 * on, measures its own stream's longest stall (the longest time with
 * messages outstanding and none completing) and the peer stream's (the
 * longest a message took from the hostile process's isend to its arrival, or
 * the time since the last one arrived, when the stream stopped),
 * and fails if one exceeds 1 s (times NCCL_FABRIC_TEST_TIMEOUT_MULTIPLIER). It prints how many forged data
 * messages its endpoint drained; on a provider that drains, none drained
 * fails the test.
 *
 * Both processes run the plugin's own code (fabric_static); the hostile one
 * posts its forgeries on its own endpoint with raw tagged sends. Runs over the
 * provider NCCL_FABRIC_PROVIDER names, on loopback; exit 77 when absent.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>

#include "core/core.h"
#include "proto/proto.h"
#include "proto/proto_wire.h"

#define STREAM_MSGS 1000
#define WINDOW 8
#define GUESS_IDS 48       /* ids the hostile process tries (the victim's are small) */
#define HOSTILE_OPS 256    /* forged sends in flight at most */
#define BOUND_S 120.0
#define STALL_MAX_S 1.0

static double now_s(void);
static int fail(const char *who, const char *what);

static double mult = 1.0;     /* NCCL_FABRIC_TEST_TIMEOUT_MULTIPLIER */
static double longest_stall;  /* the stream's, in seconds */

/* The peer stream: the hostile process's legitimate messages to the victim,
 * on tag PEER_TAG, sizes cycling through peer_size (eager over tcp). */
#define PEER_TAG 0x2b
#define PEER_WINDOW 4
#define PEER_CAP 65536
static size_t peer_size(long k)
{
	static const size_t sizes[] = {100, 4096, 16384, 65536, 0, 30000};
	return sizes[k % (long)(sizeof(sizes) / sizeof(sizes[0]))];
}

static unsigned char peer_byte(long k, size_t off)
{
	return (unsigned char)(k * 37 + off * 11 + 5);
}

struct peer_rx {
	void *rc;
	unsigned char *buf[PEER_WINDOW];
	void *mr[PEER_WINDOW], *req[PEER_WINDOW];
	long msg[PEER_WINDOW];
	long posted, done;
	double last;
	double longest; /* the longest a message took from isend to its arrival */
};
static struct peer_rx prx;

/* Keeps receives of the peer stream posted and checks what arrives. */
static int peer_pump(void)
{
	struct peer_rx *p = &prx;
	if (!p->rc)
		return 0;
	for (int w = 0; w < PEER_WINDOW; w++) {
		if (!p->req[w]) {
			void *data = p->buf[w];
			size_t size = PEER_CAP;
			int tag = PEER_TAG;
			if (net_irecv(p->rc, 1, &data, &size, &tag, &p->mr[w], &p->req[w]) != 0)
				return fail("victim", "irecv of the peer stream failed");
			if (p->req[w])
				p->msg[w] = p->posted++;
			continue;
		}
		int done = 0, size = -1;
		if (net_test(p->req[w], &done, &size) != 0)
			return fail("victim", "a receive of the peer stream failed");
		if (!done)
			continue;
		long k = p->msg[w];
		size_t n = peer_size(k);
		if ((size_t)size != n) {
			fprintf(stderr, "peer message %ld: %d bytes, expected %zu\n", k, size, n);
			return fail("victim", "a peer-stream receive reported the wrong size");
		}
		/* the first 8 bytes: when the hostile process posted it (one
		 * host: CLOCK_MONOTONIC is the same clock in both processes) */
		size_t from = 0;
		if (n >= sizeof(double)) {
			double posted;
			memcpy(&posted, p->buf[w], sizeof(posted));
			double lat = now_s() - posted;
			if (lat > p->longest)
				p->longest = lat;
			from = sizeof(double);
		}
		for (size_t i = from; i < n; i++)
			if (p->buf[w][i] != peer_byte(k, i))
				return fail("victim", "corrupt data in the peer stream");
		p->req[w] = NULL;
		p->done++;
		p->last = now_s();
	}
	return 0;
}

/* Which forgeries to send (bit per kind; all by default), and for how many
 * rounds data forgeries go on (-1: throughout). A round goes out every
 * HOSTILE_ROUND_MS (20 by default). Over shm CTest bounds the
 * data forgeries and sends no oversized control messages: libfabric 1.17's
 * shm cannot drain them, 2.1's shm crashes when an oversized unexpected
 * message meets a receive (smr_unexp_start), and any local process of the
 * user can write a shm peer's memory anyway. */
static unsigned kinds = ~0u;
static int data_rounds = -1, round_no;
#define K_CONNECT 1u
#define K_ACCEPT 2u
#define K_CTS 4u
#define K_PING 8u
#define K_DATA 16u
#define K_OVERSIZE 32u

/* Off with oversized control messages, and with HOSTILE_PEER=0 (shm of 1.17
 * cannot drain the forgeries, which then hold the hostile process's own
 * connection: a known limit). */
static bool abrupt_on(void)
{
	const char *e = getenv("HOSTILE_ABRUPT");
	return e && !strcmp(e, "1");
}

/* Waits (at most 10 s times the multiplier) for the hostile process's
 * answer on fd, or with until_gone for it to close the pipe (exit). */
static void wait_hostile(int fd, bool until_gone)
{
	struct timeval tv = {(time_t)(10 * mult), 0};
	char c;
	for (;;) {
		fd_set fds;
		FD_ZERO(&fds);
		FD_SET(fd, &fds);
		if (select(fd + 1, &fds, NULL, NULL, &tv) <= 0 || read(fd, &c, 1) <= 0 ||
		    !until_gone)
			return;
	}
}

static bool peer_stream_on(void)
{
	const char *e = getenv("HOSTILE_PEER");
	return !(kinds & K_OVERSIZE) && !(e && !strcmp(e, "0")) && !abrupt_on();
}


static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static int fail(const char *who, const char *what)
{
	fprintf(stderr, "FAIL (%s): %s\n", who, what);
	return 1;
}

/* ------------------------------------------------------------ victim */

static size_t stream_size(int i)
{
	static const size_t sizes[] = {0, 1, 100, 4096, 16383, 16384, 16385, 65536, 300000, 1 << 20};
	return sizes[i % (int)(sizeof(sizes) / sizeof(sizes[0]))];
}

static unsigned char stream_byte(int msg, size_t off)
{
	return (unsigned char)(msg * 131 + off * 7 + (off >> 9));
}

static int connect_self(void *lcomm, const char *handle, void **sc, void **rc)
{
	double end = now_s() + 30;
	*sc = *rc = NULL;
	while ((!*sc || !*rc) && now_s() < end) {
		if (!*sc && net_connect(0, (void *)handle, sc) != 0)
			return -1;
		if (!*rc && net_accept(lcomm, rc) != 0)
			return -1;
	}
	return *sc && *rc ? 0 : -1;
}

static int victim_stream(void *sc, void *rc)
{
	size_t cap = 1 << 20;
	unsigned char *sbuf[WINDOW], *rbuf[WINDOW];
	void *smr[WINDOW], *rmr[WINDOW];
	for (int w = 0; w < WINDOW; w++) {
		sbuf[w] = malloc(cap);
		rbuf[w] = malloc(cap);
		if (!sbuf[w] || !rbuf[w] ||
		    net_reg_mr(sc, sbuf[w], cap, NCCL_PTR_HOST, &smr[w]) != 0 ||
		    net_reg_mr(rc, rbuf[w], cap, NCCL_PTR_HOST, &rmr[w]) != 0)
			return fail("victim", "buffers");
	}
	void *sreq[WINDOW] = {0}, *rreq[WINDOW] = {0};
	int smsg[WINDOW], rmsg[WINDOW];
	int sent = 0, recvd = 0, sposted = 0, rposted = 0;
	double end = now_s() + BOUND_S, last = now_s();
	while (recvd < STREAM_MSGS || sent < STREAM_MSGS) {
		double t = now_s();
		if (t - last > longest_stall)
			longest_stall = t - last;
		if (t > end)
			return fail("victim", "the stream did not finish in time");
		if (peer_pump())
			return 1;
		for (int w = 0; w < WINDOW; w++) {
			if (!rreq[w] && rposted < STREAM_MSGS && rposted - recvd < WINDOW) {
				void *data = rbuf[w];
				size_t size = cap;
				int tag = 0x2a;
				memset(rbuf[w], 0xee, stream_size(rposted) + 1 < cap ? stream_size(rposted) + 1 : cap);
				if (net_irecv(rc, 1, &data, &size, &tag, &rmr[w], &rreq[w]) != 0)
					return fail("victim", "irecv failed");
				if (rreq[w])
					rmsg[w] = rposted++;
			}
			if (!sreq[w] && sposted < STREAM_MSGS && sposted - sent < WINDOW) {
				size_t n = stream_size(sposted);
				for (size_t k = 0; k < n; k++)
					sbuf[w][k] = stream_byte(sposted, k);
				if (net_isend(sc, sbuf[w], n, 0x2a, smr[w], &sreq[w]) != 0)
					return fail("victim", "isend failed");
				if (sreq[w])
					smsg[w] = sposted++;
			}
		}
		for (int w = 0; w < WINDOW; w++) {
			int done = 0, size = -1;
			if (sreq[w]) {
				if (net_test(sreq[w], &done, &size) != 0)
					return fail("victim", "a send failed");
				if (done) {
					if ((size_t)size != stream_size(smsg[w]))
						return fail("victim", "a send reported the wrong size");
					sreq[w] = NULL;
					sent++;
					last = now_s();
				}
			}
			done = 0;
			size = -1;
			if (rreq[w]) {
				if (net_test(rreq[w], &done, &size) != 0)
					return fail("victim", "a receive failed");
				if (done) {
					int m = rmsg[w];
					size_t n = stream_size(m);
					if ((size_t)size != n) {
						fprintf(stderr, "message %d: %d bytes, expected %zu\n", m, size, n);
						return fail("victim", "a receive reported the wrong size");
					}
					for (size_t k = 0; k < n; k++)
						if (rbuf[w][k] != stream_byte(m, k)) {
							fprintf(stderr, "message %d: byte %zu is 0x%02x, expected 0x%02x\n",
								m, k, rbuf[w][k], stream_byte(m, k));
							return fail("victim", "corrupt data");
						}
					rreq[w] = NULL;
					recvd++;
					last = now_s();
				}
			}
		}
	}
	for (int w = 0; w < WINDOW; w++) {
		net_dereg_mr(sc, smr[w]);
		net_dereg_mr(rc, rmr[w]);
		free(sbuf[w]);
		free(rbuf[w]);
	}
	return 0;
}

static int victim(int to_hostile, int from_hostile)
{
	void *ctx = NULL, *lcomm = NULL, *sc = NULL, *rc = NULL;
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	if (net_init(&ctx, NULL) != 0)
		return 77;
	if (net_listen(0, handle, &lcomm) != 0)
		return fail("victim", "listen failed");
	if (connect_self(lcomm, handle, &sc, &rc))
		return fail("victim", "the first connection failed");
	/* the hostile process starts, connects (the peer stream), and says
	 * when its first round went out */
	char go;
	if (write(to_hostile, handle, sizeof(handle)) != (ssize_t)sizeof(handle))
		return fail("victim", "pipe to the hostile process");
	bool peer = peer_stream_on();
	double until_peer = now_s() + 30;
	while (peer && !prx.rc && now_s() < until_peer)
		if (net_accept(lcomm, &prx.rc) != 0)
			return fail("victim", "accepting the hostile process's connection failed");
	if (peer && !prx.rc)
		return fail("victim", "the hostile process did not connect");
	for (int w = 0; peer && w < PEER_WINDOW; w++) {
		prx.buf[w] = malloc(PEER_CAP);
		if (!prx.buf[w] || net_reg_mr(prx.rc, prx.buf[w], PEER_CAP, NCCL_PTR_HOST, &prx.mr[w]))
			return fail("victim", "peer-stream buffers");
	}
	prx.last = now_s();
	if (read(from_hostile, &go, 1) != 1)
		return fail("victim", "pipe to the hostile process");
	struct core_plugin *p = core_plugin_get();
	struct ofi_ep *ep = p->devs[0].dom->eps[0];
	double secs = getenv("HOSTILE_SECONDS") ? atof(getenv("HOSTILE_SECONDS")) : 6.0;
	double until = now_s() + secs;
	int streams = 0, rc_;
	do { /* while the forgeries go on */
		rc_ = victim_stream(sc, rc);
		if (rc_)
			return rc_;
		streams++;
	} while (now_s() < until);
	/* a new connection through the same listen comm, while the storm goes on */
	void *sc2 = NULL, *rc2 = NULL;
	if (connect_self(lcomm, handle, &sc2, &rc2))
		return fail("victim", "a new connection after the forgeries failed");
	rc_ = victim_stream(sc2, rc2);
	if (rc_)
		return rc_;
	/* a peer stream that stopped: nothing arrived for a while though the
	 * hostile process goes on sending (its messages' own times never come) */
	if (peer && now_s() - prx.last > prx.longest)
		prx.longest = now_s() - prx.last;
	unsigned dropped = atomic_load(&ep->dropped), drained = atomic_load(&ep->drained);
	bool drains = p->devs[0].dom->traits.drain;
	printf("victim: %d x %d + %d messages intact over %.1f s, %ld of the peer stream; %u "
	       "forged messages and addresses dropped; %u forged data messages drained (%s); "
	       "longest stall: own stream %.3f s, peer stream %.3f s (isend to arrival, or since the last arrival)\n",
	       streams, STREAM_MSGS, STREAM_MSGS, secs, prx.done, dropped, drained,
	       drains ? "the provider drains" : "the provider cannot drain", longest_stall,
	       prx.longest);
	fflush(stdout);
	if (dropped == 0)
		return fail("victim", "nothing was counted as dropped");
	/* Where the provider delivers large messages only through the sender's
	 * connection (traits.whole_max), the drain discards the large forgeries
	 * unread, and their sends never complete: the hostile process's own
	 * sends then wait behind them, nobody else's. */
	if (p->devs[0].dom->traits.whole_max && (kinds & K_DATA) && prx.longest > STALL_MAX_S * mult) {
		printf("victim: the peer stream stalled %.3f s behind the hostile process's own "
		       "discarded forgeries (above %zu bytes: their sends never complete)\n",
		       prx.longest, p->devs[0].dom->traits.whole_max);
		prx.longest = 0;
	}
	if (longest_stall > STALL_MAX_S * mult || prx.longest > STALL_MAX_S * mult) {
		fprintf(stderr, "a stream stalled for %.3f s (bound %.1f s)\n",
			longest_stall > prx.longest ? longest_stall : prx.longest, STALL_MAX_S * mult);
		return fail("victim", "a legitimate stream stalled");
	}
	if (peer && prx.done < 10)
		return fail("victim", "the peer stream moved fewer than 10 messages");
	if (drains && !(kinds & K_DATA))
		drains = false;
	if (drains && getenv("HOSTILE_DATA_ROUNDS") == NULL && drained == 0)
		return fail("victim", "forged data messages were sent throughout, none was drained");
	/* HOSTILE_ABRUPT=1: the hostile process sends a last burst of large
	 * data forgeries and exits at once, its connection breaking with them
	 * unexpected here (tcp;ofi_rxm of 1.17 frees that connection while
	 * they wait). The drain must take them without touching it; the
	 * victim streams on, then closes. Otherwise the hostile process stops
	 * forging, waits for its forgeries to be taken, and stays, progressing,
	 * until the victim has finalized: the drain then meets connections
	 * that still live. */
	if (abrupt_on()) {
		char cmd = 'k';
		if (write(to_hostile, &cmd, 1) != 1)
			return fail("victim", "pipe to the hostile process");
		wait_hostile(from_hostile, true);
		unsigned before = atomic_load(&ep->drained);
		double after_until = now_s() + 1.5;
		int more = 0;
		do { /* while the drain walks over what the burst left */
			rc_ = victim_stream(sc, rc);
			if (rc_)
				return rc_;
			more++;
		} while (now_s() < after_until);
		printf("victim: the hostile process left after its last burst; %d x %d messages "
		       "intact since; forged data messages drained: %u before the burst, %u "
		       "when it had left, %u at the end\n", more, STREAM_MSGS, drained, before,
		       atomic_load(&ep->drained));
		fflush(stdout);
	} else {
		char quiet = 's';
		if (write(to_hostile, &quiet, 1) == 1) {
			wait_hostile(from_hostile, false);
			usleep(500000); /* the drain's next walks take what is left */
		}
	}
	net_close_send(sc);
	net_close_recv(rc);
	net_close_send(sc2);
	net_close_recv(rc2);
	net_close_listen(lcomm);
	net_finalize(ctx);
	close(to_hostile); /* the hostile process leaves */
	return 0;
}

/* ------------------------------------------------------------ hostile */

struct forged {
	struct ofi_op op;
	bool busy;
	unsigned char buf[65536];
};

static struct forged ops[HOSTILE_OPS];
static long posted_total, posted_data;

static void forged_done(struct ofi_op *op, const struct fi_cq_tagged_entry *e,
			const struct fi_cq_err_entry *err)
{
	((struct forged *)op->owner)->busy = false;
}

/* A free forgery slot, waiting at most 20 ms: forgeries the victim
 * discards unread (rendezvous, traits.whole_max) never complete, and the
 * hostile process's own stream must not wait behind them here. */
static struct forged *forged_get(struct ofi_ep *ep)
{
	double until = now_s() + 0.02;
	do {
		for (int i = 0; i < HOSTILE_OPS; i++)
			if (!ops[i].busy)
				return &ops[i];
		(void)ofi_ep_progress(ep);
	} while (now_s() < until);
	return NULL; /* the victim holds them all: this forgery is skipped */
}

static const struct proto_tag_layout *glay;

/* The hostile process's legitimate stream to the victim (peer_pump's). */
static void *psc;
static unsigned char *pbuf[PEER_WINDOW];
static void *pmr[PEER_WINDOW], *preq[PEER_WINDOW];
static long psent;

static int peer_send_pump(void)
{
	for (int w = 0; w < PEER_WINDOW; w++) {
		if (preq[w]) {
			int done = 0, size = -1;
			if (net_test(preq[w], &done, &size) != 0)
				return fail("hostile", "a send of the peer stream failed");
			if (!done)
				continue;
			preq[w] = NULL;
		}
		size_t n = peer_size(psent);
		for (size_t i = 0; i < n; i++)
			pbuf[w][i] = peer_byte(psent, i);
		if (n >= sizeof(double)) {
			double t = now_s();
			memcpy(pbuf[w], &t, sizeof(t));
		}
		if (net_isend(psc, pbuf[w], n, PEER_TAG, pmr[w], &preq[w]) != 0)
			return fail("hostile", "isend of the peer stream failed");
		if (preq[w])
			psent++;
	}
	return 0;
}

static unsigned kind_of(uint64_t tag, size_t len)
{
	if (!proto_tag_is_ctrl(glay, tag))
		return K_DATA;
	unsigned k = (unsigned)(tag >> glay->kind_shift) & 3;
	size_t room = sizeof(struct proto_msg); /* every control receive's buffer */
	if (len > room)
		return K_OVERSIZE;
	return k == PROTO_CTRL_CONNECT ? K_CONNECT : k == PROTO_CTRL_ACCEPT ? K_ACCEPT :
	       k == PROTO_CTRL_CTS ? K_CTS : K_PING;
}

static void forge(struct ofi_ep *ep, fi_addr_t to, uint64_t tag, const void *msg, size_t len)
{
	unsigned k = kind_of(tag, len);
	if (!(kinds & k) || (k == K_DATA && data_rounds >= 0 && round_no >= data_rounds))
		return;
	struct forged *f = forged_get(ep);
	if (!f)
		return;
	if (len > sizeof(f->buf))
		len = sizeof(f->buf);
	memcpy(f->buf, msg, len);
	memset(&f->op, 0, sizeof(f->op));
	f->op.complete = forged_done;
	f->op.owner = f;
	f->busy = true;
	/* control messages travel untagged and start with their route */
	bool ctrl = proto_tag_is_ctrl(glay, tag);
	if (ctrl && len >= sizeof(tag))
		memcpy(f->buf, &tag, sizeof(tag));
	if (ctrl ? ofi_ep_send(ep, f->buf, len, NULL, to, &f->op.ctx) :
		   ofi_ep_tsend(ep, f->buf, len, NULL, to, tag, &f->op.ctx))
		f->busy = false;
	else {
		posted_total++;
		posted_data += k == K_DATA;
	}
	(void)ofi_ep_progress(ep);
}

static void garbage(unsigned char *b, size_t len)
{
	for (size_t i = 0; i < len; i++)
		b[i] = (unsigned char)rnd();
}

/* One round of every forgery at every guessed id. */
static void hostile_round(struct ofi_ep *ep, fi_addr_t to, const struct proto_handle *h,
			  const struct proto_tag_layout *lay, uint64_t prov_hash)
{
	/* requests name our own address: the REJECTs they earn come back here */
	unsigned char junk[800];
	round_no++;
	for (uint32_t id = 0; id < GUESS_IDS; id++) {
		/* CONNECT: garbage; sealed with a wrong nonce; sealed with the right
		 * nonce and an address that cannot be one */
		size_t jl = rnd() % sizeof(junk);
		garbage(junk, jl);
		forge(ep, to, proto_tag_ctrl(lay, PROTO_CTRL_CONNECT, id), junk, jl);
		struct proto_msg m;
		memset(&m, 0, sizeof(m));
		m.type = PROTO_MSG_CONNECT;
		m.nrails = 1;
		m.id = (uint32_t)rnd();
		m.prov_hash = prov_hash;
		m.nonce = rnd();
		m.alen[0] = (uint8_t)ep->namelen;
		memcpy(m.addr[0], ep->name, ep->namelen);
		proto_msg_seal(&m, proto_tag_ctrl(lay, PROTO_CTRL_CONNECT, id));
		forge(ep, to, proto_tag_ctrl(lay, PROTO_CTRL_CONNECT, id), &m, sizeof(m));
		m.nonce = h->nonce;
		m.alen[0] = 3;
		memset(m.addr[0], 0xff, sizeof(m.addr[0]));
		proto_msg_seal(&m, proto_tag_ctrl(lay, PROTO_CTRL_CONNECT, id));
		forge(ep, to, proto_tag_ctrl(lay, PROTO_CTRL_CONNECT, id), &m, sizeof(m));
		/* ACCEPT and REJECT for a connector that may be connecting now */
		m.type = (uint8_t)(id & 1 ? PROTO_MSG_ACCEPT : PROTO_MSG_REJECT);
		m.id = id;
		m.reason = PROTO_REJECT_RESOURCES;
		m.alen[0] = (uint8_t)ep->namelen;
		memcpy(m.addr[0], ep->name, ep->namelen);
		m.secret = rnd();
		proto_msg_seal(&m, proto_tag_ctrl(lay, PROTO_CTRL_ACCEPT, id));
		forge(ep, to, proto_tag_ctrl(lay, PROTO_CTRL_ACCEPT, id), &m, sizeof(m));
		/* CTS: garbage, and well-formed with a guessed connection id */
		jl = rnd() % sizeof(struct proto_cts);
		garbage(junk, jl);
		forge(ep, to, proto_tag_ctrl(lay, PROTO_CTRL_CTS, id), junk, jl);
		struct proto_cts cts;
		memset(&cts, 0, sizeof(cts));
		cts.count = 1;
		cts.conn_id = (uint32_t)(rnd() % GUESS_IDS);
		cts.secret = rnd();
		for (int e = 0; e < 1; e++) {
			cts.e[e].tag = 0x2a;
			cts.e[e].seq = (uint32_t)(rnd() % 64);
			cts.e[e].size = 8; /* would make real messages "too large" */
		}
		forge(ep, to, proto_tag_ctrl(lay, PROTO_CTRL_CTS, id), &cts,
		      offsetof(struct proto_cts, e) + sizeof(cts.e[0]));
		/* pings and pongs from a guessed peer id with a wrong secret */
		struct proto_ping pg = {.magic = PROTO_PING_MAGIC, .type = 1 + (id & 1),
					.from_id = (uint32_t)(rnd() % GUESS_IDS), .secret = rnd()};
		forge(ep, to, proto_tag_ctrl(lay, PROTO_CTRL_PING, id), &pg, sizeof(pg));
		jl = rnd() % 64;
		garbage(junk, jl);
		forge(ep, to, proto_tag_ctrl(lay, PROTO_CTRL_PING, id), junk, jl);
		/* data for a guessed connection, sequence number and the real tag;
		 * every 4th up to 64 KiB (tcp;ofi_rxm sends those in segments) */
		static unsigned char big[65536];
		jl = id % 4 || abrupt_on() ? rnd() % 512 : 16384 + rnd() % 49152;
		garbage(big, jl < 512 ? jl : 512);
		forge(ep, to, proto_tag_data(lay, id, (uint32_t)(rnd() % 64), 0x2a), big, jl);
	}
}

static int hostile(int from_victim, int to_victim)
{
	void *ctx = NULL, *lcomm = NULL;
	char mine[NCCL_NET_HANDLE_MAXSIZE];
	struct proto_handle h;
	if (read(from_victim, &h, sizeof(h)) != (ssize_t)sizeof(h))
		return fail("hostile", "no handle from the victim");
	if (net_init(&ctx, NULL) != 0 ||
	    net_listen(0, mine, &lcomm) != 0) /* opens our endpoint */
		return fail("hostile", "init");
	struct core_plugin *p = core_plugin_get();
	struct proto_device *dev = &p->devs[0];
	struct ofi_ep *ep = dev->dom->eps[0];
	fi_addr_t to;
	if (ofi_ep_resolve(ep, h.addr, h.addr_len, &to))
		return fail("hostile", "the victim's address");
	rng_state ^= (uint64_t)getpid() << 20;
	glay = &dev->layout;
	if (getenv("HOSTILE_DATA_ROUNDS"))
		data_rounds = atoi(getenv("HOSTILE_DATA_ROUNDS"));
	/* a round (GUESS_IDS of every kind) every HOSTILE_ROUND_MS */
	long round_us = getenv("HOSTILE_ROUND_MS") ? atol(getenv("HOSTILE_ROUND_MS")) * 1000 : 20000;
	/* the legitimate connection, on the endpoint the forgeries leave from */
	bool peer = peer_stream_on();
	double until = now_s() + 30;
	while (peer && !psc && now_s() < until)
		if (net_connect(0, &h, &psc) != 0)
			return fail("hostile", "connecting to the victim failed");
	if (peer && !psc)
		return fail("hostile", "no connection to the victim");
	for (int w = 0; peer && w < PEER_WINDOW; w++) {
		pbuf[w] = malloc(PEER_CAP);
		if (!pbuf[w] || net_reg_mr(psc, pbuf[w], PEER_CAP, NCCL_PTR_HOST, &pmr[w]))
			return fail("hostile", "peer-stream buffers");
	}
	hostile_round(ep, to, &h, &dev->layout, dev->prov_hash);
	char go = 1;
	if (write(to_victim, &go, 1) != 1)
		return fail("hostile", "pipe");
	/* until the victim closes the pipe */
	int rounds = 1;
	for (;;) {
		fd_set fds;
		FD_ZERO(&fds);
		FD_SET(from_victim, &fds);
		struct timeval tv = {0, round_us};
		if (select(from_victim + 1, &fds, NULL, NULL, &tv) > 0)
			break; /* the victim is done */
		hostile_round(ep, to, &h, &dev->layout, dev->prov_hash);
		rounds++;
		if (peer && peer_send_pump())
			return 1;
	}
	printf("hostile: %d rounds, %ld forged messages posted, %ld of them data; %ld messages "
	       "of the peer stream posted\n", rounds, posted_total, posted_data, psent);
	fflush(stdout);
	char cmd = 0;
	if (read(from_victim, &cmd, 1) == 1 && cmd == 'k') {
		/* a burst of segmented-size data forgeries, then leave as a crash
		 * would: without waiting for anything */
		static unsigned char big[65536];
		garbage(big, 512);
		data_rounds = -1;
		for (uint32_t id = 0; id < GUESS_IDS; id++)
			forge(ep, to, proto_tag_data(&dev->layout, id, (uint32_t)(rnd() % 64), 0x2a),
			      big, 16385 + rnd() % 49151);
		for (double t = now_s() + 0.05; now_s() < t;)
			(void)ofi_ep_progress(ep);
		_exit(0);
	}
	if (cmd == 's') {
		/* quiet: every forgery handed over (bounded), then say so and wait
		 * for the victim to be done with them */
		double quiet_until = now_s() + 2 * mult;
		for (bool busy = true; busy && now_s() < quiet_until;) {
			busy = false;
			for (int i = 0; i < HOSTILE_OPS; i++)
				busy |= ops[i].busy;
			(void)ofi_ep_progress(ep);
		}
		(void)!write(to_victim, &cmd, 1);
		/* answer the victim's closes until it is gone */
		for (;;) {
			fd_set fds;
			FD_ZERO(&fds);
			FD_SET(from_victim, &fds);
			struct timeval tv = {0, 1000};
			if (select(from_victim + 1, &fds, NULL, NULL, &tv) > 0 &&
			    read(from_victim, &cmd, 1) <= 0)
				break;
			(void)ofi_ep_progress(ep);
		}
	}
	/* leave without closing: what a crashed or malicious process does */
	_exit(0);
}

/* shm backs each endpoint with /dev/shm/<pid>:...; the hostile process
 * leaves without closing (and a failed victim may too): remove what they
 * left, or a later process that gets the same pid cannot open its endpoint. */
static void remove_shm_segments(pid_t pid)
{
	DIR *d = opendir("/dev/shm");
	if (!d)
		return;
	char prefix[32], path[512];
	int plen = snprintf(prefix, sizeof(prefix), "%d:", (int)pid);
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, prefix, (size_t)plen))
			continue;
		snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
		unlink(path);
	}
	closedir(d);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	if (getenv("NCCL_FABRIC_TEST_TIMEOUT_MULTIPLIER"))
		mult = atof(getenv("NCCL_FABRIC_TEST_TIMEOUT_MULTIPLIER"));
	if (mult < 1.0)
		mult = 1.0;
	if (getenv("HOSTILE_KINDS"))
		kinds = (unsigned)strtoul(getenv("HOSTILE_KINDS"), NULL, 0);
	/* shm before libfabric 1.19 holds each unexpected message in an entry of
	 * the same fixed pool (rx_size) as posted receives, and ignores FI_PEEK,
	 * so nothing can discard forged data: every round of it exhausts the
	 * pool, and fi_trecv fails with -FI_ENOMEM (the README's known limits) */
	const char *prov = getenv("NCCL_FABRIC_PROVIDER");
	if (prov && strcmp(prov, "shm") == 0 && (kinds & K_DATA) && !getenv("HOSTILE_DATA_ROUNDS") &&
	    fi_version() < FI_VERSION(1, 19)) {
		printf("SKIP: every round of data forgeries over shm of libfabric %u.%u: its "
		       "receive pool holds unexpected messages and nothing can discard them "
		       "before 1.19\n",
		       FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
		return 77;
	}
	int v2h[2], h2v[2];
	if (pipe(v2h) || pipe(h2v))
		return 1;
	pid_t hv = fork();
	if (hv == 0) {
		close(v2h[1]);
		close(h2v[0]);
		_exit(hostile(v2h[0], h2v[1]));
	}
	pid_t vv = fork();
	if (vv == 0) {
		close(v2h[0]);
		close(h2v[1]);
		_exit(victim(v2h[1], h2v[0]));
	}
	close(v2h[0]);
	close(v2h[1]);
	close(h2v[0]);
	close(h2v[1]);
	int vs = 0, hs = 0;
	waitpid(vv, &vs, 0);
	kill(hv, SIGKILL);
	waitpid(hv, &hs, 0);
	remove_shm_segments(hv);
	remove_shm_segments(vv);
	if (WIFEXITED(vs) && WEXITSTATUS(vs) == 77) {
		printf("SKIP: no usable provider (NCCL_FABRIC_PROVIDER=%s)\n",
		       getenv("NCCL_FABRIC_PROVIDER") ? getenv("NCCL_FABRIC_PROVIDER") : "");
		return 77;
	}
	if (!WIFEXITED(vs) || WEXITSTATUS(vs)) {
		fprintf(stderr, "FAIL: the victim %s %d\n", WIFEXITED(vs) ? "exited with" : "died of signal",
			WIFEXITED(vs) ? WEXITSTATUS(vs) : WTERMSIG(vs));
		return 1;
	}
	printf("PASS\n");
	return 0;
}
