"""Sharded replay through Ray: learner-side sample+update throughput for 1, 2 and 4 ReplayShard actors.

    apexrl bench shards [--shards 1,2,4] [--capacity 1000000] [--batch 512] [--seconds 5]

The driver plays the learner exactly as ``LearnerWorker`` does: ``prefetch`` ``update_and_sample`` requests
in flight, shards picked in proportion to their priority mass, the new priorities of a batch riding on the
next request to the same shard. Reported: samples/s (batch / time per batch, over all shards), and the
learner-side cost of merging batches from several shards into one (np.concatenate per key), measured
separately. Every shard is a single-threaded process, so throughput can grow with shards only where there
are cores for them: on a 2-core host the learner loop and the shards share two cores.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from apexrl.bench._results import write_result


def _cartpole(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"obs": rng.normal(size=(n, 4)).astype(np.float32), "action": rng.integers(2, size=n),
            "reward": np.ones(n, np.float32), "discount": np.full(n, 0.97, np.float32),
            "next_obs": rng.normal(size=(n, 4)).astype(np.float32)}


def run(num_shards: int, capacity: int, batch: int, seconds: float, prefetch: int) -> dict[str, float]:
    import ray

    from apexrl.config import Config
    from apexrl.replay.client import ReplayClient
    from apexrl.runtime.assembly import assemble
    from apexrl.runtime.workers import RayShards, ReplayShardWorker

    cfg = Config().replace(**{"replay.capacity": capacity, "replay.num_shards": num_shards,
                              "replay.learning_starts": batch * num_shards, "replay.samples_per_insert": None,
                              "learner.batch_size": batch, "learner.prefetch": prefetch,
                              "learner.batches_per_request": 1})
    system = assemble(cfg, num_actors=1)
    rng = np.random.default_rng(0)
    per = capacity // num_shards
    shards = [ReplayShardWorker.remote(**system.shard_kwargs(i)) for i in range(num_shards)]
    chunk = 50_000
    for s in shards:
        refs = []
        for _ in range(0, per, chunk):
            data = _cartpole(chunk, rng)
            refs.append(s.add.remote(data, rng.random(chunk) + 0.01))
        ray.get(refs)
    # The learner's own replay client (shard choice by mass, prefetch, priorities with the next request);
    # random new priorities stand in for the updates.
    client = ReplayClient(RayShards(shards), num_shards, batch, prefetch, 1, seed=0)
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        j, res = client.next(0.4)
        if res is not None and "batch" in res:
            idx = res["indices"]
            client.write_back(j, idx, rng.random(len(idx)) + 0.01)
            n += len(idx)
    dt = time.perf_counter() - t0
    ray.get([h for _, h in client.inflight])
    for s in shards:
        ray.kill(s)
    parts = [_cartpole(batch // num_shards, rng) for _ in range(num_shards)]
    reps = 2000
    tm = time.perf_counter()
    for _ in range(reps):
        {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    merge_us = (time.perf_counter() - tm) / reps * 1e6
    return {"shards": num_shards, "samples_per_s": n / dt, "merge_us_per_batch": merge_us}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="apexrl bench shards", description=__doc__.splitlines()[0])
    ap.add_argument("--shards", default="1,2,4")
    ap.add_argument("--capacity", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--prefetch", type=int, default=8)
    args = ap.parse_args(argv)
    from apexrl.runtime.cluster import init_ray, shutdown_ray

    counts = [int(x) for x in args.shards.split(",")]
    init_ray(None, num_cpus=max(2, max(counts) + 1))
    try:
        rows = [run(s, args.capacity, args.batch, args.seconds, args.prefetch) for s in counts]
    finally:
        shutdown_ray()
    base = rows[0]["samples_per_s"]
    print(f"sharded replay through Ray, CartPole-like, capacity {args.capacity:,}, batch {args.batch}, "
          f"prefetch {args.prefetch}, {os.cpu_count()} CPUs")
    print(f"{'shards':>6} {'samples/s':>12} {'vs 1 shard':>10} {'merge us/batch':>15}")
    for r in rows:
        print(f"{r['shards']:>6} {r['samples_per_s']:>12,.0f} {r['samples_per_s'] / base:>9.2f}x "
              f"{r['merge_us_per_batch']:>15.1f}")
    write_result("shards", {"platform": platform.platform(), "args": vars(args), "results": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
