"""Actor-side frame de-duplication: stacked observations as ids of frames stored once.

An Atari observation is a stack of the last K=4 84x84 uint8 frames (gymnasium's
``FrameStackObservation``, newest frame last). Consecutive observations share K-1 frames and a
transition's next_obs shares frames with its obs, so sending and storing obs + next_obs stacks
repeats every frame ~2K = 8 times: 56 KB per transition instead of ~7 KB.

:class:`FrameStackEncoder` gives every distinct frame a global int64 id and tracks, per env, the
ids that make up the current stacked observation. The actor carries [K] id stacks through its
ordinary n-step builder instead of pixel arrays, and :meth:`FrameStackEncoder.encode` turns a
batch of (obs ids, next_obs ids) into a self-contained payload: each needed frame once, plus
small per-transition index arrays. :class:`~apexrl.replay.frame_replay.FramePrioritizedReplay`
stores that payload and rebuilds the stacks when sampling.

Per vector-env step, with gymnasium's ``AutoresetMode.SAME_STEP`` (``info["final_obs"]``)::

    ids = enc.observe_reset(np.arange(E), obs)               # once, after envs.reset()
    ...
    obs, r, term, trunc, info = envs.step(actions)
    done = term | trunc
    for e in np.flatnonzero(done):                           # 1. BEFORE observe_step:
        next_ids[e] = enc.observe_final(e, info["final_obs"][e])  # extends the pre-step stack
    ids = enc.observe_step(obs, reset_mask=done)             # 2. done envs restart from obs

With ``NEXT_STEP`` autoreset pass ``reset_mask`` = the previous step's ``done`` instead and skip
``observe_final`` (the final stack arrives as an ordinary step).

Padding at reset: ``FrameStackObservation`` fills the K-1 older slots with copies of the reset
frame (``padding_type="reset"``, the default) or with zeros (``"zero"``). Rather than assume one,
a reset stack gets a new id only where a frame differs from its right-hand neighbour, so either
padding costs one or two stored frames per episode and any custom padding still round-trips.

Memory is bounded: frames live in a ring of ``cache_size`` frames; a frame can be encoded until
``cache_size`` newer frames have been observed (``encode`` raises a clear error after that).
"""

from __future__ import annotations

from typing import Any

import numpy as np


class FrameStackEncoder:
    """Tracks per-env frame-id stacks; encodes transitions as de-duplicated frame payloads.

    Args:
        num_envs: E, the number of envs stepped together.
        stack: K, frames per stacked observation.
        cache_size: frames remembered for :meth:`encode` (a ring); must exceed the frames
            observed while a transition waits to be encoded, about E x (n + K + steps between
            sends). Default: ``max(4096, 128 * num_envs)`` (28 MB for 84x84 frames at E=1).
        check: verify on every step that the K-1 older frames of each stack are the previous
            stack's newer ones (catches a missed reset; costs a frame comparison per env).
    """

    def __init__(self, num_envs: int, stack: int, cache_size: int | None = None, check: bool = False) -> None:
        if num_envs < 1 or stack < 1:
            raise ValueError(f"num_envs and stack must be >= 1, got {num_envs}, {stack}")
        self.num_envs, self.stack = int(num_envs), int(stack)
        self.cache_size = int(cache_size) if cache_size is not None else max(4096, 128 * self.num_envs)
        # A stack's oldest frame was stored at most K steps ago, each storing <= E*K frames.
        if self.cache_size < self.num_envs * self.stack * (self.stack + 1):
            raise ValueError(f"cache_size {self.cache_size} must be >= num_envs * stack * (stack + 1) = "
                             f"{self.num_envs * self.stack * (self.stack + 1)}")
        self.check = check
        self._ids = np.full((self.num_envs, self.stack), -1, dtype=np.int64)  # -1: never reset
        self._cache: np.ndarray | None = None  # [cache_size, *frame_shape], on first observe
        self._next_id = 0

    @property
    def frames_observed(self) -> int:
        """Distinct frames given an id so far (== the next id)."""
        return self._next_id

    # ----------------------------------------------------------------- observing
    def observe_reset(self, env_ids: Any, obs_stacks: np.ndarray) -> np.ndarray:
        """Start new stacks for ``env_ids`` from their reset observations [N, K, ...]; ids [N, K]."""
        env_ids = np.atleast_1d(np.asarray(env_ids, dtype=np.int64))
        obs_stacks = self._check_stacks(obs_stacks, env_ids.shape[0])
        ids = self._new_stacks(obs_stacks)
        self._ids[env_ids] = ids
        return ids.copy()

    def observe_step(self, obs_stacks: np.ndarray, reset_mask: np.ndarray | None = None) -> np.ndarray:
        """Advance every env by one step given the stacks [E, K, ...]; return ids [E, K].

        Envs in ``reset_mask`` (and envs never seen before) start a new stack from ``obs_stacks``;
        the others shift theirs by one and give the newest frame a new id.
        """
        obs_stacks = self._check_stacks(obs_stacks, self.num_envs)
        reset = self._ids[:, -1] < 0
        if reset_mask is not None:
            reset = reset | np.asarray(reset_mask, dtype=bool).reshape(self.num_envs)
        cont = ~reset
        if cont.any():
            if self.check:
                self._verify_shift(np.flatnonzero(cont), obs_stacks[cont])
            self._ids[cont, :-1] = self._ids[cont, 1:]
            self._ids[cont, -1] = self._store(obs_stacks[cont, -1])
        if reset.any():
            self._ids[reset] = self._new_stacks(obs_stacks[reset])
        return self._ids.copy()

    def observe_final(self, env_ids: Any, final_obs_stacks: np.ndarray) -> np.ndarray:
        """Ids of final observations (``info["final_obs"]``) that end the envs' current stacks.

        Call before :meth:`observe_step` of the same vector step: it extends the stack the env
        had before the step and leaves the tracked stack alone. Scalar env id -> [K]; array -> [N, K].
        """
        scalar = np.ndim(env_ids) == 0
        env_ids = np.atleast_1d(np.asarray(env_ids, dtype=np.int64))
        stacks = np.asarray(final_obs_stacks)
        stacks = self._check_stacks(stacks[None] if scalar else stacks, env_ids.shape[0])
        if (self._ids[env_ids, -1] < 0).any():
            raise ValueError(f"observe_final for env(s) {env_ids.tolist()} that have no stack yet")
        if self.check:
            self._verify_shift(env_ids, stacks)
        ids = np.empty((env_ids.shape[0], self.stack), dtype=np.int64)
        ids[:, :-1] = self._ids[env_ids, 1:]
        ids[:, -1] = self._store(stacks[:, -1])
        return ids[0] if scalar else ids

    # ----------------------------------------------------------------- encoding
    def encode(self, obs_ids: np.ndarray, next_obs_ids: np.ndarray) -> dict[str, np.ndarray]:
        """Payload for B transitions: ``frames`` [F, ...] (each needed frame once) and
        ``obs_frames`` / ``next_obs_frames`` int32 [B, K] indices into ``frames``.

        The caller adds the other per-transition keys (action, reward, discount, ...) and passes
        the dict to ``FramePrioritizedReplay.add``.
        """
        obs_ids, next_obs_ids = np.asarray(obs_ids, np.int64), np.asarray(next_obs_ids, np.int64)
        if obs_ids.ndim != 2 or obs_ids.shape[1] != self.stack or obs_ids.shape != next_obs_ids.shape:
            raise ValueError(f"obs_ids and next_obs_ids must both be [B, {self.stack}], got "
                             f"{obs_ids.shape} and {next_obs_ids.shape}")
        if self._cache is None:
            raise ValueError("encode before any frame was observed")
        both = np.concatenate([obs_ids.ravel(), next_obs_ids.ravel()])
        uniq, inverse = np.unique(both, return_inverse=True)
        if uniq.size and (uniq[0] < self._next_id - self.cache_size or uniq[-1] >= self._next_id or uniq[0] < 0):
            raise ValueError(f"frame ids [{uniq[0]}, {uniq[-1]}] are not all in the encoder cache "
                             f"[{max(0, self._next_id - self.cache_size)}, {self._next_id}); "
                             "encode transitions sooner or raise cache_size")
        inverse = inverse.astype(np.int32).reshape(2, *obs_ids.shape)
        return {
            "frames": self._cache[uniq % self.cache_size],
            "obs_frames": inverse[0],
            "next_obs_frames": inverse[1],
        }

    # ----------------------------------------------------------------- internals
    def _check_stacks(self, stacks: Any, n: int) -> np.ndarray:
        stacks = np.asarray(stacks)
        if stacks.ndim < 2 or stacks.shape[:2] != (n, self.stack):
            raise ValueError(f"expected stacks of shape [{n}, {self.stack}, ...], got {stacks.shape}")
        if self._cache is None:
            self._cache = np.zeros((self.cache_size, *stacks.shape[2:]), dtype=stacks.dtype)
        elif stacks.shape[2:] != self._cache.shape[1:] or stacks.dtype != self._cache.dtype:
            raise ValueError(f"frames of shape {stacks.shape[2:]} {stacks.dtype} differ from the first "
                             f"ones, {self._cache.shape[1:]} {self._cache.dtype}")
        return stacks

    def _store(self, frames: np.ndarray) -> np.ndarray:
        """Copy frames [M, ...] into the ring; return their new ids."""
        assert self._cache is not None
        m = frames.shape[0]
        ids = np.arange(self._next_id, self._next_id + m, dtype=np.int64)
        self._cache[ids % self.cache_size] = frames
        self._next_id += m
        return ids

    def _new_stacks(self, stacks: np.ndarray) -> np.ndarray:
        """Ids for whole new stacks [N, K, ...]: a new frame wherever it differs from its right
        neighbour, else the neighbour's id (so repeated padding is stored once)."""
        n, k = stacks.shape[:2]
        new = np.ones((n, k), dtype=bool)
        flat = stacks.reshape(n, k, -1)
        same_as_right = (flat[:, :-1] == flat[:, 1:]).all(axis=2)
        new[:, :-1] = ~same_as_right
        ids = np.empty((n, k), dtype=np.int64)
        ids[new] = self._store(stacks[new])
        # Backward fill: each position takes the id of the nearest new position at or right of it
        # (the newest frame is always new, so one exists).
        pos = np.where(new, np.arange(k), k)
        src = np.minimum.accumulate(pos[:, ::-1], axis=1)[:, ::-1]
        return np.take_along_axis(ids, src, axis=1)

    def _verify_shift(self, env_ids: np.ndarray, stacks: np.ndarray) -> None:
        assert self._cache is not None
        expected = self._cache[self._ids[env_ids, 1:] % self.cache_size]
        n = env_ids.shape[0]
        bad = ~(expected.reshape(n, -1) == stacks[:, :-1].reshape(n, -1)).all(axis=1)
        if bad.any():
            raise ValueError(f"env(s) {env_ids[bad].tolist()}: older frames of the stack are not the "
                             "previous stack shifted by one; was a reset not reported?")

