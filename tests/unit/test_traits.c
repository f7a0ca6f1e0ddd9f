/*
 * test_traits.c - each provider quirk of policy_traits.c on and off, over
 * fi_info entries built by hand (no fabric is opened), at the libfabric
 * versions the table names.
 */
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include "policy/policy_traits.h"
#include "unit.h"

#define V117 FI_VERSION(1, 17)
#define V122 FI_VERSION(1, 22)
#define V20 FI_VERSION(2, 0)
#define V21 FI_VERSION(2, 1)
#define V22 FI_VERSION(2, 2)

static const uint32_t versions[] = { V117, V122, V20, V21, V22 };
#define NVERSIONS (int)(sizeof(versions) / sizeof(versions[0]))

/* An entry of provider prov, with this inject size and mr_mode. */
static struct fi_info *entry(const char *prov, size_t inject, int mr_mode)
{
	struct fi_info *i = fi_allocinfo();
	if (!i)
		abort();
	i->caps = FI_TAGGED | FI_MSG;
	i->ep_attr->type = FI_EP_RDM;
	i->fabric_attr->prov_name = strdup(prov);
	i->tx_attr->inject_size = inject;
	i->domain_attr->mr_mode = mr_mode;
	return i;
}

static struct policy_traits traits_of(const char *prov, size_t inject, int mr_mode, uint32_t v)
{
	struct fi_info *i = entry(prov, inject, mr_mode);
	struct policy_traits t;
	policy_traits_for(i, v, &t);
	fi_freeinfo(i);
	return t;
}

/* shm alone, in any case, on every version; nothing layered or named like it. */
static int test_serialize(void)
{
	for (int k = 0; k < NVERSIONS; k++) {
		CHECK(traits_of("shm", 4096, 0, versions[k]).serialize);
		CHECK(traits_of("SHM", 4096, 0, versions[k]).serialize);
		CHECK(!traits_of("sm2", 3864, 0, versions[k]).serialize);
		CHECK(!traits_of("tcp;ofi_rxm", 64, 0, versions[k]).serialize);
		CHECK(!traits_of("tcp", 64, 0, versions[k]).serialize);
		CHECK(!traits_of("shmx", 4096, 0, versions[k]).serialize);
		CHECK(!traits_of("shm;ofi_rxm", 4096, 0, versions[k]).serialize);
	}
	return 0;
}

/* Stream providers by their core name, layered or not; their eager default is
 * NCCL's LL receive size whatever they inject, the others' their inject size. */
static int test_stream_and_eager(void)
{
	static const char *const stream[] = { "tcp;ofi_rxm", "tcp", "TCP;OFI_RXM", "sockets",
					      "tcp;ofi_rxd" };
	static const char *const other[] = { "shm", "sm2", "udp;ofi_rxd", "verbs;ofi_rxm", "efa",
					     "tcpx", "net;ofi_rxm", "ofi_rxm" };
	for (int k = 0; k < NVERSIONS; k++) {
		for (size_t s = 0; s < sizeof(stream) / sizeof(stream[0]); s++) {
			struct policy_traits t = traits_of(stream[s], 64, 0, versions[k]);
			CHECK(t.stream);
			/* rxm: held to its buffer (the large-messages row) */
			bool rxm = s == 0 || s == 2;
			CHECK_EQ(t.eager_default, rxm ? POLICY_RXM_BUFFER : POLICY_STREAM_EAGER);
		}
		for (size_t s = 0; s < sizeof(other) / sizeof(other[0]); s++) {
			struct policy_traits t = traits_of(other[s], 1256, 0, versions[k]);
			CHECK(!t.stream);
			CHECK_EQ(t.eager_default, 1256);
		}
	}
	/* shm's two entries: the host one injects, the FI_HMEM one nothing (the
	 * "host entry" row: a host-only device must open the host entry) */
	CHECK_EQ(traits_of("shm", 4096, 0, V117).eager_default, 4096);
	CHECK_EQ(traits_of("shm", 0, FI_MR_HMEM, V117).eager_default, 0);
	CHECK_EQ(traits_of("sm2", 0, FI_MR_HMEM, V21).eager_default, 0);
	/* no tx attributes: nothing injected */
	struct fi_info *i = entry("shm", 4096, 0);
	struct fi_tx_attr *tx = i->tx_attr;
	i->tx_attr = NULL;
	struct policy_traits t;
	policy_traits_for(i, V117, &t);
	CHECK_EQ(t.eager_default, 0);
	i->tx_attr = tx;
	fi_freeinfo(i);
	return 0;
}

/* Rails may split their domains unless every endpoint needs registrations. */
static int test_split_domains(void)
{
	for (int k = 0; k < NVERSIONS; k++) {
		CHECK(traits_of("tcp", 64, 0, versions[k]).split_domains);
		CHECK(traits_of("shm", 4096, FI_MR_VIRT_ADDR, versions[k]).split_domains);
		CHECK(traits_of("efa", 0, FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED,
				versions[k]).split_domains);
		CHECK(!traits_of("verbs;ofi_rxm", 0, FI_MR_LOCAL, versions[k]).split_domains);
		CHECK(!traits_of("tcp", 64, FI_MR_ENDPOINT, versions[k]).split_domains);
		CHECK(!traits_of("tcp", 64, FI_MR_LOCAL | FI_MR_ENDPOINT, versions[k]).split_domains);
	}
	return 0;
}

/* Native tcp is preferred, tcp;ofi_rxm yields to it; nobody else either. */
static int test_ranking(void)
{
	for (int k = 0; k < NVERSIONS; k++) {
		struct policy_traits n = traits_of("tcp", 64, 0, versions[k]);
		CHECK(n.preferred && !n.yields);
		CHECK_STR_CONTAINS(n.preferred_why, "preferred to tcp;ofi_rxm");
		struct policy_traits r = traits_of("tcp;ofi_rxm", 64, 0, versions[k]);
		CHECK(r.yields && !r.preferred);
		static const char *const neither[] = { "shm", "sockets", "udp;ofi_rxd", "tcp;ofi_rxd",
						       "verbs;ofi_rxm", "efa" };
		for (size_t s = 0; s < sizeof(neither) / sizeof(neither[0]); s++) {
			struct policy_traits t = traits_of(neither[s], 64, 0, versions[k]);
			CHECK(!t.preferred && !t.yields);
			CHECK(!strcmp(t.preferred_why, ""));
		}
	}
	return 0;
}

/* tcp;ofi_rxm crashes closing an unbound endpoint before 2.1 only. */
static int test_close_unbound(void)
{
	CHECK(traits_of("tcp;ofi_rxm", 64, 0, V117).close_unbound_crashes);
	CHECK(traits_of("tcp;ofi_rxm", 64, 0, V122).close_unbound_crashes);
	CHECK(traits_of("tcp;ofi_rxm", 64, 0, V20).close_unbound_crashes);
	CHECK(!traits_of("tcp;ofi_rxm", 64, 0, V21).close_unbound_crashes);
	CHECK(!traits_of("tcp;ofi_rxm", 64, 0, V22).close_unbound_crashes);
	CHECK(!traits_of("tcp;ofi_rxm", 64, 0, FI_VERSION(3, 0)).close_unbound_crashes);
	for (int k = 0; k < NVERSIONS; k++) {
		CHECK(!traits_of("tcp", 64, 0, versions[k]).close_unbound_crashes);
		CHECK(!traits_of("shm", 4096, 0, versions[k]).close_unbound_crashes);
		CHECK(!traits_of("verbs;ofi_rxm", 0, FI_MR_LOCAL, versions[k]).close_unbound_crashes);
	}
	return 0;
}

/* shm's peer addresses name regions that are checked; nobody else's. */
static int test_shm_region(void)
{
	for (int k = 0; k < NVERSIONS; k++) {
		CHECK(traits_of("shm", 4096, 0, versions[k]).shm_region);
		CHECK(!traits_of("sm2", 3864, 0, versions[k]).shm_region);
		CHECK(!traits_of("tcp", 64, 0, versions[k]).shm_region);
		CHECK(!traits_of("tcp;ofi_rxm", 64, 0, versions[k]).shm_region);
	}
	return 0;
}

/* Unexpected data is drained over rxm (any core) and native tcp; never over
 * shm (1.17 ignores FI_PEEK) or a provider not known to implement it. */
static int test_drain(void)
{
	for (int k = 0; k < NVERSIONS; k++) {
		CHECK(traits_of("tcp;ofi_rxm", 64, 0, versions[k]).drain);
		CHECK(traits_of("verbs;ofi_rxm", 0, FI_MR_LOCAL, versions[k]).drain);
		CHECK(traits_of("tcp", 64, 0, versions[k]).drain);
		CHECK(!traits_of("shm", 4096, 0, versions[k]).drain);
		CHECK(!traits_of("sm2", 3864, 0, versions[k]).drain);
		CHECK(!traits_of("udp;ofi_rxd", 64, 0, versions[k]).drain);
		CHECK(!traits_of("ofi_rxm", 64, 0, versions[k]).drain);
	}
	return 0;
}

/* rxm delivers messages above its buffer by rendezvous or in segments that
 * a receive follows into a closed connection: whole_max says so, on every
 * version, and no other provider has a limit. */
static int test_whole_max(void)
{
	for (int k = 0; k < NVERSIONS; k++) {
		CHECK_EQ(traits_of("tcp;ofi_rxm", 64, 0, versions[k]).whole_max, POLICY_RXM_BUFFER);
		CHECK_EQ(traits_of("tcp;ofi_rxm", 64, 0, versions[k]).eager_default,
			 POLICY_RXM_BUFFER);
		CHECK_EQ(traits_of("verbs;ofi_rxm", 16384, FI_MR_LOCAL, versions[k]).whole_max,
			 POLICY_RXM_BUFFER);
		/* an inject size below the buffer stays the eager default */
		CHECK_EQ(traits_of("verbs;ofi_rxm", 4096, FI_MR_LOCAL, versions[k]).eager_default,
			 4096);
		CHECK_EQ(traits_of("tcp", 64, 0, versions[k]).whole_max, 0);
		CHECK_EQ(traits_of("shm", 4096, 0, versions[k]).whole_max, 0);
	}
	return 0;
}

/* Automatic rails open several only where the host CPU moves the bytes and
 * the provider's endpoints do not delay each other: native tcp, sockets. */
static int test_one_rail(void)
{
	for (int k = 0; k < NVERSIONS; k++) {
		CHECK(traits_of("tcp", 64, 0, versions[k]).one_rail_why == NULL);
		CHECK(traits_of("sockets", 64, 0, versions[k]).one_rail_why == NULL);
		const char *w = traits_of("tcp;ofi_rxm", 64, 0, versions[k]).one_rail_why;
		CHECK(w && strstr(w, "tcp;ofi_rxm"));
		w = traits_of("shm", 4096, 0, versions[k]).one_rail_why;
		CHECK(w && strstr(w, "host CPU"));
		CHECK(traits_of("verbs;ofi_rxm", 0, FI_MR_LOCAL, versions[k]).one_rail_why != NULL);
	}
	return 0;
}

/* RMA writes by default everywhere but tcp;ofi_rxm and native tcp, each
 * with its own reason. */
static int test_no_write(void)
{
	const char *w = traits_of("tcp;ofi_rxm", 64, 0, V117).no_write_why;
	CHECK(w && strstr(w, "never complete"));
	for (int k = 0; k < NVERSIONS; k++) {
		w = traits_of("tcp", 64, 0, versions[k]).no_write_why;
		CHECK(w && strstr(w, "native tcp"));
		CHECK(traits_of("shm", 4096, 0, versions[k]).no_write_why == NULL);
		CHECK(traits_of("verbs;ofi_rxm", 0, FI_MR_LOCAL, versions[k]).no_write_why == NULL);
		w = traits_of("tcp;ofi_rxm", 64, 0, versions[k]).no_write_why;
		CHECK(w != NULL);
		if (versions[k] >= FI_VERSION(2, 0))
			CHECK(strstr(w, "sender dies"));
	}
	return 0;
}

/* The per-peer reset by the kernel where the provider moves data over TCP
 * sockets: native tcp and rxm over tcp; not shm, udp or rxm over verbs. */
static int test_tcp_sockets(void)
{
	for (int k = 0; k < NVERSIONS; k++) {
		CHECK(traits_of("tcp", 64, 0, versions[k]).tcp_sockets);
		CHECK(traits_of("tcp;ofi_rxm", 64, 0, versions[k]).tcp_sockets);
		CHECK(!traits_of("shm", 4096, 0, versions[k]).tcp_sockets);
		CHECK(!traits_of("udp;ofi_rxd", 0, 0, versions[k]).tcp_sockets);
		CHECK(!traits_of("verbs;ofi_rxm", 0, FI_MR_LOCAL, versions[k]).tcp_sockets);
		CHECK(traits_of("tcp;ofi_rxm", 64, 0, versions[k]).stale_conn_once);
		CHECK(!traits_of("tcp", 64, 0, versions[k]).stale_conn_once);
		CHECK(!traits_of("shm", 4096, 0, versions[k]).stale_conn_once);
	}
	return 0;
}

/* Early sends by default over native tcp only: rxm breaks the connection on a
 * message larger than its receive, shm hangs, the others have no stream. */
static int test_early_sends(void)
{
	for (int k = 0; k < NVERSIONS; k++) {
		CHECK_EQ(traits_of("tcp", 64, 0, versions[k]).early_sends, POLICY_EARLY_SENDS);
		CHECK_EQ(traits_of("TCP", 64, 0, versions[k]).early_sends, POLICY_EARLY_SENDS);
		CHECK_EQ(traits_of("tcp;ofi_rxm", 64, 0, versions[k]).early_sends, 0);
		CHECK_EQ(traits_of("sockets", 64, 0, versions[k]).early_sends, 0);
		CHECK_EQ(traits_of("shm", 4096, 0, versions[k]).early_sends, 0);
		CHECK_EQ(traits_of("efa", 4096, 0, versions[k]).early_sends, 0);
		CHECK_EQ(traits_of("verbs;ofi_rxm", 0, FI_MR_LOCAL, versions[k]).early_sends, 0);
	}
	return 0;
}

/* An entry without a name or attributes gets no quirk, and no eager default. */
/* rxm of 2.0 and later crashes when a sender leaves mid-segments: the
 * plugin turns segments off there (any core), and nowhere else. */
static int test_env(void)
{
	for (int k = 0; k < NVERSIONS; k++) {
		bool affected = versions[k] >= FI_VERSION(2, 0);
		const char *rxm[] = { "tcp;ofi_rxm", "verbs;ofi_rxm", "TCP;OFI_RXM" };
		for (int r = 0; r < 3; r++) {
			struct policy_traits t = traits_of(rxm[r], 16384, 0, versions[k]);
			if (affected) {
				CHECK(t.env_name && !strcmp(t.env_name, "FI_OFI_RXM_SAR_LIMIT"));
				CHECK(t.env_value && !strcmp(t.env_value, "0"));
				CHECK(t.env_why && strstr(t.env_why, "rendezvous"));
			} else {
				CHECK(!t.env_name && !t.env_value && !t.env_why);
			}
		}
		const char *other[] = { "tcp", "shm", "efa", "ofi_rxm", "verbs", "cxi" };
		for (int o = 0; o < 6; o++)
			CHECK(!traits_of(other[o], 4096, 0, versions[k]).env_name);
	}
	CHECK(traits_of("tcp;ofi_rxm", 64, 0, FI_VERSION(2, 6)).env_name);
	return 0;
}

static int test_no_name(void)
{
	struct policy_traits t;
	memset(&t, 0xff, sizeof(t));
	policy_traits_for(NULL, V117, &t);
	CHECK(!t.serialize && !t.stream && !t.preferred && !t.yields && !t.close_unbound_crashes &&
	      !t.shm_region && !t.drain && !t.env_name);
	CHECK_EQ(t.eager_default, 0);
	CHECK(t.split_domains); /* nothing says registrations are needed */
	struct fi_info *i = fi_allocinfo();
	if (!i)
		abort();
	memset(&t, 0xff, sizeof(t));
	policy_traits_for(i, V21, &t); /* no prov_name */
	CHECK(!t.serialize && !t.stream && !t.preferred && !t.yields && !t.close_unbound_crashes);
	fi_freeinfo(i);
	return 0;
}

static const struct unit_test tests[] = {
	TEST_ENTRY(test_serialize, "serialize: shm only, every version"),
	TEST_ENTRY(test_stream_and_eager, "stream providers by core name; eager default from the entry"),
	TEST_ENTRY(test_split_domains, "split domains unless FI_MR_LOCAL or FI_MR_ENDPOINT"),
	TEST_ENTRY(test_ranking, "native tcp preferred, tcp;ofi_rxm yields"),
	TEST_ENTRY(test_close_unbound, "tcp;ofi_rxm crashes closing an unbound endpoint before 2.1"),
	TEST_ENTRY(test_shm_region, "shm's peer addresses are checked regions; no other provider's"),
	TEST_ENTRY(test_drain, "drain over rxm and native tcp only"),
	TEST_ENTRY(test_whole_max, "rxm: messages above its buffer are never received late"),
	TEST_ENTRY(test_one_rail, "automatic rails: several over native tcp and sockets only"),
	TEST_ENTRY(test_no_write, "RMA writes by default but on tcp;ofi_rxm"),
	TEST_ENTRY(test_early_sends, "early sends by default over native tcp only"),
	TEST_ENTRY(test_tcp_sockets, "a peer's TCP connections reset at close: tcp cores only"),
	TEST_ENTRY(test_env, "rxm of 2.0 and later: segments off (FI_OFI_RXM_SAR_LIMIT=0)"),
	TEST_ENTRY(test_no_name, "no name or attributes: no quirk"),
};

int main(int argc, char **argv)
{
	return unit_main(tests, argc, argv);
}
