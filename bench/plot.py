#!/usr/bin/env python3
"""plot.py - plot nccl_bench CSVs: bus bandwidth against message size.

Reads one or more CSVs written by nccl_bench (header
path,collective,bytes,time_us,algbw_gbps,busbw_gbps,errors,nranks,mode),
keeps the last row for each (path, collective, bytes, nranks, mode), and draws
one subplot per collective with one line per path (log2 size axis). Rows with
data errors are marked with a red x. Optionally writes the merged rows as one
CSV and prints a compact table. Needs matplotlib only.

  plot.py -o busbw.png [--merged-csv all.csv] [--table] A.csv [B.csv ...]
"""

import argparse
import csv
import math
import sys

HEADER = ["path", "collective", "bytes", "time_us", "algbw_gbps", "busbw_gbps", "errors", "nranks", "mode"]
COLL_ORDER = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall", "sendrecv"]
TABLE_SIZES = [1 << 20, 16 << 20, 64 << 20, 1 << 30]


def size_label(nbytes):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if nbytes >= 1 << shift:
            v = nbytes / (1 << shift)
            return f"{v:g}{unit}"
    return f"{nbytes:g}"


def read_rows(paths):
    """Rows from every CSV, in order, as dicts with typed values. Exits on a bad file."""
    rows = []
    for path in paths:
        try:
            f = open(path, newline="")
        except OSError as e:
            sys.exit(f"plot.py: cannot open {path}: {e}")
        with f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header != HEADER:
                sys.exit(f"plot.py: {path}: header {header} is not\n  {','.join(HEADER)}")
            for lineno, rec in enumerate(reader, start=2):
                if not rec:
                    continue
                if len(rec) != len(HEADER):
                    sys.exit(f"plot.py: {path}:{lineno}: {len(rec)} fields, expected {len(HEADER)}")
                r = dict(zip(HEADER, rec))
                try:
                    r["bytes"] = int(r["bytes"])
                    r["errors"] = int(r["errors"])
                    r["nranks"] = int(r["nranks"])
                    for k in ("time_us", "algbw_gbps", "busbw_gbps"):
                        r[k] = float(r[k])
                except ValueError as e:
                    sys.exit(f"plot.py: {path}:{lineno}: {e}")
                rows.append(r)
    return rows


def merge(rows):
    """Last row wins per (path, collective, bytes, nranks, mode); sorted output."""
    keyed = {}
    for r in rows:
        keyed[(r["path"], r["collective"], r["bytes"], r["nranks"], r["mode"])] = r
    order = {c: i for i, c in enumerate(COLL_ORDER)}
    return sorted(keyed.values(), key=lambda r: (r["path"], r["mode"], r["nranks"],
                                                 order.get(r["collective"], 99), r["collective"], r["bytes"]))


def write_csv(rows, path):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(HEADER)
        for r in rows:
            w.writerow([r["path"], r["collective"], r["bytes"], f"{r['time_us']:.3f}", f"{r['algbw_gbps']:.4f}",
                        f"{r['busbw_gbps']:.4f}", r["errors"], r["nranks"], r["mode"]])


def series_key(r, multi_mode, multi_n):
    label = r["path"]
    extra = []
    if multi_mode:
        extra.append(r["mode"])
    if multi_n:
        extra.append(f"{r['nranks']} ranks")
    return label + (f" ({', '.join(extra)})" if extra else "")


def print_table(rows, metric, out=sys.stdout):
    """Per path and collective, the metric at 1M, 16M, 64M, 1G: at the column's size, or
    the largest size below it within a factor 4 (sweeps by 4 from 8 B step past them)."""
    multi_mode = len({r["mode"] for r in rows}) > 1
    multi_n = len({r["nranks"] for r in rows}) > 1
    groups = {}
    for r in rows:
        groups.setdefault((series_key(r, multi_mode, multi_n), r["collective"]), []).append(r)
    order = {c: i for i, c in enumerate(COLL_ORDER)}
    cols = [size_label(s) for s in TABLE_SIZES]
    print(f"{'path':<28} {'collective':<15}" + "".join(f"{c:>9}" for c in cols) + f"{'errors':>8}", file=out)
    for (label, coll), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 99))):
        by_size = {r["bytes"]: r for r in rs}
        cells = []
        for s in TABLE_SIZES:
            fit = [b for b in by_size if b <= s and b * 4 > s]  # off a power of two: 3 ranks, sweeps by 4
            cells.append(f"{by_size[max(fit)][metric]:9.2f}" if fit else f"{'-':>9}")
        errs = sum(r["errors"] for r in rs)
        print(f"{label:<28} {coll:<15}" + "".join(cells) + f"{errs:8d}", file=out)
    unit = "µs" if metric == "time_us" else "GB/s"
    print(f"({metric} in {unit} at the largest size <= the column's, within a factor 4; "
          "errors summed over all sizes)", file=out)


def plot(rows, out_png, metric, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullLocator

    colls = [c for c in COLL_ORDER if any(r["collective"] == c for r in rows)]
    colls += sorted({r["collective"] for r in rows} - set(colls))
    multi_mode = len({r["mode"] for r in rows}) > 1
    multi_n = len({r["nranks"] for r in rows}) > 1
    labels = sorted({series_key(r, multi_mode, multi_n) for r in rows})
    cmap = plt.get_cmap("tab10")
    color = {lab: cmap(i % 10) for i, lab in enumerate(labels)}

    ncols = min(3, len(colls))
    nrows = math.ceil(len(colls) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 3.8 * nrows), squeeze=False)
    lo = min(r["bytes"] for r in rows)
    hi = max(r["bytes"] for r in rows)
    # every power of two for short ranges, else every power of four on even
    # exponents, so 1K, 1M and 1G (2^10, 2^20, 2^30) are always labelled
    e0, e1 = math.floor(math.log2(lo)), math.ceil(math.log2(hi))
    ticks = [2 ** e for e in range(e0, e1 + 1) if e1 - e0 <= 12 or e % 2 == 0]
    ylabel = {"busbw_gbps": "bus bandwidth (GB/s)", "algbw_gbps": "algorithm bandwidth (GB/s)",
              "time_us": "time (µs)"}[metric]

    for idx, coll in enumerate(colls):
        ax = axes[idx // ncols][idx % ncols]
        for lab in labels:
            pts = sorted((r["bytes"], r[metric], r["errors"]) for r in rows
                         if r["collective"] == coll and series_key(r, multi_mode, multi_n) == lab)
            if not pts:
                continue
            xs = [p[0] for p in pts]
            ys = [p[1] for p in pts]
            ax.plot(xs, ys, marker="o", markersize=3, linewidth=1.4, color=color[lab], label=lab)
            bad = [(x, y) for x, y, e in pts if e > 0]
            if bad:
                ax.plot([b[0] for b in bad], [b[1] for b in bad], linestyle="none", marker="x",
                        markersize=9, color="red", label=f"{lab}: data errors")
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticks(ticks)
        ax.set_xticklabels([size_label(t) for t in ticks], fontsize=7, rotation=45)
        if metric == "time_us":
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        ax.set_title(coll)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    for idx in range(len(colls), nrows * ncols):
        axes[idx // ncols][idx % ncols].set_visible(False)
    nr = sorted({r["nranks"] for r in rows})
    fig.suptitle(title or f"nccl_bench, {'/'.join(map(str, nr))} ranks, float32")
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("csvs", nargs="+", help="CSV files from nccl_bench --csv")
    p.add_argument("-o", "--output", help="PNG to write (default: no plot)")
    p.add_argument("--merged-csv", help="also write the merged rows to this CSV")
    p.add_argument("--metric", default="busbw_gbps", choices=["busbw_gbps", "algbw_gbps", "time_us"])
    p.add_argument("--paths", help="comma list: keep only these paths")
    p.add_argument("--mode", choices=["single", "multi"], help="keep only rows of this mode")
    p.add_argument("--title")
    p.add_argument("--table", action="store_true", help="print a table at 1M/16M/64M/1G")
    args = p.parse_args(argv)

    rows = read_rows(args.csvs)
    if args.paths:
        keep = {x.strip() for x in args.paths.split(",")}
        rows = [r for r in rows if r["path"] in keep]
    if args.mode:
        rows = [r for r in rows if r["mode"] == args.mode]
    rows = merge(rows)
    if not rows:
        sys.exit("plot.py: no rows to plot (empty CSVs, or filters removed everything)")
    if args.merged_csv:
        write_csv(rows, args.merged_csv)
        print(f"plot.py: {len(rows)} rows -> {args.merged_csv}")
    if args.table:
        print_table(rows, args.metric)
    if args.output:
        plot(rows, args.output, args.metric, args.title)
        print(f"plot.py: plot -> {args.output}")
    if not (args.output or args.merged_csv or args.table):
        print("plot.py: nothing to do (give -o, --merged-csv or --table)", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
