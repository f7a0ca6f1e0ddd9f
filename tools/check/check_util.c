/*
 * check_util.c - transfers with full verification, shared by the cases.
 *
 * Every message is a pattern of its own seed, so a receiver can tell "wrong
 * bytes" from "another message's bytes" (out of order, wrong buffer) and from
 * "never written". Buffers are one registered region per side with a gap after
 * each slice; gaps and the region's guards must stay untouched.
 */
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK_GAP 64
#define CK_ALIGN 64
#define CK_GUARD 4096
#define CK_GAP_SEED 0xbb67ae8584caa73bULL

size_t ck_cap(const ck_t *ck, size_t size)
{
	return size > ck->o->max_size ? ck->o->max_size : size;
}

long ck_eager_max(const ck_t *ck, long unknown)
{
	const ncclFabricTools_v1_t *tools = fh_net_tools(ck->net);
	long eager = tools && tools->eager_max ? tools->eager_max(ck->dev) : -1;
	return eager < 0 ? unknown : eager;
}

uint64_t ck_seed(const ck_t *ck, int from, int to, int stream, int idx)
{
	uint64_t h = fh_mix64(ck->o->seed + (uint64_t)ck->version);
	h = fh_mix64(h + (uint64_t)from * 131 + (uint64_t)to);
	h = fh_mix64(h + (uint64_t)stream * 65537);
	return fh_mix64(h + (uint64_t)idx);
}

int ck_max_group(const ck_t *ck)
{
	int n = ck->props.maxRecvs;
	if (n > FH_MAX_GROUP)
		n = FH_MAX_GROUP;
	return n < 1 ? 1 : n;
}

int ck_ok(ck_t *ck, ncclResult_t rc, const char *call)
{
	if (rc == ncclSuccess)
		return FH_OK;
	return fh_fail(ck->r, "%s returned %s", call, fh_result_str(rc));
}

int ck_close_pair(ck_t *ck, void *sc, void *rc)
{
	if (sc && ck_ok(ck, fh_net_close_send(ck->net, sc), "closeSend()"))
		return FH_FAIL;
	if (rc && ck_ok(ck, fh_net_close_recv(ck->net, rc), "closeRecv()"))
		return FH_FAIL;
	return FH_OK;
}

/* ------------------------------------------------------------ sides */

static int ck_side_alloc(ck_t *ck, ck_side_t *s, void *comm, int n, const size_t *sizes,
			 size_t post_size, const uint64_t *seeds)
{
	memset(s, 0, sizeof(*s));
	s->comm = comm;
	s->n = n;
	s->off = calloc((size_t)n + 1, sizeof(size_t));
	s->len = calloc((size_t)n + 1, sizeof(size_t));
	s->post = calloc((size_t)n + 1, sizeof(size_t));
	s->seed = calloc((size_t)n + 1, sizeof(uint64_t));
	s->ops = calloc((size_t)n + 1, sizeof(fh_op_t));
	if (!s->off || !s->len || !s->post || !s->seed || !s->ops)
		return fh_fail(ck->r, "out of memory");
	size_t total = 0;
	for (int i = 0; i < n; i++) {
		s->off[i] = total;
		s->len[i] = sizes[i];
		s->post[i] = post_size ? post_size : sizes[i];
		s->seed[i] = seeds[i];
		total += (s->post[i] + CK_GAP + CK_ALIGN - 1) / CK_ALIGN * CK_ALIGN;
	}
	s->off[n] = total;
	if (fh_buf_alloc(&s->buf, total, CK_GUARD))
		return fh_fail(ck->r, "cannot map a %zu-byte buffer", total);
	fh_pattern_fill(s->buf.ptr, total, CK_GAP_SEED);
	s->type = NCCL_PTR_HOST;
	s->cpu = s->buf.ptr;
	if (ck->mem.type == NCCL_PTR_CUDA) {
		/* "GPU" memory: host memory the stub CUDA driver reports as device memory. */
		if (!ck->mem.mark || ck->mem.mark(s->buf.ptr, total))
			return fh_fail(ck->r, "cannot mark %zu bytes at %p as device memory", total,
				       (void *)s->buf.ptr);
		s->unmark = ck->mem.unmark;
		s->type = NCCL_PTR_CUDA;
		if (ck->mem.view)
			s->cpu = ck->mem.view(s->buf.ptr);
		ncclResult_t rc = fh_net_reg_mr(ck->net, comm, s->buf.ptr, total, NCCL_PTR_CUDA,
						&s->buf.mh);
		if (rc != ncclSuccess)
			return fh_fail(ck->r, "regMr(%zu bytes, NCCL_PTR_CUDA) returned %s", total,
				       fh_result_str(rc));
		s->buf.comm = comm;
		return FH_OK;
	}
	ncclResult_t rc = fh_buf_reg(ck->net, &s->buf, comm, 0);
	if (rc != ncclSuccess)
		return fh_fail(ck->r, "regMr(%zu bytes, NCCL_PTR_HOST) returned %s", total,
			       fh_result_str(rc));
	return FH_OK;
}

int ck_side_send(ck_t *ck, ck_side_t *s, void *sc, int n, const size_t *sizes,
		 const uint64_t *seeds, int tag)
{
	if (ck_side_alloc(ck, s, sc, n, sizes, 0, seeds))
		return FH_FAIL;
	for (int i = 0; i < n; i++) {
		fh_pattern_fill(s->cpu + s->off[i], s->len[i], s->seed[i]);
		fh_op_send(&s->ops[i], sc, s->buf.ptr + s->off[i], s->len[i], tag, s->buf.mh);
	}
	return FH_OK;
}

int ck_side_recv(ck_t *ck, ck_side_t *s, void *rc, int n, const size_t *sizes, size_t post_size,
		 const uint64_t *seeds, int tag)
{
	if (ck_side_alloc(ck, s, rc, n, sizes, post_size, seeds))
		return FH_FAIL;
	s->is_recv = 1;
	for (int i = 0; i < n; i++) {
		fh_op_recv(&s->ops[i], rc, s->buf.ptr + s->off[i], s->post[i], tag, s->buf.mh);
		s->ops[i].expect[0] = s->len[i];
	}
	return FH_OK;
}

/* Explain a wrong slice: another message's data? never written? */
static void ck_explain(const ck_side_t *s, int i, size_t bad, char *out, size_t len)
{
	const unsigned char *p = s->cpu + s->off[i];
	out[0] = '\0';
	size_t probe = s->len[i] < 32 ? s->len[i] : 32;
	for (int j = 0; j < s->n && probe; j++) {
		if (j == i || s->len[j] < probe)
			continue;
		if (!fh_pattern_check(p, probe, s->seed[j], NULL)) {
			snprintf(out, len, " (holds message %d's data: wrong order or wrong buffer)", j);
			return;
		}
	}
	if (p[bad] == fh_pattern_byte(CK_GAP_SEED, s->off[i] + bad))
		snprintf(out, len, " (byte never written)");
}

int ck_side_verify(ck_t *ck, ck_side_t *s, const char *what)
{
	for (int i = 0; i < s->n; i++) {
		const unsigned char *p = s->cpu + s->off[i];
		size_t bad;
		if (fh_pattern_check(p, s->len[i], s->seed[i], &bad)) {
			char why[128];
			ck_explain(s, i, bad, why, sizeof(why));
			return fh_fail(ck->r, "%s: %s %d/%d (%zu bytes): first wrong byte at offset %zu "
					      "(0x%02x, expected 0x%02x)%s",
				       what, s->is_recv ? "received message" : "send buffer of message",
				       i, s->n, s->len[i], bad, p[bad],
				       fh_pattern_byte(s->seed[i], bad), why);
		}
		/* Bytes between the posted size and the next slice. */
		for (size_t o = s->off[i] + s->post[i]; o < s->off[i + 1]; o++) {
			if (s->cpu[o] != fh_pattern_byte(CK_GAP_SEED, o))
				return fh_fail(ck->r, "%s: message %d/%d: byte %zu past the end of the "
						      "posted %zu-byte buffer was overwritten",
					       what, i, s->n, o - s->off[i] - s->post[i], s->post[i]);
		}
	}
	/* guarded device memory: its trailing guard shares the last page, which the
	 * CPU cannot read; ck_side_release checks the guards once it is unmarked */
	long gbad;
	if (s->cpu == s->buf.ptr && fh_buf_guard_check(&s->buf, &gbad))
		return fh_fail(ck->r, "%s: guard byte at offset %ld of the %zu-byte region overwritten",
			       what, gbad, s->buf.size);
	return FH_OK;
}

int ck_side_release(ck_t *ck, ck_side_t *s)
{
	int ret = FH_OK;
	if (s->buf.comm) {
		ncclResult_t rc = fh_buf_dereg(ck->net, &s->buf);
		if (rc != ncclSuccess)
			ret = fh_fail(ck->r, "deregMr() returned %s", fh_result_str(rc));
	}
	if (s->unmark && s->buf.ptr) {
		s->unmark(s->buf.ptr);
		long gbad;
		if (s->cpu != s->buf.ptr && fh_buf_guard_check(&s->buf, &gbad))
			ret = fh_fail(ck->r, "guard byte at offset %ld of the %zu-byte device region "
					     "overwritten", gbad, s->buf.size);
	}
	fh_buf_free(&s->buf);
	free(s->off);
	free(s->len);
	free(s->post);
	free(s->seed);
	free(s->ops);
	memset(s, 0, sizeof(*s));
	return ret;
}

int ck_sides_run(ck_t *ck, ck_side_t **sides, int nsides, int window)
{
	int total = 0, maxn = 0;
	for (int k = 0; k < nsides; k++) {
		total += sides[k]->n;
		if (sides[k]->n > maxn)
			maxn = sides[k]->n;
	}
	fh_op_t *ops = calloc((size_t)total + 1, sizeof(fh_op_t));
	if (!ops)
		return fh_fail(ck->r, "out of memory");
	int m = 0;
	for (int i = 0; i < maxn; i++)
		for (int k = 0; k < nsides; k++)
			if (i < sides[k]->n)
				ops[m++] = sides[k]->ops[i];
	int ret = fh_ops_run(ck->r, ck->net, ops, total, window);
	m = 0;
	for (int i = 0; i < maxn; i++)
		for (int k = 0; k < nsides; k++)
			if (i < sides[k]->n)
				sides[k]->ops[i] = ops[m++];
	free(ops);
	return ret;
}

int ck_exchange(ck_t *ck, void *sc, void *rc, int n, const size_t *sizes,
		const uint64_t *send_seeds, const uint64_t *recv_seeds, int window)
{
	ck_side_t tx, rx;
	ck_side_t *sides[2];
	int ns = 0;
	memset(&tx, 0, sizeof(tx));
	memset(&rx, 0, sizeof(rx));
	if (sc) {
		if (ck_side_send(ck, &tx, sc, n, sizes, send_seeds, CK_TAG))
			return FH_FAIL;
		sides[ns++] = &tx;
	}
	if (rc) {
		if (ck_side_recv(ck, &rx, rc, n, sizes, 0, recv_seeds, CK_TAG))
			return FH_FAIL;
		sides[ns++] = &rx;
	}
	if (ck_sides_run(ck, sides, ns, window))
		return FH_FAIL;
	if (rc && ck_side_verify(ck, &rx, "receive"))
		return FH_FAIL;
	if (sc && ck_side_verify(ck, &tx, "send"))
		return FH_FAIL;
	int ret = FH_OK;
	if (sc && ck_side_release(ck, &tx))
		ret = FH_FAIL;
	if (rc && ck_side_release(ck, &rx))
		ret = FH_FAIL;
	return ret;
}

int ck_oneway(ck_t *ck, void *sc, void *rc, int a, int b, int stream, int n, size_t size,
	      int window)
{
	int me = ck->r->rank;
	if (me != a && me != b)
		return FH_OK;
	size_t *sizes = calloc((size_t)n, sizeof(size_t));
	uint64_t *seeds = calloc((size_t)n, sizeof(uint64_t));
	if (!sizes || !seeds) {
		free(sizes);
		free(seeds);
		return fh_fail(ck->r, "out of memory");
	}
	for (int i = 0; i < n; i++) {
		sizes[i] = size;
		seeds[i] = ck_seed(ck, a, b, stream, i);
	}
	int ret = ck_exchange(ck, me == a ? sc : NULL, me == b ? rc : NULL, n, sizes, seeds, seeds,
			      window);
	free(sizes);
	free(seeds);
	return ret;
}
