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
out=$(python3 "$t" --help) || fail=1
expect "--help" "$out" "sweep_table.py --summary bench.csv"
out=$(python3 "$t" --knobs --from 1X /dev/null 2>&1) && { echo "FAIL: a bad size was accepted"; fail=1; }
((fail)) || echo "PASS: sweep_table.py"
exit $fail
