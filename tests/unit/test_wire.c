/*
 * test_wire.c - the bytes that cross between processes: the listen handle and
 * the control messages. A corrupt, foreign or random handle must be an error
 * with a reason, never accepted.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto_wire.h"
#include "unit.h"
#include "util/util.h"

#define TCP_HASH() proto_prov_hash("tcp;ofi_rxm", FI_SOCKADDR_IN, 64)

static const uint8_t addr16[16] = { 2, 0, 0x1f, 0x90, 127, 0, 0, 1, 9, 8, 7, 6, 5, 4, 3, 2 };

/* A fresh valid handle. */
static void good_handle(struct proto_handle *h)
{
	proto_handle_encode(h, 0x1234, 64, TCP_HASH(), 0xfeedfacecafebeefULL, addr16, sizeof(addr16));
}

/* Recomputes the checksum after a deliberate field change, so the check gets
 * past the checksum to the field's own rule. */
static void reseal_handle(struct proto_handle *h)
{
	h->checksum = util_fnv1a64(h, offsetof(struct proto_handle, checksum), 0);
}

static void reseal_msg(struct proto_msg *m)
{
	m->checksum = util_fnv1a64(m, offsetof(struct proto_msg, checksum), 0);
}

static int check_handle(const void *buf, char *why, size_t len)
{
	why[0] = '\0';
	return proto_handle_check(buf, TCP_HASH(), why, len);
}

/* ---- tests ---- */

static int test_fnv_vectors(void)
{
	/* published FNV-1a 64 test vectors: the checksum is stable across builds */
	CHECK(util_fnv1a64("", 0, 0) == 0xcbf29ce484222325ULL);
	CHECK(util_fnv1a64("a", 1, 0) == 0xaf63dc4c8601ec8cULL);
	CHECK(util_fnv1a64("foobar", 6, 0) == 0x85944171f73967e8ULL);
	/* chaining: hashing in two pieces equals hashing at once */
	CHECK(util_fnv1a64("bar", 3, util_fnv1a64("foo", 3, 0)) == 0x85944171f73967e8ULL);
	return 0;
}

static int test_layout(void)
{
	CHECK_EQ(sizeof(struct proto_handle), 128);
	CHECK(sizeof(struct proto_handle) <= NCCL_NET_HANDLE_MAXSIZE);
	CHECK_EQ(offsetof(struct proto_handle, checksum), 120);
	CHECK_EQ(offsetof(struct proto_handle, addr), 32);
	CHECK_EQ(sizeof(struct proto_msg), 768);
	CHECK_EQ(offsetof(struct proto_msg, checksum), 760);
	CHECK_EQ(offsetof(struct proto_msg, route), 0); /* control messages start with their route */
	CHECK_EQ(offsetof(struct proto_cts, route), 0);
	CHECK_EQ(sizeof(struct proto_cts), 344);
	/* the wire constants: changing either breaks mixed-version jobs silently */
	CHECK_EQ(PROTO_MAGIC, 0x4641424e);
	CHECK_EQ(PROTO_VERSION, 9);
	/* CONNECT's offer and ACCEPT's word share the place of REJECT's reason */
	CHECK_EQ(offsetof(struct proto_msg, flags), offsetof(struct proto_msg, reason));
	CHECK_EQ(PROTO_FLAG_SPREAD, 1u);
	/* ping, pong and goodbye: route, then the count of messages taken in word 5 */
	CHECK_EQ(sizeof(struct proto_ping), 32);
	CHECK_EQ(offsetof(struct proto_ping, route), 0);
	CHECK_EQ(offsetof(struct proto_ping, taken), 20);
	CHECK_EQ(offsetof(struct proto_ping, secret), 24);
	CHECK_EQ(PROTO_PING, 1);
	CHECK_EQ(PROTO_PONG, 2);
	CHECK_EQ(PROTO_BYE, 3);
	struct proto_handle h;
	good_handle(&h);
	uint32_t first;
	memcpy(&first, &h, 4);
	CHECK_EQ(first, PROTO_MAGIC); /* the magic is the first word */
	return 0;
}

static int test_handle_roundtrip(void)
{
	struct proto_handle h, back;
	char why[256];
	good_handle(&h);
	CHECK_EQ(check_handle(&h, why, sizeof(why)), 0);
	memcpy(&back, &h, sizeof(back));
	CHECK_EQ(back.magic, PROTO_MAGIC);
	CHECK_EQ(back.version, PROTO_VERSION);
	CHECK_EQ(back.listen_id, 0x1234);
	CHECK_EQ(back.tag_bits, 64);
	CHECK(back.prov_hash == TCP_HASH());
	CHECK(back.nonce == 0xfeedfacecafebeefULL);
	CHECK_EQ(back.addr_len, 16);
	CHECK(!memcmp(back.addr, addr16, 16));
	CHECK_EQ(back.reserved, 0);
	for (size_t i = 16; i < OFI_ADDR_MAX; i++)
		CHECK_EQ(back.addr[i], 0); /* no stack garbage leaks to the peer */

	/* the longest address fits */
	uint8_t big[OFI_ADDR_MAX];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7 + 1);
	proto_handle_encode(&h, 1, 48, TCP_HASH(), 1, big, sizeof(big));
	CHECK_EQ(check_handle(&h, why, sizeof(why)), 0);
	CHECK(!memcmp(h.addr, big, sizeof(big)));

	/* NCCL's handle buffer carries no alignment promise */
	unsigned char raw[NCCL_NET_HANDLE_MAXSIZE + 8];
	for (int off = 1; off < 8; off++) {
		good_handle(&h);
		memcpy(raw + off, &h, sizeof(h));
		CHECK_EQ(check_handle(raw + off, why, sizeof(why)), 0);
	}
	return 0;
}

static int test_handle_every_byte(void)
{
	/* Each single-byte corruption (two patterns per byte) is rejected; the
	 * magic bytes with a magic reason, all others by the checksum. */
	static const uint8_t patterns[] = { 0x01, 0x80, 0xff };
	struct proto_handle h;
	char why[256];
	for (size_t i = 0; i < sizeof(h); i++) {
		for (size_t p = 0; p < sizeof(patterns); p++) {
			good_handle(&h);
			((uint8_t *)&h)[i] ^= patterns[p];
			int rc = check_handle(&h, why, sizeof(why));
			if (rc == 0)
				fprintf(stderr, "  byte %zu ^ 0x%02x accepted\n", i, patterns[p]);
			CHECK_EQ(rc, -1);
			CHECK(why[0] != '\0');
			if (i < 4)
				CHECK_STR_CONTAINS(why, "magic");
			else if (i == offsetof(struct proto_handle, version))
				CHECK_STR_CONTAINS(why, "version");
			else
				CHECK_STR_CONTAINS(why, "checksum");
		}
	}
	return 0;
}

static int test_handle_fields(void)
{
	struct proto_handle h;
	char why[256];

	good_handle(&h);
	h.version = PROTO_VERSION + 1;
	reseal_handle(&h);
	CHECK_EQ(check_handle(&h, why, sizeof(why)), -1);
	CHECK_STR_CONTAINS(why, "version");
	CHECK_STR_CONTAINS(why, "mixed plugin versions");

	good_handle(&h);
	h.addr_len = 0;
	reseal_handle(&h);
	CHECK_EQ(check_handle(&h, why, sizeof(why)), -1);
	CHECK_STR_CONTAINS(why, "address length 0");

	good_handle(&h);
	h.addr_len = OFI_ADDR_MAX + 1;
	reseal_handle(&h);
	CHECK_EQ(check_handle(&h, why, sizeof(why)), -1);
	CHECK_STR_CONTAINS(why, "address length 89");

	good_handle(&h);
	h.addr_len = 255;
	reseal_handle(&h);
	CHECK_EQ(check_handle(&h, why, sizeof(why)), -1);
	CHECK_STR_CONTAINS(why, "out of range");

	/* encode with listen id 0 is sealed, but 0 is never a valid id */
	proto_handle_encode(&h, 0, 64, TCP_HASH(), 1, addr16, sizeof(addr16));
	CHECK_EQ(check_handle(&h, why, sizeof(why)), -1);
	CHECK_STR_CONTAINS(why, "listen id 0");

	/* another provider's handle: the reason names the provider as the cause */
	proto_handle_encode(&h, 7, 64, proto_prov_hash("shm", FI_ADDR_STR, 64), 1, addr16, 16);
	CHECK_EQ(check_handle(&h, why, sizeof(why)), -1);
	CHECK_STR_CONTAINS(why, "provider");
	CHECK_STR_CONTAINS(why, "NCCL_FABRIC_PROVIDER");
	/* ...and the same handle is fine for the side that uses shm */
	CHECK_EQ(proto_handle_check(&h, proto_prov_hash("shm", FI_ADDR_STR, 64), why, sizeof(why)), 0);

	/* the same provider with another tag layout is foreign too */
	proto_handle_encode(&h, 7, 48, proto_prov_hash("tcp;ofi_rxm", FI_SOCKADDR_IN, 48), 1, addr16, 16);
	CHECK_EQ(check_handle(&h, why, sizeof(why)), -1);
	CHECK_STR_CONTAINS(why, "provider");
	return 0;
}

static int test_handle_garbage(void)
{
	unsigned char buf[128];
	char why[256];
	memset(buf, 0, sizeof(buf));
	CHECK_EQ(check_handle(buf, why, sizeof(why)), -1);
	CHECK_STR_CONTAINS(why, "not a Fabric plugin handle");
	memset(buf, 0xff, sizeof(buf));
	CHECK_EQ(check_handle(buf, why, sizeof(why)), -1);

	unsigned seed = 12345;
	int accepted = 0;
	for (int n = 0; n < 20000; n++) {
		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = (unsigned char)rand_r(&seed);
		if (n & 1) {
			/* half of them with the right magic, to reach the checksum */
			uint32_t magic = PROTO_MAGIC;
			memcpy(buf, &magic, 4);
		}
		if (check_handle(buf, why, sizeof(why)) == 0)
			accepted++;
		else if (!why[0])
			accepted++; /* rejected without a reason counts as a failure too */
	}
	CHECK_EQ(accepted, 0);
	return 0;
}

static int test_handle_small_why(void)
{
	/* the reason is cut to the caller's buffer and always terminated */
	unsigned char buf[128] = { 0 };
	char why[9];
	memset(why, 'x', sizeof(why));
	CHECK_EQ(proto_handle_check(buf, 1, why, sizeof(why)), -1);
	CHECK_EQ(strlen(why), 8);
	CHECK(!strncmp(why, "not a Fa", 8));
	return 0;
}

static void good_msg(struct proto_msg *m, uint8_t type)
{
	memset(m, 0, sizeof(*m));
	m->type = type;
	m->id = 99;
	m->nonce = 0x1122334455667788ULL;
	m->prov_hash = TCP_HASH();
	if (type != PROTO_MSG_REJECT) {
		m->nrails = 2;
		for (int r = 0; r < 2; r++) {
			m->alen[r] = sizeof(addr16);
			memcpy(m->addr[r], addr16, sizeof(addr16));
		}
	}
	if (type == PROTO_MSG_REJECT)
		m->reason = PROTO_REJECT_PROVIDER;
	proto_msg_seal(m, 0x8000000000000001ULL);
}

static int test_msg_roundtrip(void)
{
	struct proto_msg m;
	char why[256];
	for (uint8_t t = PROTO_MSG_CONNECT; t <= PROTO_MSG_REJECT; t++) {
		good_msg(&m, t);
		why[0] = '\0';
		CHECK_EQ(proto_msg_check(&m, sizeof(m), why, sizeof(why)), 0);
		CHECK_EQ(m.magic, PROTO_MAGIC);
		CHECK_EQ(m.version, PROTO_VERSION);
		CHECK_EQ(m.type, t);
		CHECK_EQ(m.id, 99);
	}
	/* REJECT carries no address; the others one per rail, each up to the field */
	good_msg(&m, PROTO_MSG_CONNECT);
	m.nrails = PROTO_MAX_RAILS;
	for (int r = 0; r < PROTO_MAX_RAILS; r++)
		m.alen[r] = OFI_ADDR_MAX;
	proto_msg_seal(&m, 0x8000000000000001ULL);
	CHECK_EQ(proto_msg_check(&m, sizeof(m), why, sizeof(why)), 0);
	return 0;
}

static int test_msg_bad(void)
{
	struct proto_msg m;
	char why[256];

	good_msg(&m, PROTO_MSG_CONNECT);
	static const size_t lens[] = { 0, 1, 127, 751, 753, 1024 };
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		why[0] = '\0';
		CHECK_EQ(proto_msg_check(&m, lens[i], why, sizeof(why)), -1);
		CHECK_STR_CONTAINS(why, "expected 768");
	}

	static const uint8_t bad_types[] = { 0, 5, 0x80, 0xff };
	for (size_t i = 0; i < sizeof(bad_types); i++) {
		good_msg(&m, PROTO_MSG_ACCEPT);
		m.type = bad_types[i];
		proto_msg_seal(&m, 0x8000000000000001ULL);
		CHECK_EQ(proto_msg_check(&m, sizeof(m), why, sizeof(why)), -1);
		CHECK_STR_CONTAINS(why, "unknown control message type");
	}

	/* HELD, like REJECT, carries no addresses: nothing else is read from it */
	good_msg(&m, PROTO_MSG_ACCEPT);
	m.type = PROTO_MSG_HELD;
	m.nrails = 0;
	proto_msg_seal(&m, 0x8000000000000001ULL);
	CHECK_EQ(proto_msg_check(&m, sizeof(m), why, sizeof(why)), 0);

	good_msg(&m, PROTO_MSG_CONNECT);
	m.alen[1] = 0;
	proto_msg_seal(&m, 0x8000000000000001ULL);
	CHECK_EQ(proto_msg_check(&m, sizeof(m), why, sizeof(why)), -1);
	CHECK_STR_CONTAINS(why, "address length 0 of rail 1");

	good_msg(&m, PROTO_MSG_ACCEPT);
	m.alen[0] = OFI_ADDR_MAX + 1;
	proto_msg_seal(&m, 0x8000000000000001ULL);
	CHECK_EQ(proto_msg_check(&m, sizeof(m), why, sizeof(why)), -1);
	CHECK_STR_CONTAINS(why, "address length 89");

	static const uint8_t bad_rails[] = { 0, PROTO_MAX_RAILS + 1, 0xff };
	for (size_t i = 0; i < sizeof(bad_rails); i++) {
		good_msg(&m, PROTO_MSG_CONNECT);
		m.nrails = bad_rails[i];
		proto_msg_seal(&m, 0x8000000000000001ULL);
		CHECK_EQ(proto_msg_check(&m, sizeof(m), why, sizeof(why)), -1);
		CHECK_STR_CONTAINS(why, "rails out of range");
	}

	/* the rail of a connection's messages must be one of its rails */
	good_msg(&m, PROTO_MSG_ACCEPT);
	m.nrails = 2;
	m.rail = 2;
	proto_msg_seal(&m, 0x8000000000000001ULL);
	CHECK_EQ(proto_msg_check(&m, sizeof(m), why, sizeof(why)), -1);
	CHECK_STR_CONTAINS(why, "rail 2 of 2 rails out of range");
	m.rail = 1;
	proto_msg_seal(&m, 0x8000000000000001ULL);
	CHECK_EQ(proto_msg_check(&m, sizeof(m), why, sizeof(why)), 0);
	/* a rail beyond nrails may hold anything: it is not used */
	good_msg(&m, PROTO_MSG_CONNECT);
	m.alen[5] = 0xff;
	proto_msg_seal(&m, 0x8000000000000001ULL);
	CHECK_EQ(proto_msg_check(&m, sizeof(m), why, sizeof(why)), 0);

	good_msg(&m, PROTO_MSG_CONNECT);
	m.version = PROTO_VERSION + 1;
	reseal_msg(&m); /* seal would reset the version */
	CHECK_EQ(proto_msg_check(&m, sizeof(m), why, sizeof(why)), -1);
	CHECK_STR_CONTAINS(why, "expected 9");

	good_msg(&m, PROTO_MSG_CONNECT);
	m.magic ^= 1;
	reseal_msg(&m);
	CHECK_EQ(proto_msg_check(&m, sizeof(m), why, sizeof(why)), -1);
	CHECK_STR_CONTAINS(why, "corrupt");

	/* every single corrupted byte */
	for (size_t i = 0; i < sizeof(m); i++) {
		good_msg(&m, PROTO_MSG_CONNECT);
		((uint8_t *)&m)[i] ^= 0x10;
		int rc = proto_msg_check(&m, sizeof(m), why, sizeof(why));
		if (rc == 0)
			fprintf(stderr, "  message byte %zu corrupted and accepted\n", i);
		CHECK_EQ(rc, -1);
		CHECK_STR_CONTAINS(why, "corrupt");
	}
	return 0;
}

static int test_prov_hash(void)
{
	uint64_t base = proto_prov_hash("tcp;ofi_rxm", FI_SOCKADDR_IN, 64);
	CHECK(base == proto_prov_hash("tcp;ofi_rxm", FI_SOCKADDR_IN, 64)); /* deterministic */
	CHECK(base != proto_prov_hash("tcp", FI_SOCKADDR_IN, 64));
	CHECK(base != proto_prov_hash("TCP;ofi_rxm", FI_SOCKADDR_IN, 64));
	CHECK(base != proto_prov_hash("verbs;ofi_rxm", FI_SOCKADDR_IN, 64));
	CHECK(base != proto_prov_hash("tcp;ofi_rxm", FI_SOCKADDR_IN6, 64));
	CHECK(base != proto_prov_hash("tcp;ofi_rxm", FI_ADDR_STR, 64));
	CHECK(base != proto_prov_hash("tcp;ofi_rxm", FI_SOCKADDR_IN, 48));
	CHECK(base != proto_prov_hash("tcp;ofi_rxm", FI_SOCKADDR_IN, 63));
	CHECK(base != proto_prov_hash("", FI_SOCKADDR_IN, 64));
	/* pairwise distinct over a small grid */
	static const char *const names[] = { "tcp;ofi_rxm", "tcp", "shm", "efa", "verbs;ofi_rxm", "udp;ofi_rxd" };
	static const uint32_t fmts[] = { FI_SOCKADDR_IN, FI_SOCKADDR_IN6, FI_ADDR_STR, FI_ADDR_EFA };
	static const unsigned bits[] = { 48, 56, 63, 64 };
	uint64_t all[6 * 4 * 4];
	int n = 0;
	for (int a = 0; a < 6; a++)
		for (int b = 0; b < 4; b++)
			for (int c = 0; c < 4; c++)
				all[n++] = proto_prov_hash(names[a], fmts[b], bits[c]);
	int dups = 0;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < i; j++)
			dups += all[i] == all[j];
	CHECK_EQ(dups, 0);
	return 0;
}

static int test_reject_text(void)
{
	CHECK_STR_CONTAINS(proto_reject_text(PROTO_REJECT_NONCE), "stale handle");
	CHECK_STR_CONTAINS(proto_reject_text(PROTO_REJECT_PROVIDER), "different providers");
	CHECK_STR_CONTAINS(proto_reject_text(PROTO_REJECT_RESOURCES), "could not create");
	CHECK(!strcmp(proto_reject_text(PROTO_REJECT_NONE), "unknown reason"));
	CHECK(!strcmp(proto_reject_text(12345), "unknown reason"));
	return 0;
}

/* RMA CQ data: connection, slot, size and pieces survive, whatever the other fields. */
static int test_imm(void)
{
	static const uint32_t conns[] = { 1, 2, 0xfffff, PROTO_IMM_CONN_MASK };
	static const uint32_t slots[] = { 0, 7, 31 << 3 | 7, 0xff };
	static const uint32_t sizes[] = { 0, 1, 16385, 0x7fffffff, 0xffffffffu };
	static const uint32_t pieces[] = { 1, 2, 7, 8 };
	for (size_t c = 0; c < 4; c++)
		for (size_t s = 0; s < 4; s++)
			for (size_t z = 0; z < 5; z++)
				for (size_t p = 0; p < 4; p++) {
					uint32_t conn, slot, size, n;
					proto_imm_parse(proto_imm(conns[c], slots[s], sizes[z], pieces[p]),
							&conn, &slot, &size, &n);
					CHECK_EQ(conn, conns[c]);
					CHECK_EQ(slot, slots[s]);
					CHECK_EQ(size, sizes[z]);
					CHECK_EQ(n, pieces[p]);
				}
	/* a connection id wider than the field is cut, never spills */
	uint32_t conn, slot, size, n;
	proto_imm_parse(proto_imm(0xffffffffu, 0, 5, 1), &conn, &slot, &size, &n);
	CHECK_EQ(conn, PROTO_IMM_CONN_MASK);
	CHECK_EQ(slot, 0);
	CHECK_EQ(n, 1);
	return 0;
}

static const struct unit_test tests[] = {
	TEST_ENTRY(test_imm, "RMA CQ data carries connection, slot, size and pieces"),
	TEST_ENTRY(test_fnv_vectors, "FNV-1a 64 matches published vectors and chains"),
	TEST_ENTRY(test_layout, "handle is 128 bytes, message 768, route first, checksum last"),
	TEST_ENTRY(test_handle_roundtrip, "encode/check round trip, longest address, unaligned buffer"),
	TEST_ENTRY(test_handle_every_byte, "every single-byte corruption of a handle is rejected"),
	TEST_ENTRY(test_handle_fields, "resealed bad version/addr_len/listen id/provider rejected with reason"),
	TEST_ENTRY(test_handle_garbage, "all-zero, all-ones and 20000 random handles rejected"),
	TEST_ENTRY(test_handle_small_why, "the reason is cut to a small buffer and terminated"),
	TEST_ENTRY(test_msg_roundtrip, "CONNECT/ACCEPT/REJECT seal and check"),
	TEST_ENTRY(test_msg_bad, "wrong length, bad type, bad addr_len, version, any corrupt byte"),
	TEST_ENTRY(test_prov_hash, "provider hash differs by name, address format and tag bits"),
	TEST_ENTRY(test_reject_text, "reject reasons have distinct words, unknown is named"),
};

int main(int argc, char **argv)
{
	return unit_main(tests, argc, argv);
}
