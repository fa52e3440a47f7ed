"""The replay feed's ceiling: how many batches prefilled shards deliver to a learner that does not learn.

    apexrl bench feed --config atari --shards 1,2 --k 1,2,4 [--update-ms 0] [--seconds 5 --blocks 3]

The learner is the real ``LearnerWorker`` running the real ``LearnerLoop`` (same replay client, prefetch,
k batches per request, priorities written back with the next request) around a
:class:`~apexrl.bench.null_learner.NullLearner`: per batch it moves every array to the learner's
device as the DQN learner does, optionally sleeps ``--update-ms`` (a GPU update of that length), and
returns priorities. The shards are the real ``ReplayShardWorker``s of the preset, prefilled with
synthetic data of the preset's shapes (frame payloads for Atari: 84x84 frames stored once, stacks of 4,
n-step successors), free-running (no samples-per-insert limit).

Per configuration, medians over ``--blocks`` blocks of ``--seconds``:
  batches/s, transitions/s     delivered to the learner, all shards; per shard = / S
  shard CPU ms/batch           the shard processes' CPU per delivered batch, split into sample (draw
                               indices and IS weights), gather (the arrays: frame stacks rebuilt from
                               the ring), priority update, and the rest: Ray's share
                               (serializing the answer into the object store, task overhead)
  learner CPU ms/batch         the learner process's CPU per batch (what a GPU learner's host thread
                               pays), split into receive (ray.get, deserialize, client, write-back,
                               publications) and device copy (``to_device`` of the batch)
  MB/batch                     bytes of one batch as delivered (arrays + indices + weights)
  put / get ms                 ``ray.put`` / ``ray.get`` of one answer in this process: serialization
                               and deserialization alone. On one node the transfer is the object
                               store's shared memory (no copy); across nodes it is not measured here.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import statistics
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from apexrl.bench._results import write_result

PRESETS = ("atari", "minatar", "cartpole")
SEND = 512  # transitions per prefill send (actors' send_every on Atari)


def preset(name: str, shards: int, capacity: int | None, overrides: list[str]) -> Any:
    from apexrl.config import load

    cfg = load(name, ["learner.device=cpu", "actors.device=cpu", "learner.num_gpus=0", "actors.num_gpus=0",
                      *overrides])
    cap = capacity if capacity is not None else cfg.replay.capacity
    return cfg.replace(**{"replay.num_shards": shards, "replay.capacity": cap, "replay.samples_per_insert": None,
                          "replay.learning_starts": cfg.learner.batch_size * shards})


def payloads(system: Any, rng: np.random.Generator, size: int = SEND) -> Iterator[dict[str, np.ndarray]]:
    """Endless synthetic sends of ``size`` transitions shaped as the preset's actors send them."""
    cfg, space = system.cfg, system.observation_space
    common = lambda: {"action": rng.integers(int(system.action_space.n), size=size),  # noqa: E731
                      "reward": rng.standard_normal(size).astype(np.float32),
                      "discount": np.full(size, cfg.learner.gamma ** cfg.learner.n_step, np.float32)}
    if system.frames:  # one env's consecutive frames: obs t-3..t, next_obs t+n-3..t+n
        K, n = cfg.env.frame_stack, cfg.learner.n_step
        pool = rng.integers(0, 256, size=(4096, *space.shape[1:]), dtype=np.uint8)
        rows = np.arange(size)[:, None]
        obs_f, next_f = (rows + np.arange(K)).astype(np.int32), (rows + n + np.arange(K)).astype(np.int32)
        off = 0
        while True:
            f = size + K - 1 + n
            frames = pool[(off + np.arange(f)) % len(pool)]
            off += f
            yield {"frames": frames, "obs_frames": obs_f, "next_obs_frames": next_f, **common()}
    while True:
        def obs() -> np.ndarray:
            if np.issubdtype(space.dtype, np.floating):
                return rng.standard_normal((size, *space.shape)).astype(space.dtype)
            return rng.integers(0, 2, size=(size, *space.shape)).astype(space.dtype)
        yield {"obs": obs(), **common(), "next_obs": obs()}


def fill(shards: list[Any], per_shard: int, system: Any, seed: int) -> None:
    import ray

    rng = np.random.default_rng(seed)
    data = payloads(system, rng)
    inflight: list[Any] = []
    for _ in range(-(-per_shard // SEND)):
        for s in shards:
            inflight.append(s.add.remote(next(data), rng.uniform(0.01, 1.0, SEND)))
            if len(inflight) > 4 * len(shards):
                ray.get(inflight.pop(0))
    ray.get(inflight)


def serialization_ms(answer: dict[str, Any], reps: int = 5) -> tuple[float, float]:
    """Median ms of ``ray.put`` and of ``ray.get`` of one shard answer, in this process."""
    import ray

    puts, gets = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        ref = ray.put(answer)
        t1 = time.perf_counter()
        got = ray.get(ref)
        t2 = time.perf_counter()
        puts.append(t1 - t0)
        gets.append(t2 - t1)
        del got, ref
    return 1e3 * statistics.median(puts), 1e3 * statistics.median(gets)


def measure(system: Any, shards: list[Any], update_ms: float, seconds: float, blocks: int) -> dict[str, Any]:
    import ray

    from apexrl.bench.null_learner import NullLearner
    from apexrl.runtime.transport import ParameterServer
    from apexrl.runtime.workers import LearnerWorker

    cfg = system.cfg
    B, k, S = cfg.learner.batch_size, system.batches_per_request, len(shards)
    answer = ray.get(shards[0].update_and_sample.remote(None, None, B, 0.4, k))
    nbytes = sum(v.nbytes for v in answer["batch"].values()) + answer["indices"].nbytes + answer["weights"].nbytes
    put_ms, get_ms = serialization_ms(answer)
    del answer
    ps = ParameterServer.remote()
    make = functools.partial(NullLearner.for_system, update_s=update_ms / 1e3)
    learner = LearnerWorker.options(num_cpus=0).remote(system, shards, ps, 1, make)
    ray.get(learner.train.remote(1.0))  # warm-up: first requests, numba, torch
    rows = []
    for _ in range(blocks):
        p0 = ray.get([s.profile.remote() for s in shards])
        r = ray.get(learner.train.remote(seconds))
        p1 = ray.get([s.profile.remote() for s in shards])
        n = max(1, r["updates"])
        d = {key: sum(b[key] - a[key] for a, b in zip(p0, p1)) for key in p0[0]}
        m = r["metrics"]
        rows.append({
            "batches_per_s": r["updates"] / r["time_s"],
            "shard_cpu_ms": 1e3 * d["cpu_s"] / n, "shard_sample_ms": 1e3 * d["sample_s"] / n,
            "shard_gather_ms": 1e3 * d["gather_s"] / n, "shard_update_ms": 1e3 * d["update_s"] / n,
            "learner_cpu_ms": 1e3 * r["cpu_s"] / n, "device_copy_ms": m.get("device_copy_ms", 0.0),
            "learner_in_update_cpu_ms": m.get("cpu_in_update_ms", 0.0),
            "learner_receive_cpu_ms": m.get("cpu_between_updates_ms", 0.0),
            "learner_wait_fraction": r["idle_s"] / r["time_s"],
        })
    for a in (learner, ps):
        ray.kill(a)
    out = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
    out["shard_ray_ms"] = (out["shard_cpu_ms"] - out["shard_sample_ms"] - out["shard_gather_ms"]
                           - out["shard_update_ms"])
    out.update({"shards": S, "k": k, "batch_size": B, "transitions_per_s": out["batches_per_s"] * B,
                "batches_per_s_per_shard": out["batches_per_s"] / S, "mb_per_batch": nbytes / k / 1e6,
                "put_ms_per_batch": put_ms / k, "get_ms_per_batch": get_ms / k, "update_ms": update_ms,
                "blocks": rows})
    return out


def run_preset(name: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    import ray

    from apexrl.runtime.assembly import assemble
    from apexrl.runtime.workers import ReplayShardWorker

    results = []
    ks = [None] if args.k == "auto" else [int(x) for x in args.k.split(",")]  # None: the preset's
    for S in [int(x) for x in args.shards.split(",")]:
        system = assemble(preset(name, S, args.capacity, args.set), num_actors=1)
        shards = [ReplayShardWorker.options(num_cpus=0).remote(**system.shard_kwargs(i)) for i in range(S)]
        t0 = time.perf_counter()
        fill(shards, system.shard_kwargs(0)["capacity"], system, args.seed)
        print(f"{name}: {S} shard(s) filled with {system.cfg.replay.capacity:,} transitions in "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
        for k in ks:  # the same shards and env check; only the learner's request size differs
            at_k = system if k is None else dataclasses.replace(
                system, cfg=system.cfg.replace(**{"learner.batches_per_request": k}))
            row = {"preset": name, **measure(at_k, shards, args.update_ms, args.seconds, args.blocks)}
            print(format_row(row), flush=True)
            results.append(row)
        for s in shards:
            ray.kill(s)
    return results


HEADER = (f"{'preset':>8} {'S':>2} {'k':>2} {'B':>4} {'batches/s':>9} {'/shard':>7} {'trans/s':>9} {'MB/b':>6} "
          f"{'shard ms/b':>10} {'sample':>6} {'gather':>6} {'prio':>5} {'ray':>5} {'lrn ms/b':>8} {'recv':>5} {'copy':>5} "
          f"{'put':>5} {'get':>5} {'wait':>5}")


def format_row(r: dict[str, Any]) -> str:
    return (f"{r['preset']:>8} {r['shards']:>2} {r['k']:>2} {r['batch_size']:>4} {r['batches_per_s']:>9.1f} "
            f"{r['batches_per_s_per_shard']:>7.1f} {r['transitions_per_s']:>9,.0f} {r['mb_per_batch']:>6.3f} "
            f"{r['shard_cpu_ms']:>10.2f} {r['shard_sample_ms']:>6.2f} {r['shard_gather_ms']:>6.2f} "
            f"{r['shard_update_ms']:>5.2f} "
            f"{r['shard_ray_ms']:>5.2f} {r['learner_cpu_ms']:>8.2f} {r['learner_receive_cpu_ms']:>5.2f} "
            f"{r['device_copy_ms']:>5.2f} {r['put_ms_per_batch']:>5.2f} {r['get_ms_per_batch']:>5.2f} "
            f"{r['learner_wait_fraction']:>5.2f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="apexrl bench feed", description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="atari", help=f"comma-separated presets: {', '.join(PRESETS)}")
    ap.add_argument("--shards", default="1,2", help="shard counts S, comma-separated")
    ap.add_argument("--k", default="auto", help="batches per request, comma-separated; auto: the preset's")
    ap.add_argument("--capacity", type=int, default=None, help="transitions in all shards (default: the preset's)")
    ap.add_argument("--update-ms", type=float, default=0.0, help="the null learner sleeps this long per batch")
    ap.add_argument("--seconds", type=float, default=5.0, help="length of one block")
    ap.add_argument("--blocks", type=int, default=3, help="blocks per configuration (medians are reported)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    ap.add_argument("--out", default=None, help="result file (default bench-results/feed-<date>.json)")
    args = ap.parse_args(argv)
    names = args.config.split(",")
    unknown = [n for n in names if n not in PRESETS]
    if unknown:
        ap.error(f"--config {','.join(unknown)}: not one of {', '.join(PRESETS)}")
    from apexrl.runtime.cluster import init_ray, shutdown_ray

    init_ray(None, num_cpus=max(2, max(int(x) for x in args.shards.split(",")) + 1))
    print(f"replay feed to a null learner, {os.cpu_count()} CPUs, update {args.update_ms:g} ms; "
          f"ms/b = per batch; medians of {args.blocks} x {args.seconds:g} s\n{HEADER}", flush=True)
    try:
        rows = [r for name in names for r in run_preset(name, args)]
    finally:
        shutdown_ray()
    write_result("feed", {"args": vars(args), "results": rows}, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
