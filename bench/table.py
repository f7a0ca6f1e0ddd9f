#!/usr/bin/env python3
"""table.py - the README's performance table from nccl_bench CSVs.

One row per setup and operation: times (µs) up to 8 MiB, bus bandwidth
(GB/s) above; columns are the plugin's paths and NCCL Socket's, each setup's
paths named by a suffix (run-gpu.sh's PATH_TAG, plus -netns-<rate> for the
emulated cluster). Ratios compare the plugin's default path with Socket's
defaults and with Socket's best tuning (time: lower is better, so the ratio
is Socket's time over the plugin's; busbw: the plugin's over Socket's; above
1 the plugin is ahead either way). Where a CSV holds a size twice, the last
row counts. Standard library only.

  table.py CSV [CSV ...] > table.md
"""

import csv
import sys

# (label, path suffix, ranks): the setups of the final run
SETUPS = [
    ("NCCL 2.30.7, 2 ranks, loopback", "n230-r2", 2),
    ("NCCL 2.30.7, 2 ranks, 25 Gbit/s hosts", "n230-r2-netns-25gbit", 2),
    ("NCCL 2.30.7, 8 ranks, loopback", "n230-r8", 8),
    ("NCCL 2.28.9, 2 ranks, loopback", "n228-r2", 2),
    ("NCCL 2.28.9, 8 ranks, loopback", "n228-r8", 8),
]
# (collective, bytes): time rows, then busbw rows
TIMES = [("all_reduce", 8), ("all_reduce", 32 << 10), ("all_reduce", 128 << 10),
         ("all_reduce", 2 << 20), ("all_reduce", 8 << 20), ("sendrecv", 8 << 10)]
BWS = [("all_reduce", 512 << 20), ("all_gather", 512 << 20), ("reduce_scatter", 512 << 20),
       ("alltoall", 512 << 20), ("sendrecv", 512 << 20)]
COLS = [("plugin", "fabric-default"), ("plugin, native tcp", "fabric-tcp-native"),
        ("Socket", "nccl-socket"), ("Socket best", "nccl-socket-best")]


def size_label(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    rows = {}
    for path in sys.argv[1:]:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                key = (r["path"], r["collective"], int(r["bytes"]))
                rows[key] = (float(r["time_us"]), float(r["busbw_gbps"]), int(r["errors"]))
    print("| setup | operation | " + " | ".join(c[0] for c in COLS) +
          " | vs Socket | vs Socket best |")
    print("|---|---|" + "---|" * (len(COLS) + 2))
    for label, suffix, _ in SETUPS:
        for coll, size in TIMES + BWS:
            is_time = (coll, size) in TIMES
            vals = []
            for _, prefix in COLS:
                v = rows.get((f"{prefix}-{suffix}", coll, size))
                vals.append(None if v is None else (v[0] if is_time else v[1]))
            if vals[0] is None:
                continue
            cells = ["" if v is None else (f"{v:.0f}" if is_time else f"{v:.2f}") for v in vals]

            def ratio(other):
                if other is None or not other or not vals[0]:
                    return ""
                return f"{(other / vals[0]) if is_time else (vals[0] / other):.2f}"

            what = f"{coll} {size_label(size)}" + (", µs" if is_time else ", busbw")
            print(f"| {label} | {what} | " + " | ".join(cells) +
                  f" | {ratio(vals[2])} | {ratio(vals[3])} |")
    bad = sum(v[2] for v in rows.values())
    print(f"\n{len(rows)} results, {bad} with data errors.")


if __name__ == "__main__":
    main()
