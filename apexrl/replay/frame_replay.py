"""Replay-side frame de-duplication: transitions reference frames kept once in their own ring.

    FramePrioritizedReplay = PrioritizedSampler (which)
                           x ArrayStorage (per-transition: frame slots, action, reward, ...)
                           x a frame ring [frame_capacity, *frame_shape]

``add`` takes the payload of :meth:`FrameStackEncoder.encode <apexrl.replay.frames.FrameStackEncoder.encode>`
(plus the caller's per-transition keys); ``sample`` returns ordinary ``obs`` / ``next_obs``
[B, K, ...] stacks gathered from the frame ring, so the learner cannot tell the difference from
:class:`~apexrl.replay.prioritized.PrioritizedReplay`.

Consistency: a transition may only be sampled while all of its frames are in the ring. Frames
are written in payload order, so when the next payload's frames would overwrite frames of the
oldest payloads, those payloads' transitions are evicted first (FIFO order is preserved: the
transitions evicted are always the oldest ones). Eviction is per payload, which is conservative
by at most one payload.

Sampling gathers obs and next_obs with a numba kernel that reads each transition's frames from
the ring once (a next_obs frame that is also one of its obs frames is copied from the obs just
written): 5 instead of 8 random frame reads per 1-step transition; numpy ``take`` otherwise.

Memory bound, with frame bytes f (7,056 for 84x84 uint8) and per-transition bytes t (2K int32
slots + action/reward/discount, ~45 B for K=4):
    total = frame_capacity * f + capacity * t   (+ 32 B/slot of sum/min tree)
Payloads of B transitions from E envs carry about B + E (K - 1 + n) frames (n-step overlap), so
frames per transition is ~1 + E(K-1+n)/B: 1.012 for B=512, E=1, K=4, n=3. The default
``frame_capacity = capacity + capacity // 16`` lets transitions bind for B >~ 100 (then
~7.5 KB/transition); with smaller payloads the frame ring binds first and ``len`` levels off a few
percent below ``capacity`` at (frames per transition * f + t) bytes per stored transition.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

import numpy as np

from apexrl.replay.sampler import PrioritizedSampler, SamplerViews, check_priorities
from apexrl.replay.storage import ArrayStorage
from apexrl.replay.sum_tree import Backend

_FRAME_KEYS = ("frames", "obs_frames", "next_obs_frames")

try:
    import numba
except ImportError:  # pragma: no cover - numpy fallback below
    numba = None

if numba is not None:

    @numba.njit(cache=True, nogil=True)
    def _nb_gather_pair(ring, obs_slots, next_slots, obs_out, next_out):  # pragma: no cover - compiled
        # Random reads from a ring of hundreds of MB are the cost; a next_obs frame that is also
        # one of the same transition's obs frames (K-1 of K for 1-step transitions) is copied
        # from the cache-hot obs output instead of the ring.
        n, k = obs_slots.shape
        for b in range(n):
            for j in range(k):
                src = ring[obs_slots[b, j]]
                dst = obs_out[b, j]
                for x in range(src.shape[0]):
                    dst[x] = src[x]
            for j in range(k):
                s = next_slots[b, j]
                hit = -1
                for i in range(k):
                    if obs_slots[b, i] == s:
                        hit = i
                src = obs_out[b, hit] if hit >= 0 else ring[s]
                dst = next_out[b, j]
                for x in range(src.shape[0]):
                    dst[x] = src[x]


class FramePrioritizedReplay(SamplerViews):
    """Prioritized replay of frame-stacked transitions with each frame stored once.

    Same API as :class:`~apexrl.replay.prioritized.PrioritizedReplay`; ``add`` takes an encoder
    payload, ``sample`` returns ``obs`` and ``next_obs`` instead of the frame index keys.
    """

    def __init__(self, capacity: int, alpha: float = 0.6, seed: int | None = None,
                 frame_capacity: int | None = None, backend: Backend = "auto") -> None:
        self._sampler = PrioritizedSampler(capacity, alpha, seed, backend=backend)
        self._storage = ArrayStorage(capacity)
        self.frame_capacity = int(frame_capacity) if frame_capacity is not None else capacity + capacity // 16
        if self.frame_capacity < 1:
            raise ValueError(f"frame_capacity must be >= 1, got {frame_capacity!r}")
        self._frames: np.ndarray | None = None  # [frame_capacity, *frame_shape], on first add
        self._next_frame = 0  # frames ever written
        # (first transition id, first frame id) of each payload that may still have live transitions.
        self._payloads: deque[tuple[int, int]] = deque()
        self._out: tuple[np.ndarray, np.ndarray] | None = None  # gather(reuse=True)'s output arrays

    # ----------------------------------------------------------------- introspection
    @property
    def frames_added(self) -> int:
        return self._next_frame

    @property
    def nbytes(self) -> int:
        """Bytes of preallocated storage: frame ring + per-transition arrays (excluding trees)."""
        return self._storage.nbytes + (0 if self._frames is None else self._frames.nbytes)

    # ----------------------------------------------------------------- API
    def add(self, payload: Mapping[str, Any], priorities: np.ndarray | None = None) -> np.ndarray:
        """Store an encoder payload of B transitions; return their B int64 indices."""
        frames, obs_idx, next_idx, rest = self._validate(payload)
        n = obs_idx.shape[0]
        p = None if priorities is None else check_priorities(priorities, n)
        f = frames.shape[0]
        # 1. Evict the payloads whose frames the new ones overwrite (oldest first).
        overwritten_below = self._next_frame + f - self.frame_capacity
        while self._payloads and self._payloads[0][1] < overwritten_below:
            self._payloads.popleft()
        self._sampler.evict_before(self._payloads[0][0] if self._payloads else self._sampler.next_id)
        # 2. Write frames; per-transition frame indices become ring slots.
        first_frame = self._next_frame
        self._write_frames(frames)
        to_slot = ((first_frame + np.arange(f, dtype=np.int64)) % self.frame_capacity).astype(np.int32)
        rest["obs_frames"] = to_slot[obs_idx]
        rest["next_obs_frames"] = to_slot[next_idx]
        # 3. Transitions, FIFO by capacity as in PrioritizedReplay.
        start = self._sampler.next_id % self.capacity
        ids = self._sampler.insert(n, p)
        self._storage.write(start, rest, n)
        if n:
            self._payloads.append((int(ids[0]), first_frame))
        while len(self._payloads) > 1 and self._payloads[1][0] <= self._sampler.oldest_id:
            self._payloads.popleft()  # all of its transitions were evicted by capacity
        return ids

    def gather(self, ids: np.ndarray, reuse: bool = False) -> dict[str, np.ndarray]:
        """The transitions ``ids`` (from ``draw``) with their stacks rebuilt from the frame ring.

        ``reuse``: write the stacks into arrays kept for the next call of the same size instead of fresh
        ones: the caller must be done with them by then (a Ray shard is: its answer is copied into the
        object store before the next request runs). Fresh arrays of 15-60 MB come from the OS and fault
        in page by page on every call; that cost more than the gather itself (bench feed).
        """
        batch = self._storage.read(ids % self.capacity)
        assert self._frames is not None
        obs_slots, next_slots = batch.pop("obs_frames"), batch.pop("next_obs_frames")
        shape = (*obs_slots.shape, *self._frames.shape[1:])
        obs, nxt = self._outputs(shape, reuse)
        if numba is not None:
            ring = self._frames.reshape(self._frames.shape[0], -1)
            _nb_gather_pair(ring, obs_slots, next_slots, obs.reshape(*obs_slots.shape, -1),
                            nxt.reshape(*obs_slots.shape, -1))
        else:
            np.take(self._frames, obs_slots, axis=0, out=obs)
            np.take(self._frames, next_slots, axis=0, out=nxt)
        batch["obs"], batch["next_obs"] = obs, nxt
        return batch

    def _outputs(self, shape: tuple[int, ...], reuse: bool) -> tuple[np.ndarray, np.ndarray]:
        assert self._frames is not None
        if reuse and self._out is not None and self._out[0].shape == shape:
            return self._out
        out = np.empty(shape, self._frames.dtype), np.empty(shape, self._frames.dtype)
        if reuse:
            self._out = out
        return out

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> int:
        """As :meth:`PrioritizedReplay.update_priorities`: stale indices are ignored, last duplicate wins."""
        return self._sampler.update(indices, priorities)

    # ----------------------------------------------------------------- checkpoint
    def state_dict(self) -> dict[str, Any]:
        filled = min(self.total_added, self.capacity)
        frames_filled = min(self._next_frame, self.frame_capacity)
        return {
            "sampler": self._sampler.state_dict(),
            "storage": self._storage.state_dict(filled),
            "frame_capacity": self.frame_capacity,
            "frames": None if self._frames is None else self._frames[:frames_filled].copy(),
            "next_frame": self._next_frame,
            "payloads": list(self._payloads),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if int(state["frame_capacity"]) != self.frame_capacity:
            raise ValueError(f"state has frame_capacity={state['frame_capacity']}, this replay "
                             f"{self.frame_capacity}")
        self._sampler.load_state_dict(state["sampler"])
        self._storage.load_state_dict(state["storage"])
        frames = state["frames"]
        self._frames = None
        if frames is not None:
            self._frames = np.empty((self.frame_capacity, *frames.shape[1:]), dtype=frames.dtype)
            self._frames[: frames.shape[0]] = frames
        self._next_frame = int(state["next_frame"])
        self._payloads = deque((int(a), int(b)) for a, b in state["payloads"])

    # ----------------------------------------------------------------- internals
    def _validate(
        self, payload: Mapping[str, Any]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        missing = [k for k in _FRAME_KEYS if k not in payload]
        if missing:
            raise ValueError(f"payload lacks {missing}; build it with FrameStackEncoder.encode")
        frames = np.asarray(payload["frames"])
        obs_idx = np.asarray(payload["obs_frames"])
        next_idx = np.asarray(payload["next_obs_frames"])
        if frames.ndim < 2:
            raise ValueError(f"frames must be [F, ...frame shape], got shape {frames.shape}")
        f = frames.shape[0]
        if f > self.frame_capacity:
            raise ValueError(f"payload has {f} frames > frame_capacity {self.frame_capacity}")
        if self._frames is not None and (frames.shape[1:] != self._frames.shape[1:]
                                         or frames.dtype != self._frames.dtype):
            raise ValueError(f"frames {frames.shape[1:]} {frames.dtype} differ from the first add's "
                             f"{self._frames.shape[1:]} {self._frames.dtype}")
        for name, idx in (("obs_frames", obs_idx), ("next_obs_frames", next_idx)):
            if idx.ndim != 2 or not np.issubdtype(idx.dtype, np.integer):
                raise ValueError(f"{name} must be an integer [B, K] array, got {idx.dtype} {idx.shape}")
            if idx.size and (idx.min() < 0 or idx.max() >= f):
                raise ValueError(f"{name} must index into frames [0, {f}), got [{idx.min()}, {idx.max()}]")
        if obs_idx.shape != next_idx.shape:
            raise ValueError(f"obs_frames {obs_idx.shape} and next_obs_frames {next_idx.shape} differ")
        rest = {k: v for k, v in payload.items() if k not in _FRAME_KEYS}
        # Validate the full per-transition schema (including the [B, K] index columns) up front,
        # so a bad payload raises before anything is written or evicted.
        check = {**rest, "obs_frames": obs_idx.astype(np.int32, copy=False),
                 "next_obs_frames": next_idx.astype(np.int32, copy=False)}
        arrays, _ = self._storage.validate(check)
        arrays.pop("obs_frames"), arrays.pop("next_obs_frames")
        return frames, obs_idx, next_idx, arrays

    def _write_frames(self, frames: np.ndarray) -> None:
        if self._frames is None:
            self._frames = np.empty((self.frame_capacity, *frames.shape[1:]), dtype=frames.dtype)
        f = frames.shape[0]
        start = self._next_frame % self.frame_capacity
        head = min(f, self.frame_capacity - start)
        self._frames[start : start + head] = frames[:head]
        if head < f:
            self._frames[: f - head] = frames[head:]
        self._next_frame += f
