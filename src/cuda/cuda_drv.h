/*
 * cuda_drv.h - the CUDA driver, opened at run time. The plugin is built
 * without CUDA; where libcuda.so.1 exists it is dlopen'ed at init, and GPU
 * presence is a run-time fact. Every call here is on the control path
 * (init, registration, flush); none is made per send, receive or test.
 */
#ifndef CUDA_DRV_H
#define CUDA_DRV_H

#include "policy/policy.h"

/* Opens the driver and fills info (never fails: a missing driver is a fact,
 * recorded in info->error). */
void cuda_open(struct policy_cuda_info *info);
void cuda_close(void);
/* CUDA device ordinal owning p, or -1 when p is not device memory. */
int cuda_pointer_device(const void *p);
/* cuFlushGPUDirectRDMAWrites for the current context; 0 or the CUresult. */
int cuda_flush_gdr_writes(void);

#endif
