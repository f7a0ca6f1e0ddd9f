#!/usr/bin/env bash
# sweep.sh - the grid that chooses the plugin's defaults: each knob setting,
# every size, the collectives, at several rank counts, on the emulated
# cluster and on loopback, with NCCL's Socket transport (defaults and best
# tuning) in the same run. Prints, per setup, collective and size, the
# default's time, the fastest setting and its time, and Socket's.
#
#   bench/sweep.sh                  # on the GPU machine, after run-gpu.sh setup
#   bench/sweep.sh --table CSV...   # the table again from the CSVs of a run
#
# Settings (environment; run-gpu.sh's own settings pass through):
#   SWEEP_LINKS   netns and/or loopback (default "netns loopback")
#   SWEEP_RANKS   rank counts, each rank its own host (default "2 8")
#   SWEEP_KNOBS   semicolon list of NAME:NCCL_FABRIC_X=V[,NCCL_FABRIC_Y=W]
#                 (default: the list below; empty: none); "default" runs first and
#                 again last ("again"): what "again" beats the default at
#                 is this machine's noise
#   SWEEP_SOCKET  1: Socket's defaults and best tuning too (default 1), run
#                 before the default's second run; 2: and Socket's defaults
#                 a second time after it ("Socket again"), so both paths have
#                 two runs (sweep_table.py --summary then also compares each
#                 one's faster run per size)
#   SWEEP_RAW     1: raw libfabric in the same call, first: run-gpu.sh's
#                 netns-perf stage (nccl-fabric-perf --compare, the plugin's
#                 own provider choice) one way and both ways at once, paths
#                 alternating in 3 rounds, between two emulated hosts and (when
#                 SWEEP_LINKS has it) over loopback, at SWEEP_RAW_SIZES
#                 (default 128K,2M,8M,64M); table: sweep_table.py --raw
#                 netns-perf.csv, also at the end of sweep.txt
#   SWEEP_MIN SWEEP_MAX SWEEP_FACTOR SWEEP_ITERS SWEEP_WARMUP SWEEP_COLLS
#                 the sizes and collectives of each run (default 8 B to
#                 128 MiB by 4, 5 iterations after 2, all_reduce, all_gather,
#                 alltoall, sendrecv)
#   FABRIC_NETNS_RATE  the emulated links' rate (default 25gbit)
#   TIME_BUDGET   seconds for the whole sweep (default 0: no limit): each
#                 run gets what is left, and the runs that no longer fit are
#                 skipped (reported as failed), so a job limited to 10 minutes
#                 keeps what finished
#   FABRIC_BENCH_OUT   output folder: bench.csv (rows tagged
#                 sweep-<link>-r<ranks>-<knob>), summary.txt, sweep.txt
#
# Path names in the CSV: fabric-default-sweep-<link>-r<N>-<knob>[-netns-RATE]
# and nccl-socket[-best]-sweep-<link>-r<N>[-netns-RATE]. The table is
# bench/sweep_table.py's.
set -u -o pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${PYTHON:-python3}

if [[ ${1:-} == --table ]]; then
	shift
	exec "$PYTHON" "$REPO/bench/sweep_table.py" "$@"
fi
[[ $# -eq 0 ]] || { sed -n '2,/^set -u/s/^# \{0,1\}//p' "$0" | sed '$d'; exit 2; }

# Each knob is one of the plugin's settings moved away from its default, so
# the table shows, per size, whether a default is the fastest setting.
KNOBS=${SWEEP_KNOBS-"rails1:NCCL_FABRIC_RAILS=1;rails2:NCCL_FABRIC_RAILS=2;rma0:NCCL_FABRIC_RMA=0;eager256k:NCCL_FABRIC_EAGER_MAX=262144;eager1m:NCCL_FABRIC_EAGER_MAX=1048576;stripe1m:NCCL_FABRIC_STRIPE_MIN=1048576"}
export SWEEP_MIN=${SWEEP_MIN:-8} SWEEP_MAX=${SWEEP_MAX:-128M} SWEEP_FACTOR=${SWEEP_FACTOR:-4}
export SWEEP_ITERS=${SWEEP_ITERS:-5} SWEEP_WARMUP=${SWEEP_WARMUP:-2}
export SWEEP_COLLS=${SWEEP_COLLS:-all_reduce,all_gather,alltoall,sendrecv}
export FABRIC_NETNS_RATE=${FABRIC_NETNS_RATE-25gbit}
export BENCH_MODE=multi
OUT=${FABRIC_BENCH_OUT:-$REPO/bench/out/sweep-$(date +%Y%m%d-%H%M%S)}
export FABRIC_BENCH_OUT=$OUT
mkdir -p "$OUT"
base_extra=${FABRIC_EXTRA_ENV:-}

# run-gpu.sh reads TIME_BUDGET per invocation: each gets what is left of ours
budget=${TIME_BUDGET:-0}
unset TIME_BUDGET
deadline=$((budget > 0 ? SECONDS + budget : 0))
left() { # TIME_BUDGET for the next run-gpu.sh (0: no limit); 1 when none is left
	((deadline == 0)) && { echo 0; return 0; }
	local l=$((deadline - SECONDS))
	((l >= 30)) || { echo "sweep.sh: TIME_BUDGET=$budget spent; the rest is skipped" >&2; return 1; }
	echo $l
}

rc=0
if [[ ${SWEEP_RAW:-0} == 1 ]]; then
	loop=0
	[[ " ${SWEEP_LINKS:-netns loopback} " == *" loopback "* ]] && loop=1
	for args in "--rounds 3" "--bidir --rounds 3"; do
		tb=$(left) || { rc=1; break; }
		TIME_BUDGET=$tb NETNS_PERF_PROVIDERS=default NETNS_PERF_LOOPBACK=$loop \
			NETNS_PERF_SIZES=${SWEEP_RAW_SIZES:-128K,2M,8M,64M} NETNS_PERF_ARGS="$args" \
			"$REPO/bench/run-gpu.sh" netns-perf || rc=1
	done
fi
for link in ${SWEEP_LINKS:-netns loopback}; do
	netns=0
	[[ $link == netns ]] && netns=1
	for ranks in ${SWEEP_RANKS:-2 8}; do
		setup=sweep-$link-r$ranks
		# "again" is the default run a second time: the settings it "beats"
		# the default at show the noise of this machine
		# Socket runs between the default's two runs (and, with
		# SWEEP_SOCKET=2, once more after the second), so a slow stretch of
		# the machine falls on both paths alike
		IFS=';' read -r -a knobs <<<"default:;$KNOBS;socket:;again:;socket-again:"
		for k in "${knobs[@]}"; do
			[[ -n $k ]] || continue # SWEEP_KNOBS="": the default (twice) only
			name=${k%%:*} words=${k#*:}
			socket=${SWEEP_SOCKET:-1}
			if [[ $name == socket ]]; then
				[[ $socket == 1 || $socket == 2 ]] || continue
				tb=$(left) || { rc=1; break 3; }
				TIME_BUDGET=$tb FABRIC_NETNS=$netns FABRIC_VHOSTS=$ranks PATH_TAG=$setup \
					"$REPO/bench/run-gpu.sh" bench-socket bench-socket-best || rc=1
				continue
			elif [[ $name == socket-again ]]; then
				[[ $socket == 2 ]] || continue
				tb=$(left) || { rc=1; break 3; }
				TIME_BUDGET=$tb FABRIC_NETNS=$netns FABRIC_VHOSTS=$ranks PATH_TAG=$setup-again \
					"$REPO/bench/run-gpu.sh" bench-socket || rc=1
				continue
			fi
			tb=$(left) || { rc=1; break 3; }
			TIME_BUDGET=$tb FABRIC_NETNS=$netns FABRIC_VHOSTS=$ranks PATH_TAG=$setup-$name \
				FABRIC_EXTRA_ENV="$base_extra ${words//,/ }" \
				"$REPO/bench/run-gpu.sh" bench-fabric-default || rc=1
		done
	done
done
"$PYTHON" "$REPO/bench/sweep_table.py" "$OUT/bench.csv" | tee "$OUT/sweep.txt"
if [[ -s $OUT/netns-perf.csv ]]; then
	{
		echo
		echo "## the plugin against raw libfabric in the same call"
		echo
		"$PYTHON" "$REPO/bench/sweep_table.py" --raw "$OUT/netns-perf.csv"
	} | tee -a "$OUT/sweep.txt"
fi
exit $rc
