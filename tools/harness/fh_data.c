/*
 * fh_data.c - byte patterns and guarded buffers.
 *
 * A pattern byte depends on (seed, offset) only, so the receiver can check
 * every byte without being told the data, a message landing in the wrong
 * buffer shows up as a wrong seed, and a shifted copy as a wrong offset.
 */
#include "harness.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#define FH_GUARD_SEED 0x6a09e667f3bcc908ULL

uint64_t fh_mix64(uint64_t x)
{
	/* splitmix64 finaliser */
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static inline uint64_t fh_pattern_word(uint64_t seed, size_t word)
{
	return fh_mix64(seed * 0xd1342543de82ef95ULL + (uint64_t)word);
}

uint8_t fh_pattern_byte(uint64_t seed, size_t off)
{
	return (uint8_t)(fh_pattern_word(seed, off / 8) >> ((off % 8) * 8));
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define FH_LE 1
#else
#define FH_LE 0
#endif

void fh_pattern_fill(void *buf, size_t len, uint64_t seed)
{
	unsigned char *p = buf;
	size_t words = FH_LE ? len / 8 : 0;
	for (size_t w = 0; w < words; w++) {
		uint64_t v = fh_pattern_word(seed, w);
		memcpy(p + w * 8, &v, 8);
	}
	for (size_t off = words * 8; off < len; off++)
		p[off] = fh_pattern_byte(seed, off);
}

int fh_pattern_check(const void *buf, size_t len, uint64_t seed, size_t *bad_off)
{
	const unsigned char *p = buf;
	size_t words = FH_LE ? len / 8 : 0;
	size_t start = words * 8;
	for (size_t w = 0; w < words; w++) {
		uint64_t v = fh_pattern_word(seed, w);
		if (memcmp(p + w * 8, &v, 8)) {
			start = w * 8; /* find the exact byte below */
			break;
		}
	}
	for (size_t off = start; off < len; off++) {
		if (p[off] != fh_pattern_byte(seed, off)) {
			if (bad_off)
				*bad_off = off;
			return -1;
		}
	}
	return 0;
}

uint64_t fh_checksum(const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint64_t h = 0xcbf29ce484222325ULL ^ (uint64_t)len;
	size_t words = len / 8;
	for (size_t w = 0; w < words; w++) {
		uint64_t v;
		memcpy(&v, p + w * 8, 8);
		h = (h ^ v) * 0x100000001b3ULL;
		h ^= h >> 29;
	}
	for (size_t off = words * 8; off < len; off++)
		h = (h ^ p[off]) * 0x100000001b3ULL;
	return fh_mix64(h);
}

/* ------------------------------------------------------------ buffers */

int fh_buf_alloc(fh_buf_t *b, size_t size, size_t guard)
{
	memset(b, 0, sizeof(*b));
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	/* A whole number of pages in front keeps ptr page-aligned; the guard after
	 * starts right at ptr + size so that one-byte overruns are caught. */
	size_t front = (guard + page - 1) / page * page;
	size_t total = front + size + guard;
	total = (total + page - 1) / page * page;
	if (total == 0)
		total = page;
	void *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return -1;
	b->base = m;
	b->map_len = total;
	b->ptr = b->base + front;
	b->size = size;
	b->guard = guard;
	/* Guards hold a pattern too (not a constant) so stray copies are seen. */
	fh_pattern_fill(b->ptr - guard, guard, FH_GUARD_SEED);
	fh_pattern_fill(b->ptr + size, guard, FH_GUARD_SEED ^ 1);
	return 0;
}

void fh_buf_free(fh_buf_t *b)
{
	if (b->base)
		munmap(b->base, b->map_len);
	memset(b, 0, sizeof(*b));
}

int fh_buf_guard_check(const fh_buf_t *b, long *bad_off)
{
	size_t off;
	if (fh_pattern_check(b->ptr - b->guard, b->guard, FH_GUARD_SEED, &off)) {
		*bad_off = (long)off - (long)b->guard;
		return -1;
	}
	if (fh_pattern_check(b->ptr + b->size, b->guard, FH_GUARD_SEED ^ 1, &off)) {
		*bad_off = (long)(b->size + off);
		return -1;
	}
	return 0;
}

ncclResult_t fh_buf_reg(fh_net_t *net, fh_buf_t *b, void *comm, int with_guard)
{
	void *start = with_guard ? (void *)(b->ptr - b->guard) : (void *)b->ptr;
	size_t len = with_guard ? b->size + 2 * b->guard : b->size;
	if (len == 0)
		len = 1; /* NCCL never registers empty buffers */
	b->mh = NULL;
	ncclResult_t rc = fh_net_reg_mr(net, comm, start, len, NCCL_PTR_HOST, &b->mh);
	if (rc == ncclSuccess)
		b->comm = comm;
	return rc;
}

ncclResult_t fh_buf_dereg(fh_net_t *net, fh_buf_t *b)
{
	if (!b->comm)
		return ncclSuccess;
	ncclResult_t rc = fh_net_dereg_mr(net, b->comm, b->mh);
	b->comm = NULL;
	b->mh = NULL;
	return rc;
}

/* "4096", "64K", "1MiB", "2G" -> bytes (K/M/G are powers of 1024). */
int fh_parse_size(const char *s, size_t *out)
{
	char *end = NULL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s)
		return -1;
	unsigned long long mult = 1;
	if (*end) {
		switch (toupper((unsigned char)*end)) {
		case 'K': mult = 1ULL << 10; break;
		case 'M': mult = 1ULL << 20; break;
		case 'G': mult = 1ULL << 30; break;
		default: return -1;
		}
		end++;
		if (!strcasecmp(end, "iB") || !strcasecmp(end, "B"))
			end += strlen(end);
		if (*end)
			return -1;
	}
	if (v > (unsigned long long)SIZE_MAX / mult)
		return -1;
	*out = (size_t)(v * mult);
	return 0;
}

