/*
 * test_mrcache.c - the registration cache: the range a registration covers,
 * sorted insertion and lookup over fake registrations (no libfabric call),
 * then one integration test that registers real memory on a tcp;ofi_rxm
 * domain over loopback and checks the reference counting.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cfg/cfg.h"
#include "ofi/ofi.h"
#include "unit.h"

#define PAGE 4096u

/* A fake registration: only the cache's fields. */
static void fake(struct ofi_mr *m, uintptr_t start, uintptr_t end, enum fi_hmem_iface iface,
		 int device)
{
	memset(m, 0, sizeof(*m));
	m->start = start;
	m->end = end;
	m->iface = iface;
	m->device = device;
	m->refs = 1;
}

static int range_is(const void *addr, size_t len, enum fi_hmem_iface iface, uintptr_t es,
		    uintptr_t ee)
{
	uintptr_t s = 0, e = 0;
	ofi_mr_range(addr, len, iface, PAGE, &s, &e);
	if (s != es || e != ee) {
		fprintf(stderr, "  range(%p, %zu, iface %d) = [0x%lx, 0x%lx), expected [0x%lx, 0x%lx)\n",
			addr, len, (int)iface, (unsigned long)s, (unsigned long)e, (unsigned long)es,
			(unsigned long)ee);
		return 0;
	}
	return 1;
}

static int test_range_host(void)
{
	/* host memory: widened to whole pages */
	CHECK(range_is((void *)0x10000, PAGE, FI_HMEM_SYSTEM, 0x10000, 0x11000));
	CHECK(range_is((void *)0x10001, 10, FI_HMEM_SYSTEM, 0x10000, 0x11000));
	CHECK(range_is((void *)0x10fff, 2, FI_HMEM_SYSTEM, 0x10000, 0x12000)); /* straddles */
	CHECK(range_is((void *)0x10000, PAGE + 1, FI_HMEM_SYSTEM, 0x10000, 0x12000));
	CHECK(range_is((void *)0x10800, 3 * PAGE, FI_HMEM_SYSTEM, 0x10000, 0x14000));
	/* zero length: one page, so a key and descriptor exist */
	CHECK(range_is((void *)0x10000, 0, FI_HMEM_SYSTEM, 0x10000, 0x11000));
	CHECK(range_is((void *)0x10234, 0, FI_HMEM_SYSTEM, 0x10000, 0x11000));
	/* another page size */
	uintptr_t s, e;
	ofi_mr_range((void *)0x212345, 1, FI_HMEM_SYSTEM, 2u << 20, &s, &e);
	CHECK(s == 0x200000 && e == 0x400000);
	return 0;
}

static int test_range_device(void)
{
	/* device memory: exact, rounding could leave the allocation */
	CHECK(range_is((void *)0x7f0000001001, 10, FI_HMEM_CUDA, 0x7f0000001001, 0x7f000000100b));
	CHECK(range_is((void *)0x7f0000000000, 3 * PAGE, FI_HMEM_CUDA, 0x7f0000000000,
		       0x7f0000003000));
	/* zero length: one byte, never an empty range */
	CHECK(range_is((void *)0x7f0000001001, 0, FI_HMEM_CUDA, 0x7f0000001001, 0x7f0000001002));
	CHECK(range_is((void *)0x5000, 7, FI_HMEM_ZE, 0x5000, 0x5007));
	return 0;
}

static int sorted_ok(const struct ofi_mr_cache *c)
{
	uintptr_t prev = 0;
	const struct dlist *it;
	for (it = c->mrs.next; it != &c->mrs; it = it->next) {
		const struct ofi_mr *m = container_of(it, const struct ofi_mr, link);
		if (m->start < prev)
			return 0;
		prev = m->start;
		if (it->next->prev != it)
			return 0; /* links consistent */
	}
	return 1;
}

static int test_insert_sorted(void)
{
	struct ofi_mr_cache c;
	struct ofi_mr m[10];
	/* insertion order scrambled: 7,2,9,0,5,1,8,3,6,4 */
	static const int order[10] = { 7, 2, 9, 0, 5, 1, 8, 3, 6, 4 };
	ofi_mr_cache_init(&c);
	CHECK_EQ(ofi_mr_cache_count(&c), 0);
	for (int i = 0; i < 10; i++) {
		int k = order[i];
		fake(&m[k], 0x100000 + (uintptr_t)k * 0x10000, 0x100000 + (uintptr_t)k * 0x10000 + 0x1000,
		     FI_HMEM_SYSTEM, 0);
		ofi_mr_cache_insert(&c, &m[k]);
		CHECK_EQ(ofi_mr_cache_count(&c), i + 1);
		CHECK(sorted_ok(&c));
	}
	/* exactly m[0..9] in address order */
	int k = 0;
	struct dlist *it;
	dlist_foreach(&c.mrs, it) {
		CHECK(container_of(it, struct ofi_mr, link) == &m[k]);
		k++;
	}
	CHECK_EQ(k, 10);
	/* equal starts: the later insertion goes after the earlier */
	struct ofi_mr dup;
	fake(&dup, m[4].start, m[4].end + 0x1000, FI_HMEM_SYSTEM, 0);
	ofi_mr_cache_insert(&c, &dup);
	CHECK(sorted_ok(&c));
	CHECK(m[4].link.next == &dup.link);
	CHECK(dup.link.next == &m[5].link);
	/* remove from the middle, the ends */
	ofi_mr_cache_remove(&dup);
	ofi_mr_cache_remove(&m[0]);
	ofi_mr_cache_remove(&m[9]);
	CHECK_EQ(ofi_mr_cache_count(&c), 8);
	CHECK(sorted_ok(&c));
	CHECK(c.mrs.next == &m[1].link);
	CHECK(c.mrs.prev == &m[8].link);
	ofi_mr_cache_remove(&m[0]); /* a second remove is harmless */
	CHECK_EQ(ofi_mr_cache_count(&c), 8);
	return 0;
}

static int test_find(void)
{
	struct ofi_mr_cache c;
	struct ofi_mr a, b, g0, g1, wide;
	ofi_mr_cache_init(&c);
	/* two adjacent host registrations */
	fake(&a, 0x10000, 0x12000, FI_HMEM_SYSTEM, 0);
	fake(&b, 0x12000, 0x14000, FI_HMEM_SYSTEM, 0);
	/* the same device range on two GPUs */
	fake(&g0, 0x900000, 0x910000, FI_HMEM_CUDA, 0);
	fake(&g1, 0x900000, 0x910000, FI_HMEM_CUDA, 1);
	ofi_mr_cache_insert(&c, &b);
	ofi_mr_cache_insert(&c, &g1);
	ofi_mr_cache_insert(&c, &a);
	ofi_mr_cache_insert(&c, &g0);

	CHECK(ofi_mr_cache_find(&c, 0x10000, 0x12000, FI_HMEM_SYSTEM, 0) == &a); /* exact */
	CHECK(ofi_mr_cache_find(&c, 0x11000, 0x12000, FI_HMEM_SYSTEM, 0) == &a); /* sub-range */
	CHECK(ofi_mr_cache_find(&c, 0x12000, 0x13000, FI_HMEM_SYSTEM, 0) == &b);
	CHECK(ofi_mr_cache_find(&c, 0x10000, 0x14000, FI_HMEM_SYSTEM, 0) == NULL); /* straddles */
	CHECK(ofi_mr_cache_find(&c, 0x11000, 0x13000, FI_HMEM_SYSTEM, 0) == NULL); /* straddles */
	CHECK(ofi_mr_cache_find(&c, 0x13000, 0x15000, FI_HMEM_SYSTEM, 0) == NULL); /* past the end */
	CHECK(ofi_mr_cache_find(&c, 0x0f000, 0x11000, FI_HMEM_SYSTEM, 0) == NULL); /* before */
	CHECK(ofi_mr_cache_find(&c, 0x20000, 0x21000, FI_HMEM_SYSTEM, 0) == NULL); /* nowhere */
	/* memory kind and device must match */
	CHECK(ofi_mr_cache_find(&c, 0x10000, 0x11000, FI_HMEM_CUDA, 0) == NULL);
	CHECK(ofi_mr_cache_find(&c, 0x10000, 0x11000, FI_HMEM_SYSTEM, 1) == NULL);
	CHECK(ofi_mr_cache_find(&c, 0x900100, 0x900200, FI_HMEM_CUDA, 0) == &g0);
	CHECK(ofi_mr_cache_find(&c, 0x900100, 0x900200, FI_HMEM_CUDA, 1) == &g1);
	CHECK(ofi_mr_cache_find(&c, 0x900100, 0x900200, FI_HMEM_CUDA, 2) == NULL);
	CHECK(ofi_mr_cache_find(&c, 0x900100, 0x900200, FI_HMEM_SYSTEM, 0) == NULL);

	/* an earlier registration that does not cover must not hide a later one
	 * that does: [0x10000,0x12000) comes first, [0x11000,0x20000) covers */
	fake(&wide, 0x11000, 0x20000, FI_HMEM_SYSTEM, 0);
	ofi_mr_cache_insert(&c, &wide);
	CHECK(ofi_mr_cache_find(&c, 0x11000, 0x13000, FI_HMEM_SYSTEM, 0) == &wide);
	CHECK(ofi_mr_cache_find(&c, 0x11800, 0x1f000, FI_HMEM_SYSTEM, 0) == &wide);
	/* a request starting before it is still not covered */
	CHECK(ofi_mr_cache_find(&c, 0x10000, 0x13000, FI_HMEM_SYSTEM, 0) == NULL);

	/* after remove */
	ofi_mr_cache_remove(&wide);
	CHECK(ofi_mr_cache_find(&c, 0x11000, 0x13000, FI_HMEM_SYSTEM, 0) == NULL);
	ofi_mr_cache_remove(&a);
	CHECK(ofi_mr_cache_find(&c, 0x10000, 0x12000, FI_HMEM_SYSTEM, 0) == NULL);
	CHECK(ofi_mr_cache_find(&c, 0x12000, 0x13000, FI_HMEM_SYSTEM, 0) == &b);
	ofi_mr_cache_remove(&g0);
	CHECK(ofi_mr_cache_find(&c, 0x900100, 0x900200, FI_HMEM_CUDA, 0) == NULL);
	CHECK(ofi_mr_cache_find(&c, 0x900100, 0x900200, FI_HMEM_CUDA, 1) == &g1);
	CHECK_EQ(ofi_mr_cache_count(&c), 2);
	return 0;
}

/* ---- integration: real registrations on tcp;ofi_rxm over loopback ---- */

static const char *provider_tcp(const char *name, void *arg)
{
	(void)arg;
	return !strcmp(name, "NCCL_FABRIC_PROVIDER") ? "tcp" : NULL;
}

static int test_fabric_refcount(void)
{
	struct cfg_values cfg;
	CHECK_EQ(cfg_load(&cfg, provider_tcp, NULL), 0);
	struct ofi_discovery *d = calloc(1, sizeof(*d));
	if (!d)
		return 1;
	int rc = ofi_discover(&cfg, d);
	if (rc || !d->sel.ok || d->sel.ndevs < 1) {
		fprintf(stderr, "  no usable tcp provider on lo (ofi_discover: %d): %s\n", rc,
			d->sel.reason);
		ofi_discovery_free(d);
		free(d);
		return 1;
	}
	CHECK_STR_CONTAINS(d->sel.provider, "tcp");
	CHECK(!strcmp(d->sel.devs[0].domain, "lo")); /* FI_TCP_IFACE=lo took effect */
	const struct fi_info *info = d->sel.devs[0].host_info;
	CHECK(info != NULL);
	if (!info) {
		ofi_discovery_free(d);
		free(d);
		return 1;
	}
	struct ofi_domain_attr attr = {
		.info = info,
		.hmem = false,
		.expected_cuda_rc = 0,
		.nep = 1,
		.cq_batch = 16,
		.name = "unit-lo",
	};
	struct ofi_domain *dom = NULL;
	rc = ofi_domain_open(&attr, &dom);
	CHECK_EQ(rc, 0);
	if (rc) {
		fprintf(stderr, "  ofi_domain_open: %s\n", ofi_strerror(rc));
		ofi_discovery_free(d);
		free(d);
		return 1;
	}
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	char *buf = NULL;
	CHECK_EQ(posix_memalign((void **)&buf, page, 8 * page), 0);
	if (!buf)
		return 1;
	memset(buf, 1, 8 * page);

	struct ofi_mr *m1 = NULL, *m2 = NULL, *m3 = NULL, *m4 = NULL, *m5 = NULL;
	CHECK_EQ(ofi_mr_count(dom), 0);
	CHECK_EQ(ofi_mr_get(dom, buf + 64, 1000, FI_HMEM_SYSTEM, 0, &m1), 0);
	CHECK_EQ(ofi_mr_count(dom), 1);
	CHECK(m1 && m1->mr != NULL);
	CHECK(m1 && m1->start == (uintptr_t)buf && m1->end == (uintptr_t)buf + page);
	/* the same range again: the same registration, one more reference */
	CHECK_EQ(ofi_mr_get(dom, buf + 64, 1000, FI_HMEM_SYSTEM, 0, &m2), 0);
	CHECK(m2 == m1);
	CHECK_EQ(ofi_mr_count(dom), 1);
	/* a sub-range of the same page: still the same */
	CHECK_EQ(ofi_mr_get(dom, buf + 2000, 100, FI_HMEM_SYSTEM, 0, &m3), 0);
	CHECK(m3 == m1);
	CHECK_EQ(ofi_mr_count(dom), 1);
	CHECK_EQ(m1->refs, 3);
	/* a disjoint range: a second registration */
	CHECK_EQ(ofi_mr_get(dom, buf + 4 * page, 2 * page, FI_HMEM_SYSTEM, 0, &m4), 0);
	CHECK(m4 != NULL && m4 != m1);
	CHECK_EQ(ofi_mr_count(dom), 2);
	CHECK(m4 && m4->mr != NULL && m4->mr != m1->mr);
	CHECK(m4 && m4->key != m1->key); /* two live registrations never share a key */
	/* a range straddling the first registration's end is not covered by it */
	CHECK_EQ(ofi_mr_get(dom, buf + page - 8, 16, FI_HMEM_SYSTEM, 0, &m5), 0);
	CHECK(m5 != NULL && m5 != m1 && m5 != m4);
	CHECK_EQ(ofi_mr_count(dom), 3);

	/* put everything: the count falls as the last reference of each goes */
	ofi_mr_put(m5);
	CHECK_EQ(ofi_mr_count(dom), 2);
	ofi_mr_put(m3);
	ofi_mr_put(m2);
	CHECK_EQ(ofi_mr_count(dom), 2); /* m1 still referenced once */
	ofi_mr_put(m1);
	CHECK_EQ(ofi_mr_count(dom), 1);
	ofi_mr_put(m4);
	CHECK_EQ(ofi_mr_count(dom), 0);
	ofi_mr_put(NULL); /* harmless */

	/* after the last put the range registers afresh */
	CHECK_EQ(ofi_mr_get(dom, buf, 10, FI_HMEM_SYSTEM, 0, &m1), 0);
	CHECK_EQ(ofi_mr_count(dom), 1);
	ofi_mr_put(m1);
	CHECK_EQ(ofi_mr_count(dom), 0);

	ofi_domain_close(dom);
	ofi_discovery_free(d);
	free(d);
	free(buf);
	return 0;
}

static const struct unit_test tests[] = {
	TEST_ENTRY(test_range_host, "host ranges widen to whole pages; zero length is one page"),
	TEST_ENTRY(test_range_device, "device ranges are exact; zero length is one byte"),
	TEST_ENTRY(test_insert_sorted, "insert keeps start order; remove from middle and ends"),
	TEST_ENTRY(test_find, "find: exact, sub-range, straddling, other iface/device, after remove"),
	TEST_ENTRY(test_fabric_refcount, "tcp;ofi_rxm on lo: same/sub range share, disjoint adds, put frees"),
};

int main(int argc, char **argv)
{
	/* Before libfabric reads its environment: only the loopback interface. */
	setenv("FI_TCP_IFACE", "lo", 1);
	return unit_main(tests, argc, argv);
}
