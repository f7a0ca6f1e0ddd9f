/*
 * util.h - small helpers shared by every module: checksums, bit counting,
 * string copying, time.
 */
#ifndef UTIL_H
#define UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define UTIL_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define UTIL_MIN(a, b) ((a) < (b) ? (a) : (b))
#define UTIL_MAX(a, b) ((a) > (b) ? (a) : (b))
#define UTIL_ALIGN_DOWN(x, a) ((x) & ~((uintptr_t)(a) - 1))
#define UTIL_ALIGN_UP(x, a) (((x) + (uintptr_t)(a) - 1) & ~((uintptr_t)(a) - 1))
#define UTIL_HIDDEN __attribute__((visibility("hidden")))
#define UTIL_EXPORT __attribute__((visibility("default")))

/* 64-bit FNV-1a: stable across processes and builds, used for handle checksums
 * and device guids. Not cryptographic. */
static inline uint64_t util_fnv1a64(const void *data, size_t len, uint64_t seed)
{
	const unsigned char *p = data;
	uint64_t h = seed ? seed : 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* Copies at most dst_size-1 bytes and always terminates. */
static inline void util_strlcpy(char *dst, const char *src, size_t dst_size)
{
	if (!dst_size)
		return;
	size_t n = strlen(src);
	if (n >= dst_size)
		n = dst_size - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

static inline uint64_t util_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The same clock at the kernel tick's resolution (a few ms), for what runs
 * on every completion and every test(): liveness, idleness, the lazy CTS.
 * It reads a variable; the precise clock costs up to a quarter of a spinning
 * test() loop in a VM. Never mix its values with util_now_ns()'s. */
static inline uint64_t util_coarse_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Processes on this host that use the plugin (util_procs.c): join holds a
 * lock for the process's life; count takes the live ones (this one too) and
 * removes what dead processes left. dir: util_procs_dir's, or a test's. */
void util_procs_dir(char *out, size_t len);
int util_procs_join(const char *dir);
int util_procs_count(const char *dir);

#endif
