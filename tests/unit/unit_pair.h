/*
 * unit_pair.h - the plugin connected to itself, for unit-runner tests of its
 * own code that need a provider (fabric_provider_test in CMakeLists.txt):
 * init, a listen comm on device 0, and one send/receive pair over it, made by
 * calling connect and accept in turn on one thread as NCCL's service thread
 * would.
 */
#ifndef UNIT_PAIR_H
#define UNIT_PAIR_H

#include "nccl/nccl_net.h"
#include "unit.h"

struct unit_pair {
	void *ctx, *lcomm, *sc, *rc;
	char handle[NCCL_NET_HANDLE_MAXSIZE];
};

/* 0, 77 (skip: no usable provider, said on stdout) or 1. */
int unit_pair_open(struct unit_pair *p);
/* Connects sc to the listener of handle and accepts rc on lcomm, in turn,
 * for up to timeout_s; 0 when both exist. */
int unit_pair_connect(void *lcomm, const void *handle, void **sc, void **rc, double timeout_s);
void unit_pair_close(struct unit_pair *p);
/* Calls test() on req until it is done, fails, or seconds pass; returns done,
 * with test()'s result in *res and the size it reported in *size. */
int unit_pair_test_until(void *req, double seconds, int *res, int *size);
/* A test program's main: opens the pair, hands its comms to the tests
 * (lcomm, sc, rc), runs them and closes it. The exit status of unit_run, or
 * unit_pair_open's. */
int unit_pair_run(const struct unit_test *tests, int n, int argc, char **argv, void **lcomm,
		  void **sc, void **rc);

#endif
