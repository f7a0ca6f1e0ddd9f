#!/usr/bin/env python3
"""sweep_table.py - bench/sweep.sh's table: per setup (link, ranks),
collective and size, the plugin's default time, the fastest knob setting and
its time, and NCCL Socket's defaults and best tuning, from one run's CSV.

Ratios are times over the default's: below 1 the other path is faster.
"vs Socket" is Socket's time over the default's (above 1: the plugin ahead).
A row with a data error is left out and counted. Standard library only.

  sweep_table.py bench.csv [bench.csv ...]
  sweep_table.py --summary bench.csv [...]   one markdown row per setup and
      collective: the plugin's defaults against Socket's defaults (worst and
      geometric mean of the time ratio over every size) and against Socket's
      best tuning (worst from 8 MiB), and the fastest knob where one beat the
      default by more than the noise margin at three sizes or more; where
      Socket's defaults ran twice too (sweep.sh's SWEEP_SOCKET=2), the same
      with each path's faster run per size ("best of two runs each")
  sweep_table.py --knobs [--from SIZE] bench.csv [...]   per setup and
      collective, each setting's time over the default's, geometric mean over
      every size and over sizes from SIZE (default 32M); "again" is the
      noise floor
  sweep_table.py --raw netns-perf.csv [...]   the plugin against raw
      libfabric in the same call (sweep.sh's SWEEP_RAW=1: run-gpu.sh's
      netns-perf stage): per link, provider, direction and size, each path's
      GB/s and plugin/raw (the median of the rounds' own ratios where the
      paths alternated in rounds)
"""

import csv
import math
import re
import sys
from collections import defaultdict

FABRIC = re.compile(r"^fabric-default-sweep-(\w+)-r(\d+)-([\w.]+?)(-netns(-[\w.]+)?)?$")
SOCKET = re.compile(r"^nccl-socket(-best)?-sweep-(\w+)-r(\d+)(-again)?(-netns(-[\w.]+)?)?$")
# within this of the default, a setting is not called faster (noise)
NOISE = 0.10


def faster(setting, t, default):
    """A plugin setting other than the default, faster than it beyond NOISE."""
    return (default is not None and not setting.startswith("Socket") and setting != "default"
            and t < default * (1 - NOISE))


def size_label(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def load(paths):
    # times[(link, ranks)][coll][bytes][setting] = µs
    times = defaultdict(lambda: defaultdict(lambda: defaultdict(dict)))
    bad = 0
    for p in paths:
        with open(p, newline="") as f:
            for r in csv.DictReader(f):
                m, s = FABRIC.match(r["path"]), SOCKET.match(r["path"])
                if m:
                    key, setting = (m.group(1), int(m.group(2))), m.group(3)
                elif s:
                    key = (s.group(2), int(s.group(3)))
                    setting = ("Socket best" if s.group(1) else "Socket") + (" again" if s.group(4) else "")
                else:
                    continue
                if int(r.get("errors") or 0):
                    bad += 1
                    continue
                times[key][r["collective"]][int(r["bytes"])][setting] = float(r["time_us"])
    return times, bad


def summary(times):
    # where Socket ran twice too, each path's faster run per size against the
    # other's ("best of two"): a slow moment of one run then decides less
    paired = any(row.get("Socket again") and row.get("again")
                 for colls in times.values() for sizes in colls.values() for row in sizes.values())
    extra = " vs Socket, best of two runs each: worst (size) | geomean |" if paired else ""
    print("| link, ranks | collective | vs Socket: worst (size) | vs Socket: geomean "
          "| vs Socket best from 8 MiB: worst (size) | faster knobs (sizes) |" + extra)
    print("|---|---|---|---|---|---|" + ("---|---|" if paired else ""))
    for (link, ranks) in sorted(times):
        colls = times[(link, ranks)]
        for coll in sorted(colls):
            worst = wbest = wpair = None
            logs, plogs = [], []
            wins = defaultdict(int)
            for n in sorted(colls[coll]):
                row = colls[coll][n]
                d = row.get("default")
                if not d:
                    continue
                for k, v in row.items():
                    if faster(k, v, d):
                        wins[k] += 1
                if row.get("Socket"):
                    r = row["Socket"] / d
                    logs.append(math.log(r))
                    if worst is None or r < worst[0]:
                        worst = (r, n)
                if row.get("Socket best") and n >= 8 << 20:
                    r = row["Socket best"] / d
                    if wbest is None or r < wbest[0]:
                        wbest = (r, n)
                if row.get("again") and row.get("Socket") and row.get("Socket again"):
                    r = min(row["Socket"], row["Socket again"]) / min(d, row["again"])
                    plogs.append(math.log(r))
                    if wpair is None or r < wpair[0]:
                        wpair = (r, n)
            f = lambda w: f"{w[0]:.2f} ({size_label(w[1])})" if w else "-"
            gm = lambda xs: f"{math.exp(sum(xs) / len(xs)):.2f}" if xs else "-"
            k = ", ".join(f"{k} ({c})" for k, c in sorted(wins.items(), key=lambda x: -x[1]) if c >= 3)
            print(f"| {link}, {ranks} | {coll} | {f(worst)} | {gm(logs)} | {f(wbest)} | {k or '-'} |"
                  + (f" {f(wpair)} | {gm(plogs)} |" if paired else ""))


def parse_size(s):
    m = re.fullmatch(r"(\d+)([KMG]?)", s)
    if not m:
        raise ValueError(f"bad size {s!r}")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


def knob_ratios(times, start):
    def gm(xs):
        return f"{math.exp(sum(map(math.log, xs)) / len(xs)):.2f}" if xs else "-"
    settings = sorted({k for colls in times.values() for sizes in colls.values()
                       for row in sizes.values() for k in row if k != "default"},
                      key=lambda k: (k.startswith("Socket"), k != "again", k))
    print(f"time over the default's, geometric mean: every size / from {size_label(start)}\n")
    print("| link, ranks | collective | " + " | ".join(settings) + " |")
    print("|---|---|" + "---|" * len(settings))
    for (link, ranks) in sorted(times):
        for coll, sizes in sorted(times[(link, ranks)].items()):
            cells = []
            for k in settings:
                rs = [(n, row[k] / row["default"]) for n, row in sizes.items()
                      if row.get("default") and row.get(k)]
                cells.append(f"{gm([r for _, r in rs])} / {gm([r for n, r in rs if n >= start])}")
            print(f"| {link}, {ranks} | {coll} | " + " | ".join(cells) + " |")


def raw_table(paths):
    """nccl-fabric-perf --csv rows with the link first (netns-perf.csv)."""
    rows = defaultdict(dict)
    for p in paths:
        with open(p, newline="") as f:
            for r in csv.DictReader(f):
                path = r.get("path", "")
                both = path.endswith("-bidir")
                kind = path[:-len("-bidir")] if both else path
                if kind not in ("plugin", "raw", "raw-write"):
                    continue
                key = (r["link"], r["provider"], "both ways" if both else "one way",
                       int(r["bytes"]))
                rows[key][kind] = float(r["gbps"])
                if kind == "plugin" and r.get("vs_raw"):
                    rows[key]["ratio"] = float(r["vs_raw"])
    if not rows:
        print("no plugin/raw rows (nccl-fabric-perf --compare --csv, link first)",
              file=sys.stderr)
        return 1
    print("| link | provider | direction | size | plugin GB/s | raw GB/s | plugin/raw |")
    print("|---|---|---|---|---|---|---|")
    ratios = []
    for key in sorted(rows):
        v = rows[key]
        raw = v.get("raw", v.get("raw-write"))
        ratio = v.get("ratio")
        if ratio is None and raw and v.get("plugin"):
            ratio = v["plugin"] / raw
        g = lambda x, d=3: f"{x:.{d}f}" if x is not None else "-"
        if ratio is not None:
            ratios.append((ratio, key))
        print(f"| {key[0]} | {key[1]} | {key[2]} | {size_label(key[3])} | {g(v.get('plugin'))} "
              f"| {g(raw)} | {g(ratio, 2)} |")
    if ratios:
        worst = min(ratios)
        print(f"\nworst plugin/raw: {worst[0]:.2f} ({worst[1][0]}, {worst[1][2]}, "
              f"{size_label(worst[1][3])})")
    return 0


def main(argv):
    if len(argv) > 1 and argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(argv) > 1 and argv[1] == "--knobs":
        args, start = argv[2:], 32 << 20
        if len(args) > 1 and args[0] == "--from":
            try:
                start, args = parse_size(args[1]), args[2:]
            except ValueError as e:
                print(f"--from: {e} (a number with K, M or G)", file=sys.stderr)
                return 2
        times, bad = load(args)
        knob_ratios(times, start)
        if bad:
            print(f"\n{bad} rows with data errors left out")
        return 0
    if len(argv) > 1 and argv[1] == "--raw":
        return raw_table(argv[2:])
    if len(argv) > 1 and argv[1] == "--summary":
        times, bad = load(argv[2:])
        summary(times)
        if bad:
            print(f"\n{bad} rows with data errors left out")
        return 0
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    times, bad = load(argv[1:])
    if not times:
        print("no sweep rows (paths fabric-default-sweep-* / nccl-socket*-sweep-*)", file=sys.stderr)
        return 1
    for (link, ranks) in sorted(times):
        colls = times[(link, ranks)]
        print(f"\n## {link}, {ranks} ranks")
        wins = defaultdict(list)
        for coll in sorted(colls):
            print(f"\n{coll}: µs")
            print(f"{'size':>6} {'default':>9} {'fastest':>18} {'ratio':>6} "
                  f"{'Socket':>9} {'best':>9} {'vs Socket':>9} {'vs best':>8}")
            worst = None
            for n in sorted(colls[coll]):
                row = colls[coll][n]
                d = row.get("default")
                knobs = {k: v for k, v in row.items() if not k.startswith("Socket")}
                if not knobs:
                    continue
                fk = min(knobs, key=knobs.get)
                sk, sb = row.get("Socket"), row.get("Socket best")
                if faster(fk, knobs[fk], d):
                    wins[fk].append(f"{coll} {size_label(n)} {knobs[fk] / d:.2f}")
                vs = sk / d if d and sk else None
                if vs is not None and (worst is None or vs < worst[0]):
                    worst = (vs, n)
                f = lambda v: f"{v:9.1f}" if v is not None else f"{'-':>9}"
                r = lambda v: f"{v:.2f}" if v is not None else "-"
                print(f"{size_label(n):>6} {f(d)} {fk + ' ' + format(knobs[fk], '.1f'):>18} "
                      f"{r(knobs[fk] / d if d else None):>6} {f(sk)} {f(sb)} {r(vs):>9} "
                      f"{r(sb / d if d and sb else None):>8}")
            if worst:
                print(f"worst default vs Socket: {worst[0]:.2f} at {size_label(worst[1])}")
        print(f"\nfaster than the default by more than {NOISE:.0%} ({link}, {ranks} ranks):")
        for k in sorted(wins):
            print(f"  {k}: {len(wins[k])} sizes: " + ", ".join(wins[k]))
        if not wins:
            print("  none")
    if bad:
        print(f"\n{bad} rows with data errors left out")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
