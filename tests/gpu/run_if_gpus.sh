#!/usr/bin/env bash
# Runs a GPU check through the plugin when this machine has two GPUs, else
# reports itself skipped (exit 77) with the reason. On the CPU machine and in
# CI this is the skip; on the GPU machine it is a real NCCL run.
#   run_if_gpus.sh bench  NCCL_BENCH PLUGIN   all collectives, small sizes, data checked
#   run_if_gpus.sh torch  TORCH_CHECK PLUGIN  PyTorch's NCCL backend, results checked
set -u
what=$1 prog=$2 plugin=$3
skip() { echo "SKIP: $*"; exit 77; }

command -v nvidia-smi >/dev/null 2>&1 || skip "no nvidia-smi: no GPU on this machine (the GPU checks run on the GPU machine, bench/run-gpu.sh)"
n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
[ "${n:-0}" -ge 2 ] || skip "$n GPU(s): the network path between GPUs needs 2"
# NCCL between GPUs of one host through the network plugin, on loopback
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0 NCCL_NET=Fabric
export NCCL_NET_PLUGIN=$plugin NCCL_SOCKET_IFNAME=lo FI_TCP_IFACE=lo
case $what in
bench)
  exec "$prog" --mode single --min-bytes 8 --max-bytes 4M --factor 8 --iters 3 --warmup 1 --timeout 120 ;;
torch)
  python3 -c 'import torch; assert torch.cuda.device_count() >= 2' 2>/dev/null ||
    skip "python3 has no CUDA-enabled torch with 2 GPUs"
  exec python3 "$prog" ;;
*) echo "usage: run_if_gpus.sh bench|torch PROGRAM PLUGIN"; exit 2 ;;
esac
