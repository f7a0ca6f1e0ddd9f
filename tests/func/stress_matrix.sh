#!/bin/bash
# Runs one stress job per provider configuration, each pinned to its own two
# of the CPUs the script may use (a 2-core machine apiece), as many at once
# as those CPUs allow (taskset -c 8-15 on the script keeps it to those):
#
#   tests/func/stress_matrix.sh BUILD_DIR OUT_DIR JOB N CONFIG...
#
#   JOB loop   close_reconnect_loop.sh N times (CR_CASE, CR_LOAD as there:
#              by default both close-reconnect cases beside two busy loops
#              on the same two CPUs)
#   JOB soak   the checker's soak until N messages went each way (1e7 works),
#              beside SOAK_HOGS busy loops (default 2; 0 for full speed)
#   SM_CPUS    CPUs per job (default 2)
#   CONFIG     NAME:PROVIDER[:VAR=VALUE...], e.g.
#              rxm-1.17:tcp;ofi_rxm
#              tcp-2.1:tcp:LD_LIBRARY_PATH=/opt/lf2/lib
#              efa-direct:testhmem:FI_PROVIDER_PATH=build/testprov:TESTHMEM_PROFILE=efa-direct
#
# Each job's output goes to OUT_DIR/JOB-NAME.log; its last line is printed as
# it ends, then one line per job. Exit status 0 when every job passed.
set -u
build=${1:?usage: $0 BUILD_DIR OUT_DIR loop|soak N CONFIG...}
out=${2:?usage}
job=${3:?usage}
n=${4:?usage}
shift 4
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
# the CPUs this script may use (taskset on it narrows them)
cpu_list=()
IFS=, read -r -a ranges <<<"$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)"
for r in "${ranges[@]}"; do
	for ((c = ${r%-*}; c <= ${r#*-}; c++)); do cpu_list+=("$c"); done
done
ncpu=${#cpu_list[@]}
per=${SM_CPUS:-2}
slots=$((ncpu / per))
[ "$slots" -ge 1 ] || slots=1
: "${NCCL_FABRIC_TEST_TIMEOUT_MULTIPLIER:=3}"
: "${FI_TCP_IFACE:=lo}"
export NCCL_FABRIC_TEST_TIMEOUT_MULTIPLIER FI_TCP_IFACE

run_one() { # slot config
	local slot=$1 cfg=$2 name prov
	IFS=: read -r -a parts <<<"$cfg"
	name=${parts[0]}
	prov=${parts[1]}
	local envs=("${parts[@]:2}")
	local cpus=${cpu_list[0]} c
	if [ "$ncpu" -ge "$per" ]; then
		cpus=${cpu_list[per * slot]}
		for ((c = 1; c < per; c++)); do cpus="$cpus,${cpu_list[per * slot + c]}"; done
	fi
	local log="$out/$job-$name.log"
	case $job in
	loop)
		env "${envs[@]}" taskset -c "$cpus" sh "$here/close_reconnect_loop.sh" "$build" "$prov" "$n" \
			>"$log" 2>&1
		;;
	soak)
		env "${envs[@]}" taskset -c "$cpus" sh -c '
			h=""
			for _ in $(seq '"${SOAK_HOGS:-2}"'); do sh -c "while :; do :; done" & h="$h $!"; done
			"$@"; rc=$?
			[ -z "$h" ] || kill $h
			exit $rc' soak "$build/bin/nccl-fabric-check" \
			--plugin "$build/lib/libnccl-net-fabric.so" --provider "$prov" --versions 12 \
			--case soak --soak-messages "$n" >"$log" 2>&1
		;;
	*) echo "unknown job $job" >"$log"; return 2 ;;
	esac
	local rc=$?
	echo "$name (CPUs $cpus): rc=$rc: $(grep -E '^(PASS|FAIL|SKIP|passed)' "$log" | tail -1)"
	return $rc
}

declare -A pid_of
free_slots=()
for ((s = 0; s < slots; s++)); do free_slots+=("$s"); done
declare -A slot_of
fail=0
wait_one() {
	local p
	wait -n -p p
	local rc=$?
	[ "$rc" -eq 0 ] || fail=1
	free_slots+=("${slot_of[$p]}")
	unset "slot_of[$p]"
}
for cfg in "$@"; do
	while [ "${#free_slots[@]}" -eq 0 ]; do wait_one; done
	s=${free_slots[0]}
	free_slots=("${free_slots[@]:1}")
	run_one "$s" "$cfg" &
	slot_of[$!]=$s
done
while [ "${#slot_of[@]}" -gt 0 ]; do wait_one; done
echo "---"
for cfg in "$@"; do
	name=${cfg%%:*}
	echo "$name: $(grep -E '^(PASS|FAIL|SKIP|passed)' "$out/$job-$name.log" | tail -1)"
done
exit $fail
