"""Prioritized replay benchmark (issue 4): apexrl vs cpprb vs TorchRL vs the seed article's buffer.

    apexrl bench replay            # full: CartPole 1M, Atari 100k, Atari 1M (apexrl)
    apexrl bench replay --quick    # ~1 minute: CartPole 100k, Atari 10k

Per implementation and workload, on the same data:
  * add throughput (transitions/s) of batched adds of 64 and 512 into a full buffer;
  * sample+update throughput: samples/s = 512 / (time of one sample(512) + one priority update);
  * resident memory per stored transition: RSS growth from creating the buffer and adding 1.1 x
    capacity transitions (so every ring has wrapped), divided by the transitions stored; measured
    in a fresh subprocess per implementation and workload after a warm-up on a small throwaway
    buffer, so library code and JIT caches are not charged to the buffer.
Throughput runs all implementations of a workload in one subprocess, interleaved round by round,
so load from other processes on a shared machine hits them alike; each figure is the median of
per-call times. Only ratios within one run are meaningful.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from apexrl.bench._results import ROOT, write_result
from apexrl.bench.replay_impls import ADAPTERS, SAMPLE_BATCH, Adapter, SkipCase, Workload, torchrl_skip_reason

ADD_SIZES = (64, 512)


# --------------------------------------------------------------------------- child processes
def _rss() -> int:
    import psutil

    gc.collect()
    return int(psutil.Process().memory_info().rss)


def child_memory(kind: str, capacity: int, impl: str) -> dict[str, Any]:
    wl = Workload(kind)
    try:
        ad = ADAPTERS[impl](wl, capacity)
    except SkipCase as e:
        return {"skip": str(e)}
    ad.warm_up()
    ad.prepare(512)
    before = _rss()
    t0 = time.perf_counter()
    ad.build()
    # 10% past capacity: every ring (apexrl's frame ring is a little larger than capacity) has
    # wrapped, so all of its pages are resident, as in a long run.
    ad.fill(capacity + capacity // 10)
    fill_s = time.perf_counter() - t0
    grown = _rss() - before
    return {"bytes_per_transition": grown / ad.stored(), "stored": ad.stored(), "fill_s": fill_s}


def child_throughput(kind: str, capacity: int, impls: list[str], rounds: int, reps: int) -> dict[str, Any]:
    wl = Workload(kind)
    adapters: dict[str, Adapter] = {}
    out: dict[str, Any] = {}
    for name in impls:
        try:
            ad = ADAPTERS[name](wl, capacity)
        except SkipCase as e:
            out[name] = {"skip": str(e)}
            continue
        ad.build()
        ad.fill(capacity + capacity // 10)  # wrapped rings: steady state, no first-touch page faults
        for size in ADD_SIZES:
            ad.prepare(size)
        ad.sample_update()  # warm-up (numba kernels load from cache / compile here)
        adapters[name] = ad
    times: dict[str, dict[str, list[float]]] = {n: {"add64": [], "add512": [], "sample_update": []}
                                                 for n in adapters}
    for _ in range(rounds):
        for name, ad in adapters.items():
            slow = name == "naive"  # O(N) per item: keep its share of the wall clock bounded
            n = max(2, reps // 10) if slow else reps
            for size in ADD_SIZES:
                for b in range(n):
                    t = time.perf_counter()
                    ad.add(size, b)
                    times[name][f"add{size}"].append(time.perf_counter() - t)
            for _ in range(n):
                t = time.perf_counter()
                ad.sample_update()
                times[name]["sample_update"].append(time.perf_counter() - t)
    for name, tt in times.items():
        out[name] = {
            "add64_per_s": 64 / float(np.median(tt["add64"])),
            "add512_per_s": 512 / float(np.median(tt["add512"])),
            "sample_update_per_s": SAMPLE_BATCH / float(np.median(tt["sample_update"])),
            "calls": {k: len(v) for k, v in tt.items()},
        }
    return out


def _run_child(args: list[str], timeout: float) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "apexrl.bench.replay", "--_child", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout)[-800:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- driver
def plan(quick: bool) -> list[tuple[str, int, list[str]]]:
    everyone = ["apexrl", "apexrl-numba", "cpprb", "torchrl", "naive"]
    if quick:
        return [("cartpole", 100_000, everyone), ("atari", 10_000, everyone)]
    return [("cartpole", 1_000_000, everyone), ("atari", 100_000, everyone), ("atari", 1_000_000, ["apexrl"])]


def environment() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions: dict[str, str] = {"python": platform.python_version(), "numpy": np.__version__}
    for dist in ("numba", "cpprb", "torch", "torchrl", "tensordict", "psutil"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = "not installed"
    return {"cpu": cpu, "cpus": os.cpu_count(), "platform": platform.platform(), "versions": versions,
            "torchrl_skip": torchrl_skip_reason()}


def _fmt(x: float | None, unit: str = "") -> str:
    if x is None:
        return "-"
    for div, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.2f}{suffix}{unit}"
    return f"{x:.0f}{unit}"


def table(results: list[dict[str, Any]]) -> str:
    head = (f"{'workload':<16}{'impl':<9}{'add(64)/s':>11}{'add(512)/s':>12}{'sample+upd/s':>14}"
            f"{'B/transition':>14}{'s+u vs cpprb':>14}{'s+u vs naive':>14}{'add512 vs cpprb':>17}")
    lines = [head, "-" * len(head)]
    for r in results:
        w = f"{r['workload']} {r['capacity'] // 1000}k"
        ref = {x["impl"]: x for x in results if x["workload"] == r["workload"] and x["capacity"] == r["capacity"]}
        if "skip" in r or "error" in r:
            lines.append(f"{w:<16}{r['impl']:<9}  skipped: {r.get('skip') or r.get('error', '')[:150]}")
            continue

        def ratio(other: str, key: str) -> str:
            o = ref.get(other, {})
            return f"{r[key] / o[key]:.2f}x" if key in o and key in r and r[key] else "-"

        mem = r.get("bytes_per_transition")
        lines.append(f"{w:<16}{r['impl']:<9}{_fmt(r.get('add64_per_s')):>11}{_fmt(r.get('add512_per_s')):>12}"
                     f"{_fmt(r.get('sample_update_per_s')):>14}{_fmt(mem, 'B'):>14}"
                     f"{ratio('cpprb', 'sample_update_per_s'):>14}{ratio('naive', 'sample_update_per_s'):>14}"
                     f"{ratio('cpprb', 'add512_per_s'):>17}")
    return "\n".join(lines)


def targets(results: list[dict[str, Any]]) -> list[str]:
    def get(workload: str, cap: int, impl: str) -> dict[str, Any]:
        return next((r for r in results if (r["workload"], r["capacity"], r["impl"]) == (workload, cap, impl)), {})

    def check(label: str, value: float | None, goal: float, fmt: str = "{:.2f}x") -> str:
        if value is None:
            return f"[ n/a ] {label}: not measured in this run"
        return f"[{'met ' if value >= goal else 'MISS'}] {label}: {fmt.format(value)} (target {fmt.format(goal)})"

    out = []
    a, c, n = get("cartpole", 1_000_000, "apexrl"), get("cartpole", 1_000_000, "cpprb"), get("cartpole", 1_000_000, "naive")
    su = "sample_update_per_s"
    out.append(check("CartPole 1M sample+update vs cpprb", a[su] / c[su] if su in a and su in c else None, 1.5))
    out.append(check("CartPole 1M sample+update vs naive", a[su] / n[su] if su in a and su in n else None, 20))
    out.append(check("CartPole 1M add(512) vs cpprb", a["add512_per_s"] / c["add512_per_s"]
                     if "add512_per_s" in a and "add512_per_s" in c else None, 1.0))
    big = get("atari", 1_000_000, "apexrl").get("bytes_per_transition")
    out.append(check("Atari 1M memory, KiB/transition (<= 8)", None if big is None else 8192 / big, 1.0,
                     "{:.2f}x headroom") + ("" if big is None else f" = {big / 1024:.2f} KiB"))
    a, c = get("atari", 100_000, "apexrl"), get("atari", 100_000, "cpprb")
    out.append(check("Atari 100k sample+update vs cpprb", a[su] / c[su] if su in a and su in c else None, 1.0))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="apexrl bench replay", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small capacities, ~1 minute")
    p.add_argument("--rounds", type=int, default=None, help="interleaved timing rounds (default 3, quick 2)")
    p.add_argument("--reps", type=int, default=None, help="calls per operation per round (default 30, quick 15)")
    p.add_argument("--impls", default="apexrl,apexrl-numba,cpprb,torchrl,naive", help="comma-separated subset")
    p.add_argument("--out", default=None, help="JSON path (default bench-results/replay-<date>.json)")
    p.add_argument("--_child", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args._child:  # internal: one measurement in a fresh process, JSON on the last stdout line
        mode, kind, cap = args._child[0], args._child[1], int(args._child[2])
        if mode == "memory":
            res = child_memory(kind, cap, args._child[3])
        else:
            res = child_throughput(kind, cap, args._child[3].split(","), int(args._child[4]), int(args._child[5]))
        print(json.dumps(res))
        return 0

    rounds = args.rounds or (2 if args.quick else 3)
    reps = args.reps or (15 if args.quick else 30)
    wanted = set(args.impls.split(","))
    env = environment()
    print(f"CPU: {env['cpu']} x{env['cpus']}; " + ", ".join(f"{k} {v}" for k, v in env["versions"].items()))
    if env["torchrl_skip"]:
        print(f"torchrl skipped: {env['torchrl_skip']}")
    results: list[dict[str, Any]] = []
    t_start = time.perf_counter()
    for kind, cap, impls in plan(args.quick):
        impls = [i for i in impls if i in wanted]
        print(f"\n== {kind} capacity {cap:,}: {', '.join(impls)}", flush=True)
        mem = {}
        for impl in impls:
            mem[impl] = _run_child(["memory", kind, str(cap), impl], timeout=1800)
            print(f"   memory {impl}: {mem[impl]}", flush=True)
        live = [i for i in impls if "skip" not in mem[i] and "error" not in mem[i]]
        thr = _run_child(["throughput", kind, str(cap), ",".join(live), str(rounds), str(reps)],
                         timeout=3600) if live else {}
        for impl in impls:
            row: dict[str, Any] = {"workload": kind, "capacity": cap, "impl": impl}
            for part in (mem[impl], thr.get(impl, {}), {"error": thr["error"]} if "error" in thr else {}):
                row.update(part)
            results.append(row)
    print("\n" + table(results))
    checks = targets(results)
    print("\n" + "\n".join(checks))
    elapsed = time.perf_counter() - t_start
    print(f"\n(total {elapsed:.0f} s)")

    write_result("replay", {"quick": args.quick, "rounds": rounds, "reps": reps, "environment": env,
                            "results": results, "targets": checks, "elapsed_s": elapsed}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
