#!/usr/bin/env bash
# bench/sweep_table.py on committed sweeps gives the ratios their records
# quote: the knob view and the summary against Socket.
set -u
repo=$1
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
t=$repo/bench/sweep_table.py
fail=0
expect() { # what, output, fixed string
	if ! grep -qF -- "$3" <<<"$2"; then
		echo "FAIL: $1: no line with '$3' in:"
		echo "$2"
		fail=1
	fi
}
out=$(python3 "$t" --knobs "$repo/bench/results/spill-2026-12-04.csv") || fail=1
expect "--knobs" "$out" "| netns, 8 | alltoall | 1.95 / 1.25 | 2.39 / 1.82 | 2.56 / 1.17 | 1.65 / 1.88 |"
out=$(python3 "$t" --knobs --from 8M "$repo/bench/results/spill-2026-12-04.csv") || fail=1
expect "--knobs --from 8M" "$out" "every size / from 8M"
out=$(python3 "$t" --summary "$repo/bench/results/sweep-2026-12-04-final.csv") || fail=1
expect "--summary" "$out" "| netns, 8 | all_gather |"
expect "--summary geomean" "$out" "| 1.64 |"
out=$(python3 "$t" --summary "$repo/bench/results/sweep-2026-12-07-nccl230.csv") || fail=1
expect "--summary (NCCL 2.30.7)" "$out" "| netns, 8 | all_reduce | 0.06 (8K) | 0.41 | 1.82 (32M) | again (8) |"
# Socket run twice (SWEEP_SOCKET=2): each path's faster run per size
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
{
	echo "path,collective,bytes,time_us,algbw_gbps,busbw_gbps,errors,nranks,mode"
	echo "fabric-default-sweep-netns-r2-default-netns-25gbit,sendrecv,8,10.0,0,0,0,2,multi"
	echo "fabric-default-sweep-netns-r2-again-netns-25gbit,sendrecv,8,8.0,0,0,0,2,multi"
	echo "nccl-socket-sweep-netns-r2-netns-25gbit,sendrecv,8,9.0,0,0,0,2,multi"
	echo "nccl-socket-sweep-netns-r2-again-netns-25gbit,sendrecv,8,12.0,0,0,0,2,multi"
	echo "fabric-default-sweep-netns-r2-default-netns-25gbit,sendrecv,1024,20.0,0,0,0,2,multi"
	echo "fabric-default-sweep-netns-r2-again-netns-25gbit,sendrecv,1024,30.0,0,0,0,2,multi"
	echo "nccl-socket-sweep-netns-r2-netns-25gbit,sendrecv,1024,40.0,0,0,0,2,multi"
	echo "nccl-socket-sweep-netns-r2-again-netns-25gbit,sendrecv,1024,15.0,0,0,0,2,multi"
} >"$tmp"
out=$(python3 "$t" --summary "$tmp") || fail=1
# single runs: 9/10 and 40/20; best of two: 9/8 and 15/20
expect "--summary, Socket twice" "$out" "| netns, 2 | sendrecv | 0.90 (8) | 1.34 | - | - | 0.75 (1K) | 0.92 |"
out=$(python3 "$t" --knobs "$tmp") || fail=1
expect "--knobs, Socket again" "$out" "| again | Socket | Socket again |"
out=$(python3 "$t" --help) || fail=1
expect "--help" "$out" "sweep_table.py --summary bench.csv"
out=$(python3 "$t" --knobs --from 1X /dev/null 2>&1) && { echo "FAIL: a bad size was accepted"; fail=1; }
((fail)) || echo "PASS: sweep_table.py"
exit $fail
