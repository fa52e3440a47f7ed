"""Learner updates/s of the Atari preset (Nature CNN, dueling, batch 512, 4x84x84 uint8 frames) on the CPU
and on a CUDA device, in one process on one fixed random batch: what a GPU learner does to Ape-X's
bottleneck on Pong (docs/atari.md). Needs torch, gymnasium and apexrl; no Ray, no emulator.

    python benchmarks/gpu_learner.py --seconds 20      # JSON to bench-results/gpu-learner-<stamp>.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apexrl.agents import get_builder  # noqa: E402
from apexrl.bench._results import write_result  # noqa: E402
from apexrl.config import load  # noqa: E402


def rate(device: str, seconds: float, batch: int, threads: int) -> dict[str, float]:
    torch.set_num_threads(threads)
    cfg = load("atari", [f"learner.device={device}", f"learner.batch_size={batch}"])
    obs, act = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), gym.spaces.Discrete(6)
    torch.manual_seed(0)
    learner = get_builder("dqn").make_learner(cfg, obs, act)
    rng = np.random.default_rng(0)
    b = {"obs": rng.integers(0, 256, (batch, 4, 84, 84), dtype=np.uint8),
         "next_obs": rng.integers(0, 256, (batch, 4, 84, 84), dtype=np.uint8),
         "action": rng.integers(6, size=batch), "reward": rng.normal(size=batch).astype(np.float32),
         "discount": np.full(batch, 0.99**3, np.float32)}
    w = np.ones(batch, np.float32)
    for _ in range(3):  # warm-up: cuDNN autotuning, allocator
        learner.update(b, w)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        learner.update(b, w)  # returns priorities as numpy: each update ends synchronized
        n += 1
    return {"updates_per_s": n / (time.perf_counter() - t0), "updates": n}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--cpu-seconds", type=float, default=20.0)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--out", default=None)
    a = p.parse_args()
    out = {"torch": torch.__version__, "batch": a.batch, "cpu_1_thread": rate("cpu", a.cpu_seconds, a.batch, 1)}
    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(0)
        out["cuda"] = rate("cuda", a.seconds, a.batch, 1)
        out["ratio_cuda_to_cpu"] = out["cuda"]["updates_per_s"] / out["cpu_1_thread"]["updates_per_s"]
    print(json.dumps(out, indent=1))
    write_result("gpu-learner", out, a.out)

if __name__ == "__main__":
    main()
