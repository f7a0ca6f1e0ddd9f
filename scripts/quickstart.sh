#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, and runs the
# main job -- a two-process transfer through the plugin, on loopback, over
# the best provider that reaches other hosts (tcp;ofi_rxm here), next to raw
# libfabric tagged messaging over the same provider (--compare: plugin GB/s,
# raw GB/s and plugin/raw per size). Pass "shm" to run it over libfabric's
# shared-memory provider instead.
set -euo pipefail
cd "$(dirname "$0")/.."
provider="${1:-}"

scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >/dev/null

# Keep the traffic on loopback.
export FI_TCP_IFACE=${FI_TCP_IFACE:-lo} FI_UDP_IFACE=${FI_UDP_IFACE:-lo}
export FI_SOCKETS_IFACE=${FI_SOCKETS_IFACE:-lo} FI_NET_IFACE=${FI_NET_IFACE:-lo}

args=(--loopback --compare)
[ -n "$provider" ] && args+=(--provider "$provider")
build/bin/nccl-fabric-perf "${args[@]}"
