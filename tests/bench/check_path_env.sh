#!/usr/bin/env bash
# bench/run-gpu.sh's path_env: FABRIC_EXTRA_ENV reaches the plugin's runs
# only, BENCH_NCCL_ENV every run, Socket's too, and each path keeps its own
# network settings.
set -u
repo=$1
fn=$(sed -n '/^path_env() {/,/^}/p' "$repo/bench/run-gpu.sh")
[[ -n $fn ]] || { echo "FAIL: no path_env() in bench/run-gpu.sh"; exit 1; }
die() { echo "FAIL: path_env died: $*"; exit 1; }
eval "$fn"
NETNS_RUN=0 PLUGIN=/p/libnccl-net-fabric.so FABRIC_TCP_PROVIDER= TESTPROV_DIR=/t
fail=0
env_of() { # path, then the words ENV_RUN holds, one per line
	ENV_RUN=()
	path_env "$1" /tmp/x
	printf '%s\n' "${ENV_RUN[@]}"
}
has() { grep -qxF -- "$3" <<<"$2" || { echo "FAIL: $1: no '$3' in:"; echo "$2"; fail=1; }; }
hasnt() { ! grep -qxF -- "$3" <<<"$2" || { echo "FAIL: $1: '$3' should not be there"; fail=1; }; }

export FABRIC_EXTRA_ENV="NCCL_FABRIC_RAILS=1" BENCH_NCCL_ENV="NCCL_NCHANNELS_PER_NET_PEER=2 NCCL_MIN_P2P_NCHANNELS=4"
for p in fabric-default fabric-tcp-native nccl-socket nccl-socket-best; do
	e=$(env_of $p)
	has "$p" "$e" "NCCL_NCHANNELS_PER_NET_PEER=2"
	has "$p" "$e" "NCCL_MIN_P2P_NCHANNELS=4"
	if [[ $p == fabric-* ]]; then
		has "$p" "$e" "NCCL_NET=Fabric"
		has "$p" "$e" "NCCL_FABRIC_RAILS=1"
	else
		has "$p" "$e" "NCCL_NET=Socket"
		hasnt "$p" "$e" "NCCL_FABRIC_RAILS=1"
	fi
done
unset BENCH_NCCL_ENV
e=$(env_of nccl-socket)
hasnt "unset BENCH_NCCL_ENV" "$e" "NCCL_NCHANNELS_PER_NET_PEER=2"
((fail)) || echo "PASS: FABRIC_EXTRA_ENV on plugin runs only, BENCH_NCCL_ENV on every run"
exit $fail
