#!/bin/sh
# Runs the checker's close-reconnect cases (CR_CASE, default
# "close-reconnect*") N times (default 100) under load:
# CR_LOAD busy loops (default: one per CPU) compete with the ranks, and
# the case's time bounds scale with NCCL_FABRIC_TEST_TIMEOUT_MULTIPLIER (3
# here unless set). Both ranks are alive in these cases, so a run whose log
# says a peer's TCP connection was reset fails too. Prints each failure's
# line and then "passed P of N". Pinned with taskset, the script and its busy
# loops share those CPUs (nproc counts them).
#   tests/func/close_reconnect_loop.sh BUILD_DIR PROVIDER [N]
# e.g. tests/func/close_reconnect_loop.sh build 'tcp;ofi_rxm' 100
# Exit status 0 when every run passed, 1 otherwise, 77 when the provider is
# missing (the checker's first run said so).
set -u
build=${1:?usage: $0 BUILD_DIR PROVIDER [N]}
prov=${2:?usage: $0 BUILD_DIR PROVIDER [N]}
n=${3:-100}
: "${NCCL_FABRIC_TEST_TIMEOUT_MULTIPLIER:=3}"
: "${FI_TCP_IFACE:=lo}"
export NCCL_FABRIC_TEST_TIMEOUT_MULTIPLIER FI_TCP_IFACE
check="$build/bin/nccl-fabric-check --plugin $build/lib/libnccl-net-fabric.so"
hogs=""
load=${CR_LOAD:-$(nproc)}
for _ in $(seq "$load"); do
	sh -c 'while :; do :; done' &
	hogs="$hogs $!"
done
trap 'kill $hogs 2>/dev/null' EXIT INT TERM
pass=0
resets=0
t0=$(date +%s)
i=1
while [ "$i" -le "$n" ]; do
	out=$($check --provider "$prov" --versions 12 --case "${CR_CASE:-close-reconnect*}" 2>&1)
	rc=$?
	if [ "$rc" -eq 77 ]; then
		echo "SKIP: provider $prov: $(echo "$out" | tail -1)"
		exit 77
	fi
	r=$(echo "$out" | grep -c 'Resetting its TCP connection')
	resets=$((resets + r))
	if [ "$rc" -eq 0 ] && [ "$r" -eq 0 ]; then
		pass=$((pass + 1))
	elif [ "$rc" -eq 0 ]; then
		echo "run $i: $r TCP reset(s) of a live peer: $(echo "$out" | grep -m1 'Resetting its TCP')"
	else
		echo "run $i: $(echo "$out" | grep -E '^FAIL' | head -1)"
	fi
	i=$((i + 1))
done
echo "passed $pass of $n (provider $prov, $load busy loops alongside, $(nproc) CPUs," \
	"$(($(date +%s) - t0)) s, $resets TCP resets)"
[ "$pass" -eq "$n" ]
