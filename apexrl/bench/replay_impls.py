"""Workload data and one adapter per prioritized-replay implementation for apexrl bench replay.

Every adapter stores the same transitions (generated from a fixed seed), in the layout that is
best for it, and exposes the three operations we time:

    build()           create the (empty) buffer
    add(b)            add prepared batch b (B transitions, with priorities)
    sample_update()   sample 512 with beta=0.4, then write 512 new priorities back
    fill(n)           add transitions until n are stored (untimed, or timed for memory)

Preparation (building arrays / payloads) happens outside the timed calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

SAMPLE_BATCH = 512
BETA = 0.4
ALPHA = 0.6
K = 4  # Atari frame stack
FRAME = (84, 84)


class Workload:
    """Deterministic source data. ``cartpole``: 4 float32 obs; ``atari``: a stream of 84x84 uint8
    frames where transition t has obs = frames t..t+3 and next_obs = frames t+1..t+4 (1-step,
    consecutive, so cpprb's next_of/stack_compress apply to exactly the same data)."""

    def __init__(self, kind: str, seed: int = 0) -> None:
        if kind not in ("cartpole", "atari"):
            raise ValueError(kind)
        self.kind = kind
        rng = np.random.default_rng(seed)
        self.priorities = (rng.random(1 << 16) + 0.01).astype(np.float64)
        if kind == "cartpole":
            n = 1 << 14
            self.pool = {
                "obs": rng.standard_normal((n, 4), dtype=np.float32),
                "next_obs": rng.standard_normal((n, 4), dtype=np.float32),
                "action": rng.integers(0, 2, n).astype(np.int64),
                "reward": rng.random(n, dtype=np.float32),
                "discount": np.full(n, 0.99, np.float32),
            }
        else:
            self.frames = rng.integers(0, 256, (4096, *FRAME), dtype=np.uint8)

    def cartpole_batch(self, b: int, size: int) -> dict[str, np.ndarray]:
        n = self.pool["obs"].shape[0]
        start = (b * size) % (n - size)
        return {k: v[start : start + size] for k, v in self.pool.items()}

    def atari_stream(self, b: int, size: int) -> tuple[np.ndarray, int]:
        """Frames for transitions [b*size, (b+1)*size): size + K consecutive frames."""
        start = (b * size) % (self.frames.shape[0] - size - K)
        return self.frames[start : start + size + K], start

    def prios(self, b: int, size: int) -> np.ndarray:
        start = (b * size) % (self.priorities.shape[0] - size)
        return self.priorities[start : start + size]


# --------------------------------------------------------------------------- adapters
class Adapter:
    name = "?"
    prepared = 4  # distinct prepared batches per size, cycled

    def __init__(self, wl: Workload, capacity: int) -> None:
        """Check availability and import; the buffer itself is created by :meth:`build`."""
        self.wl, self.capacity = wl, capacity
        self._batches: dict[int, list[Any]] = {}
        self._new_p = wl.prios(7, SAMPLE_BATCH).copy()

    def build(self) -> None:
        raise NotImplementedError

    def warm_up(self) -> None:
        """Load libraries and compiled code on a small throwaway buffer, so that a later RSS
        baseline does not charge them to the big buffer."""
        big = self.capacity
        self.capacity = 2 * SAMPLE_BATCH
        self.build()
        self.fill(self.capacity)
        self.sample_update()
        self.capacity = big
        self.buf = None

    def prepare(self, size: int) -> None:
        self._batches[size] = [self._make(b, size) for b in range(self.prepared)]

    def add(self, size: int, b: int) -> None:
        batch = self._batches[size][b % self.prepared]
        self._add(batch, self.wl.prios(b, size))

    def fill(self, n: int, size: int = 512) -> None:
        if size not in self._batches:
            self.prepare(size)
        for b in range(-(-n // size)):
            self.add(size, b)

    def stored(self) -> int:
        raise NotImplementedError

    def _make(self, b: int, size: int) -> Any:
        raise NotImplementedError

    def _add(self, batch: Any, prios: np.ndarray) -> None:
        raise NotImplementedError

    def sample_update(self) -> None:
        raise NotImplementedError


class ApexAdapter(Adapter):
    name = "apexrl"
    backend = "auto"  # the default: numpy block tree

    def build(self) -> None:
        from apexrl.replay import FramePrioritizedReplay, PrioritizedReplay

        self.buf = (PrioritizedReplay(self.capacity, ALPHA, seed=0, backend=self.backend)
                    if self.wl.kind == "cartpole"
                    else FramePrioritizedReplay(self.capacity, ALPHA, seed=0, backend=self.backend))

    def _make(self, b: int, size: int) -> Any:
        if self.wl.kind == "cartpole":
            return {k: v.copy() for k, v in self.wl.cartpole_batch(b, size).items()}
        frames, _ = self.wl.atari_stream(b, size)  # what FrameStackEncoder.encode emits for it
        idx = (np.arange(size)[:, None] + np.arange(K)).astype(np.int32)
        return {"frames": frames.copy(), "obs_frames": idx, "next_obs_frames": idx + 1,
                "action": np.zeros(size, np.int64), "reward": np.ones(size, np.float32),
                "discount": np.full(size, 0.99, np.float32)}

    def _add(self, batch: Any, prios: np.ndarray) -> None:
        self.buf.add(batch, prios)

    def sample_update(self) -> None:
        _, idx, _ = self.buf.sample(SAMPLE_BATCH, BETA)
        self.buf.update_priorities(idx, self._new_p)

    def stored(self) -> int:
        return len(self.buf)


class ApexNumbaAdapter(ApexAdapter):
    """apexrl with the numba binary sum tree (``backend="numba"``), the default before numpy blocks."""

    name = "apexrl-numba"
    backend = "numba"


class CpprbAdapter(Adapter):
    name = "cpprb"

    def build(self) -> None:
        import cpprb

        if self.wl.kind == "cartpole":
            env = {"obs": {"shape": 4}, "next_obs": {"shape": 4}, "act": {"dtype": np.int64},
                   "rew": {}, "discount": {}}
            self.buf = cpprb.PrioritizedReplayBuffer(self.capacity, env, alpha=ALPHA)
        else:
            # Its most memory-efficient Atari setup: next_obs shares obs memory (next_of) and the
            # stacked axis (last) is stored de-duplicated (stack_compress).
            env = {"obs": {"shape": (*FRAME, K), "dtype": np.uint8}, "act": {"dtype": np.int64},
                   "rew": {}, "discount": {}}
            self.buf = cpprb.PrioritizedReplayBuffer(self.capacity, env, alpha=ALPHA, next_of="obs",
                                                     stack_compress="obs")

    def _make(self, b: int, size: int) -> Any:
        if self.wl.kind == "cartpole":
            c = self.wl.cartpole_batch(b, size)
            return {"obs": c["obs"].copy(), "next_obs": c["next_obs"].copy(), "act": c["action"].copy(),
                    "rew": c["reward"].copy(), "discount": c["discount"].copy()}
        frames, _ = self.wl.atari_stream(b, size)
        win = np.lib.stride_tricks.sliding_window_view(frames, K + 1, axis=0)  # [size, H, W, K+1]
        return {"obs": np.ascontiguousarray(win[..., :K]), "next_obs": np.ascontiguousarray(win[..., 1:]),
                "act": np.zeros(size, np.int64), "rew": np.ones(size, np.float32),
                "discount": np.full(size, 0.99, np.float32)}

    def _add(self, batch: Any, prios: np.ndarray) -> None:
        self.buf.add(priorities=prios, **batch)

    def sample_update(self) -> None:
        s = self.buf.sample(SAMPLE_BATCH, BETA)
        self.buf.update_priorities(s["indexes"], self._new_p)

    def stored(self) -> int:
        return int(self.buf.get_stored_size())


class NaiveAdapter(Adapter):
    """The seed article's buffer (list of tuples, O(N) ``np.random.choice`` sampling), re-implemented
    verbatim in behaviour; ``add`` is per item, as in the article."""

    name = "naive"

    class Buffer:
        def __init__(self, capacity: int, alpha: float = 0.6) -> None:
            self.capacity, self.alpha = capacity, alpha
            self.buffer: list[tuple] = []
            self.priorities = np.zeros((capacity,), dtype=np.float32)
            self.pos = 0

        def add(self, experience: tuple) -> None:
            max_prio = self.priorities.max() if self.buffer else 1.0  # O(N) per item
            if len(self.buffer) < self.capacity:
                self.buffer.append(experience)
            else:
                self.buffer[self.pos] = experience
            self.priorities[self.pos] = max_prio
            self.pos = (self.pos + 1) % self.capacity

        def sample(self, batch_size: int, beta: float = 0.4) -> tuple:
            prios = self.priorities if len(self.buffer) == self.capacity else self.priorities[: self.pos]
            probs = prios**self.alpha
            probs /= probs.sum()
            indices = np.random.choice(len(self.buffer), batch_size, p=probs)
            samples = [self.buffer[idx] for idx in indices]
            weights = (len(self.buffer) * probs[indices]) ** (-beta)
            weights /= weights.max()
            return zip(*samples), indices, weights

        def update_priorities(self, batch_indices: np.ndarray, batch_priorities: np.ndarray) -> None:
            for idx, prio in zip(batch_indices, batch_priorities):
                self.priorities[idx] = prio

    def __init__(self, wl: Workload, capacity: int) -> None:
        super().__init__(wl, capacity)
        if wl.kind != "cartpole":
            raise SkipCase("naive is only benchmarked on CartPole (56 KB/transition on Atari)")

    def build(self) -> None:
        self.buf = self.Buffer(self.capacity, ALPHA)

    def _make(self, b: int, size: int) -> Any:
        c = self.wl.cartpole_batch(b, size)
        return [(c["obs"][i].copy(), int(c["action"][i]), float(c["reward"][i]), c["next_obs"][i].copy(),
                 float(c["discount"][i])) for i in range(size)]

    def _add(self, batch: Any, prios: np.ndarray) -> None:
        for exp in batch:
            self.buf.add(exp)

    def fill(self, n: int, size: int = 512) -> None:
        # Through add() this is O(N^2) (a max over all priorities per item): hours at 1M. Fill the
        # same structures directly, one freshly copied tuple per transition as add() would keep.
        while len(self.buf.buffer) < min(n, self.capacity):
            b = len(self.buf.buffer) // size
            self.buf.buffer.extend(self._make(b, size)[: self.capacity - len(self.buf.buffer)])
        self.buf.priorities[: len(self.buf.buffer)] = np.resize(self.wl.priorities, len(self.buf.buffer))
        self.buf.pos = len(self.buf.buffer) % self.capacity

    def sample_update(self) -> None:
        batch, idx, _ = self.buf.sample(SAMPLE_BATCH, BETA)
        _ = [np.asarray(x) for x in batch]  # a learner needs arrays
        self.buf.update_priorities(idx, self._new_p)

    def stored(self) -> int:
        return len(self.buf.buffer)


class TorchRLAdapter(Adapter):
    name = "torchrl"

    def __init__(self, wl: Workload, capacity: int) -> None:
        super().__init__(wl, capacity)
        reason = torchrl_skip_reason()
        if reason:
            raise SkipCase(reason)
        import torch

        self.torch = torch

    def build(self) -> None:
        from torchrl.data import LazyTensorStorage, PrioritizedReplayBuffer

        self.buf = PrioritizedReplayBuffer(alpha=ALPHA, beta=BETA, storage=LazyTensorStorage(self.capacity),
                                           batch_size=SAMPLE_BATCH)

    def _make(self, b: int, size: int) -> Any:
        from tensordict import TensorDict

        t = self.torch
        if self.wl.kind == "cartpole":
            c = self.wl.cartpole_batch(b, size)
            return TensorDict({k: t.from_numpy(v.copy()) for k, v in c.items()}, batch_size=[size])
        frames, _ = self.wl.atari_stream(b, size)
        win = np.lib.stride_tricks.sliding_window_view(frames, K + 1, axis=0)
        obs = np.ascontiguousarray(np.moveaxis(win[..., :K], -1, 1))
        nxt = np.ascontiguousarray(np.moveaxis(win[..., 1:], -1, 1))
        return TensorDict({"obs": t.from_numpy(obs), "next_obs": t.from_numpy(nxt),
                           "action": t.zeros(size, dtype=t.int64)}, batch_size=[size])

    def _add(self, batch: Any, prios: np.ndarray) -> None:
        idx = self.buf.extend(batch)
        self.buf.update_priority(idx, self.torch.from_numpy(prios))

    def sample_update(self) -> None:
        _, info = self.buf.sample(return_info=True)
        self.buf.update_priority(info["index"], self.torch.from_numpy(self._new_p))

    def stored(self) -> int:
        return len(self.buf)


class SkipCase(Exception):
    """An implementation that cannot run this workload here; the message says why."""


def torchrl_skip_reason() -> str | None:
    try:
        import torch
        import torchrl
    except Exception as e:  # noqa: BLE001 - any import failure is a reason to skip
        return (f"torchrl not importable ({type(e).__name__}: {e}); note: the torchrl 0.14.1 wheel's C++ "
                "extension (needed by its PrioritizedSampler) fails to load with torch 2.13.0 "
                "(undefined symbol), so it needs a source build against this torch")
    try:
        import torchrl._torchrl
    except Exception as e:  # noqa: BLE001
        return (f"torchrl {torchrl.__version__}'s C++ extension does not load with torch {torch.__version__} "
                f"(its PrioritizedSampler needs it; rebuild torchrl from source): {str(e)[:120]}")
    return None


ADAPTERS: dict[str, Callable[[Workload, int], Adapter]] = {
    "apexrl": ApexAdapter, "apexrl-numba": ApexNumbaAdapter, "cpprb": CpprbAdapter, "torchrl": TorchRLAdapter,
    "naive": NaiveAdapter,
}
