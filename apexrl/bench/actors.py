"""Actor throughput (Ray actors sending to a replay shard), learner updates/s and replay bytes/transition.

    apexrl bench actors [--envs ALE/Pong-v5,CartPole-v1] [--actors 1,2] [--seconds 10] [--repeats 3]

1. Actors: for each env and actor count, N ``ActorWorker`` Ray actors (the training code path: acting with
   the preset's network, n-step, priorities, batched sends, ``run`` chunks sized as the driver sizes
   them; Atari sends de-duplicated frames) feed one ``ReplayShardWorker``. All counts share one Ray
   session and are measured in turns (1, 2, 1, 2, ...), the median turn reported, so that the ratio
   between counts does not depend on what else the machine did in a given minute. No learner runs, so
   the actors get the CPUs; weights stay at their initial values (same compute). Reported: agent
   steps/s and emulator frames/s (x frame skip for Atari) per actor and in total. The Ape-X paper
   reports ~139 frames/s per actor (50K/s over 360 actors).
2. Learner: ``Learner.update`` on random uint8 batches, Nature CNN (dueling) on [4, 84, 84], batch 512,
   centered RMSProp, with 1 and with all torch threads (the paper: ~19 updates/s on a GPU).
3. Replay memory: ``FramePrioritizedReplay`` filled to capacity with encoder payloads shaped like the
   preset's sends (E envs, n-step, K=4, send_every transitions per send, ~800-step episodes); bytes per
   stored transition = frame ring + per-transition arrays, extrapolated to 1M transitions.

Writes bench-results/actors-<date>.json and prints a table. Timings on a shared machine are noisy;
the JSON records the load average.
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import datetime
from typing import Any

import numpy as np

from apexrl.bench._results import write_result

PAPER_FRAMES_PER_ACTOR = 139.0


def _preset(env_id: str, overrides: list[str]) -> Any:
    from apexrl.config import EnvConfig, load
    from apexrl.envs import is_atari

    preset = "atari" if is_atari(EnvConfig(id=env_id)) else "cartpole"
    return load(preset, [f"env.id={env_id}", *overrides])


def _first_chunk(envs_per_actor: int) -> int:
    """Vector steps of an actor's first call, before its speed is known (~256 env steps)."""
    return max(1, 256 // envs_per_actor)


def _next_chunk(res: dict[str, Any], envs_per_actor: int) -> int:
    """Vector steps for ~0.25 s of acting at the last call's speed: a Ray call per 0.25 s costs the actor little."""
    per_step = res["time_s"] / max(1, res["env_steps"] // envs_per_actor)
    return int(np.clip(0.25 / max(per_step, 1e-6), 1, 10_000))


def bench_actors(env_id: str, counts: list[int], seconds: float, repeats: int,
                 overrides: list[str]) -> list[dict[str, Any]]:
    """Every actor count in one Ray session, measured in turns (1, 2, 1, 2, ...) so that each count sees
    the same machine; per count, the median over ``repeats`` turns. Each count has its own actors, built
    with ``num_actors`` equal to that count (the same epsilons as a run of that size); idle ones sleep."""
    import ray

    from apexrl.envs import is_atari
    from apexrl.runtime.assembly import assemble
    from apexrl.runtime.cluster import init_ray, shutdown_ray
    from apexrl.runtime.transport import ParameterServer
    from apexrl.runtime.workers import ActorWorker, ReplayShardWorker

    # One System per count: the actors `apexrl train` would build for a run of that size. No learner
    # samples, so the shard runs without the rate limiter.
    systems = {n: assemble(_preset(env_id, [f"actors.num_actors={n}", "replay.samples_per_insert=null",
                                            "replay.capacity=200000", *overrides])) for n in counts}
    cfg = systems[counts[0]].cfg
    E = cfg.actors.envs_per_actor
    init_ray(None, num_cpus=sum(counts) + 1)
    turns: dict[int, list[dict[str, Any]]] = {n: [] for n in counts}
    try:
        ps = ParameterServer.remote()
        shard = ReplayShardWorker.remote(**systems[counts[0]].shard_kwargs(0))
        sets = {n: [ActorWorker.options(num_cpus=1).remote(systems[n], i, [shard], ps) for i in range(n)]
                for n in counts}
        ray.get([a.run.remote(_first_chunk(E)) for n in counts for a in sets[n]])  # envs, torch, sends
        chunk = {a: _first_chunk(E) for n in counts for a in sets[n]}
        sent_so_far: dict[Any, tuple[int, int]] = {}  # actor -> its (frames, transitions) sent: running totals
        for _ in range(repeats):
            for n in counts:
                actors = sets[n]
                stats0 = ray.get(shard.stats.remote())
                t0 = time.perf_counter()
                pending = {a.run.remote(chunk[a]): i for i, a in enumerate(actors)}
                steps = np.zeros(n, dtype=np.int64)
                while pending:
                    ready, _ = ray.wait(list(pending), num_returns=1)
                    i = pending.pop(ready[0])
                    res = ray.get(ready[0])
                    steps[i] += res["env_steps"]
                    sent_so_far[actors[i]] = (res["frames_sent"], res["transitions_sent"])
                    chunk[actors[i]] = _next_chunk(res, E)
                    if time.perf_counter() - t0 < seconds:
                        pending[actors[i].run.remote(chunk[actors[i]])] = i
                dt = time.perf_counter() - t0
                stats1 = ray.get(shard.stats.remote())
                turns[n].append({"seconds": dt, "steps_per_s_per_actor": (steps / dt).tolist(),
                                 "inserted_per_s": (stats1["inserted"] - stats0["inserted"]) / dt})
    finally:
        shutdown_ray()
    skip = cfg.env.frame_skip if is_atari(cfg.env) else 1
    out = []
    for n in counts:
        totals = [sum(t["steps_per_s_per_actor"]) for t in turns[n]]
        mid = turns[n][int(np.argsort(totals)[len(totals) // 2])]  # the median turn (upper median if even)
        per_actor = np.asarray(mid["steps_per_s_per_actor"])
        fs = sum(sent_so_far[a][0] for a in sets[n])
        sent_all = sum(sent_so_far[a][1] for a in sets[n])
        out.append({
            "env": env_id, "actors": n, "envs_per_actor": E, "send_every": cfg.actors.send_every,
            "seconds": mid["seconds"], "repeats": repeats,
            "steps_per_s_total_each_turn": totals,
            "steps_per_s_per_actor": per_actor.tolist(),
            "steps_per_s_total": float(per_actor.sum()),
            "frames_per_s_per_actor": (per_actor * skip).tolist(),
            "frames_per_s_total": float(per_actor.sum() * skip),
            "inserted_per_s": mid["inserted_per_s"],
            "frames_sent_per_transition": float(fs / max(1, sent_all)) if skip > 1 else None,
        })
    return out


def bench_learner(updates: int, batch: int, threads: int) -> dict[str, Any]:
    import gymnasium as gym
    import torch

    from apexrl.agents import get_builder
    from apexrl.config import load

    cfg = load("atari", [f"learner.batch_size={batch}"])
    obs_space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        learner = get_builder(cfg.agent).make_learner(cfg, obs_space, gym.spaces.Discrete(6))
        rng = np.random.default_rng(0)
        b = {
            "obs": rng.integers(0, 256, (batch, 4, 84, 84), dtype=np.uint8),
            "next_obs": rng.integers(0, 256, (batch, 4, 84, 84), dtype=np.uint8),
            "action": rng.integers(0, 6, batch), "reward": rng.standard_normal(batch).astype(np.float32),
            "discount": np.full(batch, 0.99**3, dtype=np.float32),
        }
        w = np.ones(batch, dtype=np.float32)
        learner.update(b, w)  # warm-up
        t0 = time.perf_counter()
        for _ in range(updates):
            learner.update(b, w)
        dt = time.perf_counter() - t0
    finally:
        torch.set_num_threads(before)
    return {"batch": batch, "threads": threads, "updates": updates, "updates_per_s": updates / dt,
            "samples_per_s": updates * batch / dt}


def bench_replay_memory(capacity: int, envs: int, send_every: int, n: int = 3, stack: int = 4,
                        episode_steps: int = 800) -> dict[str, Any]:
    """Fill FramePrioritizedReplay(capacity) with payloads shaped like an actor's sends."""
    from apexrl.replay import FramePrioritizedReplay, FrameStackEncoder
    from apexrl.replay.nstep import NStepBuilder

    rng = np.random.default_rng(0)
    enc = FrameStackEncoder(envs, stack)
    nstep = NStepBuilder(envs, n, 0.99)
    buf = FramePrioritizedReplay(capacity, seed=0)

    def stacks() -> np.ndarray:  # new random frame, older frames shifted (content does not matter)
        return rng.integers(0, 256, (envs, stack, 84, 84), dtype=np.uint8)

    ids = enc.observe_reset(np.arange(envs), stacks())
    t = rng.integers(0, episode_steps, envs)
    pending: list[dict[str, np.ndarray]] = []
    count = 0
    frames_sent = sent = 0
    while buf.total_added < 1.3 * capacity:
        t += 1
        done = t >= episode_steps
        obs = stacks()
        final = None
        if done.any():  # as the actor does: final observations first, then the step with resets
            final = enc.observe_final(np.flatnonzero(done), obs[done])
            obs[done] = obs[done][:, -1:]  # a reset stack: the first frame repeated (stored once)
            t[done] = 0
        next_ids = enc.observe_step(obs, reset_mask=done)
        true_next = next_ids
        if final is not None:
            true_next = next_ids.copy()
            true_next[done] = final
        out = nstep.step(ids, np.zeros(envs, np.int64), np.zeros(envs), true_next, done, np.zeros(envs, bool))
        ids = next_ids
        if out is not None:
            pending.append(out)
            count += len(out["action"])
        if count >= send_every:
            batch = {k: np.concatenate([p[k] for p in pending]) for k in pending[0]}
            payload = enc.encode(batch["obs"], batch["next_obs"])
            payload.update(action=batch["action"], reward=batch["reward"], discount=batch["discount"])
            buf.add(payload, np.ones(len(batch["action"])))
            frames_sent += len(payload["frames"])
            sent += len(batch["action"])
            pending, count = [], 0
    tree_bytes = 9 * capacity  # float64 leaves, and a sum and a min per block of >= 16 (replay/sum_tree.py)
    total = buf.nbytes + tree_bytes
    per = total / len(buf)
    return {"capacity": capacity, "stored": len(buf), "frame_capacity": buf.frame_capacity,
            "envs": envs, "send_every": send_every, "frames_per_transition_sent": frames_sent / sent,
            "bytes_total": total, "bytes_per_transition": per,
            "gib_for_1M_transitions": per * 1_000_000 / 2**30,
            "naive_bytes_per_transition": 2 * stack * 84 * 84}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="apexrl bench actors", description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", default="ALE/Pong-v5,CartPole-v1")
    p.add_argument("--actors", default="1,2", help="actor counts to measure, comma-separated")
    p.add_argument("--seconds", type=float, default=10.0, help="measurement time per turn")
    p.add_argument("--repeats", type=int, default=3,
                   help="turns per actor count, interleaved (1, 2, 1, 2, ...); the median turn is reported")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="config override for the actor runs, e.g. --set actors.envs_per_actor=1")
    p.add_argument("--learner-updates", type=int, default=8)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--replay-capacity", type=int, default=50_000)
    p.add_argument("--skip", default="", help="comma-separated parts to skip: actors,learner,replay")
    p.add_argument("--out", default=None, help="JSON path (default bench-results/actors-<date>.json)")
    args = p.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    result: dict[str, Any] = {"date": datetime.now().isoformat(timespec="seconds"), "cpus": os.cpu_count(),
                              "loadavg_start": os.getloadavg(), "paper_frames_per_s_per_actor":
                              PAPER_FRAMES_PER_ACTOR, "actors": [], "learner": [], "replay": None}
    if "actors" not in skip:
        print(f"{'env':<16} {'actors':>6} {'E':>3} {'steps/s/actor':>14} {'frames/s/actor':>15} "
              f"{'frames/s total':>15} {'vs paper':>9} {'frames/transition':>18}")
        for env_id in args.envs.split(","):
            counts = [int(x) for x in args.actors.split(",")]
            for r in bench_actors(env_id, counts, args.seconds, args.repeats, args.overrides):
                n = r["actors"]
                result["actors"].append(r)
                per = float(np.mean(r["frames_per_s_per_actor"]))
                ratio = f"{per / PAPER_FRAMES_PER_ACTOR:.1f}x" if env_id.startswith("ALE/") else "-"
                fpt = "-" if r["frames_sent_per_transition"] is None else f"{r['frames_sent_per_transition']:.3f}"
                print(f"{env_id:<16} {n:>6} {r['envs_per_actor']:>3} {np.mean(r['steps_per_s_per_actor']):>14.0f} "
                      f"{per:>15.0f} {r['frames_per_s_total']:>15.0f} {ratio:>9} {fpt:>18}", flush=True)
    if "learner" not in skip:
        for threads in sorted({1, os.cpu_count() or 1}):
            r = bench_learner(args.learner_updates, args.batch, threads)
            result["learner"].append(r)
            print(f"learner: Nature CNN dueling, batch {args.batch}, {threads} thread(s): "
                  f"{r['updates_per_s']:.2f} updates/s ({r['samples_per_s']:.0f} samples/s; paper ~19 updates/s "
                  "on a GPU)", flush=True)
    if "replay" not in skip:
        from apexrl.config import load

        cfg = load("atari")
        r = bench_replay_memory(args.replay_capacity, cfg.actors.envs_per_actor, cfg.actors.send_every,
                                cfg.learner.n_step, cfg.env.frame_stack)
        result["replay"] = r
        print(f"replay: FramePrioritizedReplay({r['capacity']:,}) holds {r['stored']:,} transitions at "
              f"{r['bytes_per_transition']:,.0f} B each ({r['frames_per_transition_sent']:.3f} frames sent per "
              f"transition; naive obs+next_obs {r['naive_bytes_per_transition']:,} B) -> "
              f"{r['gib_for_1M_transitions']:.2f} GiB per 1M transitions", flush=True)
    result["loadavg_end"] = os.getloadavg()
    write_result("actors", result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
