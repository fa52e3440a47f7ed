"""Cost of one learner update per config variant, on one thread, in one process (no Ray, no replay).

    apexrl bench update --variant "" --variant "network.head=32"

On a CPU-only host the learner is the bottleneck of a CartPole run (the rate limiter makes the actors wait
for it), so the wall time of a run is about its updates times this cost plus start-up. Each variant gets a
``Learner`` built from the preset with its overrides, warmed up, then all variants are timed in
interleaved blocks of ``--updates`` updates on the same fixed random batch (``--repeats`` rounds), so a
noisy neighbour slows every variant alike; the median block is reported with the ratio to the first
variant. ``bench sweep`` says how many updates a variant needs; this says what each one costs.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from apexrl.bench._results import write_result
from apexrl.bench._variants import add_variant_args, label, variant_list


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="apexrl bench update", description=__doc__.split("\n\n")[0])
    add_variant_args(p)
    p.add_argument("--updates", type=int, default=300, help="updates per timed block")
    p.add_argument("--repeats", type=int, default=7, help="interleaved rounds (median block reported)")
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)

    import numpy as np
    import torch

    from apexrl.config import load
    from apexrl.runtime.assembly import assemble

    torch.set_num_threads(1)
    variants = variant_list(a)
    learners: dict[str, Any] = {}
    batches: dict[str, tuple[dict[str, np.ndarray], np.ndarray]] = {}
    for v in variants:
        cfg = load(a.preset, v.split())
        system = assemble(cfg, num_actors=1)
        obs_space, act_space = system.observation_space, system.action_space
        learner = system.make_learner()
        rng = np.random.default_rng(0)
        b = cfg.learner.batch_size
        obs = np.stack([obs_space.sample() for _ in range(2 * b)])
        batch = {"obs": obs[:b], "next_obs": obs[b:], "action": rng.integers(0, int(act_space.n), b),
                 "reward": rng.normal(size=b).astype(np.float32),
                 "discount": np.full(b, cfg.learner.gamma ** cfg.learner.n_step, np.float32)}
        weights = np.ones(b, np.float32)
        for _ in range(max(50, a.updates // 2)):
            learner.update(batch, weights)
        learners[v], batches[v] = learner, (batch, weights)
    blocks: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(a.repeats):
        for v in variants:
            learner, (batch, weights) = learners[v], batches[v]
            t0 = time.perf_counter()
            for _ in range(a.updates):
                learner.update(batch, weights)
            blocks[v].append((time.perf_counter() - t0) / a.updates * 1e6)
    base = statistics.median(blocks[variants[0]])
    rows = []
    print(f"{'variant':50} {'us/update':>10} {'ratio':>7}  blocks (us)")
    for v in variants:
        med = statistics.median(blocks[v])
        rows.append({"variant": label(v), "us_per_update": round(med, 1), "ratio": round(med / base, 3),
                     "blocks_us": [round(x, 1) for x in blocks[v]]})
        print(f"{label(v)[:50]:50} {med:10.0f} {med / base:7.2f}  {' '.join(f'{x:.0f}' for x in blocks[v])}")
    write_result("update", {"preset": a.preset, "updates_per_block": a.updates, "repeats": a.repeats,
                            "torch_threads": 1, "rows": rows}, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
