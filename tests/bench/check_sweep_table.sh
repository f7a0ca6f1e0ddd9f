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
# --raw: netns-perf.csv (link first); with rounds the plugin row's vs_raw (the
# median of the rounds' ratios) is the ratio, not the ratio of the medians
{
	echo "link,path,provider,device,version,bytes,iterations,window,seconds,gbps,rails,vs_raw"
	echo "netns-25gbit,plugin,\"tcp\",\"eth0\",12,131072,100,8,0.1,1.5000,2,0.9000"
	echo "netns-25gbit,raw,\"tcp\",\"eth0\",,131072,100,8,0.1,1.4000,,"
	echo "netns-25gbit,plugin-bidir,\"tcp\",\"eth0\",12,131072,100,8,0.1,1.2000,2,1.1000"
	echo "netns-25gbit,raw-bidir,\"tcp\",\"eth0\",,131072,100,8,0.1,1.0000,,"
	echo "loopback,plugin,\"tcp\",\"lo\",12,2097152,100,8,0.1,3.0000,2,"
	echo "loopback,raw,\"tcp\",\"lo\",,2097152,100,8,0.1,4.0000,,"
} >"$tmp"
out=$(python3 "$t" --raw "$tmp") || fail=1
expect "--raw, one way" "$out" "| netns-25gbit | tcp | one way | 128K | 1.500 | 1.400 | 0.90 |"
expect "--raw, both ways" "$out" "| netns-25gbit | tcp | both ways | 128K | 1.200 | 1.000 | 1.10 |"
expect "--raw, no vs_raw" "$out" "| loopback | tcp | one way | 2M | 3.000 | 4.000 | 0.75 |"
expect "--raw, worst" "$out" "worst plugin/raw: 0.75 (loopback, one way, 2M)"
out=$(python3 "$t" --help) || fail=1
expect "--help" "$out" "sweep_table.py --summary bench.csv"
out=$(python3 "$t" --knobs --from 1X /dev/null 2>&1) && { echo "FAIL: a bad size was accepted"; fail=1; }
((fail)) || echo "PASS: sweep_table.py"
exit $fail
