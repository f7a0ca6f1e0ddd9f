/*
 * ofi_mr_cache.c - bookkeeping of the registration cache: which registered
 * range covers a request. Registrations are kept sorted by start address; a
 * request is served by the first registration that starts at or before it and
 * ends at or after it, with the same memory kind and device. Pure: no
 * libfabric call, no lock (the domain's lock is held by the caller).
 */
#include "ofi/ofi.h"
#include "util/util.h"

void ofi_mr_cache_init(struct ofi_mr_cache *cache)
{
	dlist_init(&cache->mrs);
}

void ofi_mr_range(const void *addr, size_t len, enum fi_hmem_iface iface, size_t page,
		  uintptr_t *start, uintptr_t *end)
{
	uintptr_t s = (uintptr_t)addr, e = s + len;
	if (iface == FI_HMEM_SYSTEM) {
		s = UTIL_ALIGN_DOWN(s, page);
		e = UTIL_ALIGN_UP(e, page);
		if (e == s) /* zero-length: one page, so the key and descriptor exist */
			e = s + page;
	} else if (e == s) {
		e = s + 1;
	}
	*start = s;
	*end = e;
}

struct ofi_mr *ofi_mr_cache_find(struct ofi_mr_cache *cache, uintptr_t start, uintptr_t end,
				 enum fi_hmem_iface iface, int device)
{
	struct dlist *it;
	dlist_foreach(&cache->mrs, it) {
		struct ofi_mr *m = container_of(it, struct ofi_mr, link);
		if (m->start > start)
			break; /* sorted by start: nothing further can cover the range */
		if (m->end >= end && m->iface == iface && m->device == device)
			return m;
	}
	return NULL;
}

void ofi_mr_cache_insert(struct ofi_mr_cache *cache, struct ofi_mr *mr)
{
	struct dlist *it, *pos = &cache->mrs;
	dlist_foreach(&cache->mrs, it) {
		if (container_of(it, struct ofi_mr, link)->start > mr->start) {
			pos = it;
			break;
		}
	}
	dlist_insert_tail(pos, &mr->link); /* just before pos */
}

void ofi_mr_cache_remove(struct ofi_mr *mr)
{
	dlist_remove(&mr->link);
}

int ofi_mr_cache_count(const struct ofi_mr_cache *cache)
{
	int n = 0;
	const struct dlist *it;
	for (it = cache->mrs.next; it != &cache->mrs; it = it->next)
		n++;
	return n;
}
