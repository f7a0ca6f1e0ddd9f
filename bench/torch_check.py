#!/usr/bin/env python3
"""torch_check.py - check PyTorch collectives over NCCL, exactly.

Spawns one process per GPU (no torchrun; rendezvous over tcp://127.0.0.1) and
runs all_reduce, all_gather, reduce_scatter and broadcast over several sizes
and dtypes. Inputs are small integers (-8..8, from a hash of rank and index),
exact in every dtype tested, so each result is compared bit for bit with the
expected tensor computed on the GPU without communication.

Prints PASS/FAIL per case and a final 'N passed, N failed' line; exits 1 on any
failure, 2 on a setup error. It sets no NCCL_* variable: whatever the caller
exported (NCCL_NET_PLUGIN, NCCL_NET=Fabric, ...) is what NCCL sees.
"""

import argparse
import json
import os
import socket
import sys
import tempfile
import time
import traceback

DTYPES = ("float32", "float16", "bfloat16", "int32")
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
ELEM_SIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "int32": 4}


def parse_size(text):
    """'1K' -> 1024, '64M', '1G', '4096'; binary multiples."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = 1
    if t and t[-1] in "KMG":
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[t[-1]]
        t = t[:-1]
    if not t.isdigit() or int(t) <= 0:
        raise argparse.ArgumentTypeError(f"bad size {text!r} (use e.g. 1K, 1M, 64M)")
    return int(t) * mult


def size_label(nbytes):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift}{unit}"
    return str(nbytes)


def parse_list(text, allowed, what):
    items = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in items if x not in allowed]
    if bad or not items:
        raise argparse.ArgumentTypeError(f"bad {what} {bad or text!r}; choose from {','.join(allowed)}")
    return items


def make_cases(ops, dtypes, sizes, world):
    """The case list, identical in every process: (name, op, dtype, nbytes, root)."""
    cases = []
    for op in ops:
        for dtype in dtypes:
            for nbytes in sizes:
                roots = [0, world - 1] if op == "broadcast" and world > 1 else [None]
                for root in roots:
                    name = f"{op:<14} {dtype:<8} {size_label(nbytes):>5}"
                    if root is not None:
                        name += f" root {root}"
                    cases.append((name, op, dtype, nbytes, root))
    return cases


# ----------------------------------------------------------------- worker side

def pattern(torch, rank, numel, dtype, device):
    """Element i of rank r: ((mix(i, r) >> 7) % 17) - 8, exact in all dtypes."""
    i = torch.arange(numel, dtype=torch.int64, device=device)
    h = (i * 2654435761 + (rank + 1) * 40503) & 0xFFFFFFFF
    h = h ^ (h >> 13)
    return ((h >> 7) % 17 - 8).to(dtype)


def run_case(torch, dist, rank, world, case, device):
    """Runs one case. Returns (ok, detail)."""
    _, op, dtname, nbytes, root = case
    dtype = getattr(torch, dtname)
    numel = nbytes // ELEM_SIZE[dtname]
    numel -= numel % world  # all_gather / reduce_scatter split evenly
    if numel == 0:
        return False, f"size {nbytes} B holds fewer {dtname} elements than ranks"
    acc = torch.int64 if dtname == "int32" else torch.float32

    if op == "all_reduce":
        t = pattern(torch, rank, numel, dtype, device)
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        want = sum(pattern(torch, q, numel, acc, device) for q in range(world)).to(dtype)
        got = t
    elif op == "all_gather":
        part = numel // world
        got = torch.full((numel,), -99, dtype=dtype, device=device)
        dist.all_gather_into_tensor(got, pattern(torch, rank, part, dtype, device))
        want = torch.cat([pattern(torch, q, part, dtype, device) for q in range(world)])
    elif op == "reduce_scatter":
        part = numel // world
        got = torch.full((part,), -99, dtype=dtype, device=device)
        dist.reduce_scatter_tensor(got, pattern(torch, rank, numel, dtype, device), op=dist.ReduceOp.SUM)
        full = sum(pattern(torch, q, numel, acc, device) for q in range(world))
        want = full[rank * part:(rank + 1) * part].to(dtype)
    elif op == "broadcast":
        if rank == root:
            got = pattern(torch, rank, numel, dtype, device)
        else:
            got = torch.full((numel,), -99, dtype=dtype, device=device)
        dist.broadcast(got, src=root)
        want = pattern(torch, root, numel, dtype, device)
    else:
        return False, f"unknown op {op}"
    torch.cuda.synchronize(device)

    if torch.equal(got, want):
        return True, ""
    bad = (got != want).nonzero()
    first = int(bad[0].item())
    return False, (f"{bad.numel()} of {numel} elements wrong; first at {first}: "
                   f"expected {want[first].item()}, got {got[first].item()}")


def write_json(path, obj):
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def worker(rank, world, init_method, args, result_dir):
    import datetime
    import torch
    import torch.distributed as dist

    out_path = os.path.join(result_dir, f"rank{rank}.json")
    results = {"rank": rank, "cases": {}, "error": None}
    write_json(out_path, results)
    if args.vhosts >= 2:
        os.environ["NCCL_HOSTID"] = f"vhost{rank}"  # read by NCCL at init, in this process
    device = torch.device("cuda", 0 if args.vhosts >= 2 else rank)
    torch.cuda.set_device(device)
    cases = make_cases(args.ops, args.dtypes, args.sizes, world)
    try:
        dist.init_process_group("nccl", init_method=init_method, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=args.timeout), device_id=device)
        for case in cases:
            try:
                ok, detail = run_case(torch, dist, rank, world, case, device)
            except Exception as e:  # a failed collective leaves the communicator unusable
                results["cases"][case[0]] = [False, f"exception: {e!r}"]
                results["error"] = f"stopped after {case[0].split()[0]}: {e!r}"
                write_json(out_path, results)
                raise
            results["cases"][case[0]] = [ok, detail]
            write_json(out_path, results)
        dist.barrier(device_ids=[device.index])
        dist.destroy_process_group()
    except Exception as e:
        if results["error"] is None:
            results["error"] = f"{e!r}"
        results["traceback"] = traceback.format_exc()
        write_json(out_path, results)
        raise


# ----------------------------------------------------------------- parent side

def merge_results(cases, per_rank, world):
    """Combines per-rank result dicts into [(name, ok, detail)]; a case passes
    only if every rank ran it and passed."""
    merged = []
    for name, *_ in cases:
        ok, details = True, []
        for r in range(world):
            res = per_rank.get(r)
            if res is None:
                ok = False
                details.append(f"rank {r}: no result file")
                continue
            entry = res.get("cases", {}).get(name)
            if entry is None:
                ok = False
                details.append(f"rank {r}: not run")
            elif not entry[0]:
                ok = False
                details.append(f"rank {r}: {entry[1]}")
        # keep the line short: "not run" from every rank collapses into one note
        if details and all(d.endswith(": not run") for d in details):
            details = ["not run (an earlier failure stopped the run)"]
        merged.append((name, ok, "; ".join(details)))
    return merged


def load_results(result_dir, world):
    per_rank = {}
    for r in range(world):
        path = os.path.join(result_dir, f"rank{r}.json")
        try:
            with open(path) as f:
                per_rank[r] = json.load(f)
        except (OSError, ValueError):
            pass
    return per_rank


def report(merged, per_rank, world, out=sys.stdout):
    npass = sum(1 for _, ok, _ in merged if ok)
    nfail = len(merged) - npass
    for name, ok, detail in merged:
        print(f"{'PASS' if ok else 'FAIL'} {name}" + (f"  ({detail})" if detail else ""), file=out)
    for r in range(world):
        res = per_rank.get(r) or {}
        if res.get("error"):
            print(f"rank {r} error: {res['error']}", file=out)
    print(f"{npass} passed, {nfail} failed", file=out)
    return nfail


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def runtime_nccl_version():
    """The NCCL this process runs: torch.cuda.nccl.version() gives the header torch was
    built with, not a library loaded in its place (LD_PRELOAD)."""
    import ctypes
    try:
        import torch.distributed  # noqa: F401  (loads torch's libnccl when not preloaded)
        lib = ctypes.CDLL("libnccl.so.2", mode=ctypes.RTLD_GLOBAL | getattr(os, "RTLD_NOLOAD", 4))
        code = ctypes.c_int(0)
        if lib.ncclGetVersion(ctypes.byref(code)) != 0:
            return "unknown"
        v = code.value
        return f"{v // 10000}.{v % 10000 // 100}.{v % 100}" if v >= 10000 else \
            f"{v // 1000}.{v % 1000 // 100}.{v % 100}"
    except (OSError, AttributeError):
        return "unknown"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nprocs", type=int, default=0, help="processes (one per GPU; default: all GPUs)")
    p.add_argument("--vhosts", type=int, default=0,
                   help="N >= 2: N processes on GPU 0, each its own host (NCCL_HOSTID=vhost<rank>; "
                        "run under CUDA MPS), so one GPU exercises the network path")
    p.add_argument("--sizes", default="1K,1M,64M",
                   type=lambda s: [parse_size(x) for x in s.split(",") if x.strip()],
                   help="message sizes in bytes (default 1K,1M,64M)")
    p.add_argument("--dtypes", default=",".join(DTYPES), type=lambda s: parse_list(s, DTYPES, "dtype"))
    p.add_argument("--ops", default=",".join(OPS), type=lambda s: parse_list(s, OPS, "op"))
    p.add_argument("--timeout", type=int, default=300, help="seconds for NCCL ops and for the whole run")
    p.add_argument("--allow-single", action="store_true",
                   help="run with one GPU (then no network is used: only a smoke test)")
    args = p.parse_args(argv)

    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError as e:
        print(f"torch_check: FATAL: cannot import torch: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch_check: FATAL: torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    ngpu = torch.cuda.device_count()
    world = args.vhosts if args.vhosts >= 2 else (args.nprocs or ngpu)
    if args.vhosts < 2 and world > ngpu:
        print(f"torch_check: FATAL: --nprocs {world} but only {ngpu} GPU(s)", file=sys.stderr)
        return 2
    if world < 2 and not args.allow_single:
        print("torch_check: FATAL: needs 2 GPUs to exercise the network path (--allow-single to "
              "run anyway)", file=sys.stderr)
        return 2

    nccl_ver = runtime_nccl_version() + " (torch built with " + \
        ".".join(str(x) for x in torch.cuda.nccl.version()) + ")"
    env = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items())
                   if k.startswith(("NCCL_NET", "NCCL_FABRIC", "NCCL_P2P", "NCCL_SHM", "FI_PROVIDER")))
    print(f"# torch_check: torch {torch.__version__}, NCCL {nccl_ver}, {world} processes, "
          f"sizes {','.join(size_label(s) for s in args.sizes)}, dtypes {','.join(args.dtypes)}")
    print(f"# env: {env or '(no NCCL_NET*/NCCL_FABRIC*/NCCL_P2P*/NCCL_SHM* set)'}")
    sys.stdout.flush()

    cases = make_cases(args.ops, args.dtypes, args.sizes, world)
    init_method = f"tcp://127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="torch_check.") as result_dir:
        ctx = mp.start_processes(worker, args=(world, init_method, args, result_dir), nprocs=world,
                                 join=False, start_method="spawn")
        crashed = None
        deadline = t0 + args.timeout + 120  # NCCL's own timeout fires first
        try:
            while not ctx.join(timeout=5):
                if time.monotonic() > deadline:
                    crashed = f"run exceeded {args.timeout + 120} s; killed"
                    for proc in ctx.processes:
                        if proc.is_alive():
                            proc.kill()
                    break
        except Exception as e:  # ProcessRaisedException / ProcessExitedException
            crashed = str(e).strip().splitlines()[-1] if str(e).strip() else repr(e)
            for proc in ctx.processes:
                if proc.is_alive():
                    proc.kill()
        per_rank = load_results(result_dir, world)

    merged = merge_results(cases, per_rank, world)
    if crashed:
        print(f"torch_check: a process failed: {crashed}")
    nfail = report(merged, per_rank, world)
    print(f"# torch_check: {time.monotonic() - t0:.1f} s")
    return 1 if nfail or crashed else 0


if __name__ == "__main__":
    sys.exit(main())
