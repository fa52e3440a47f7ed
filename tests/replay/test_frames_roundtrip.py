"""Property: env -> FrameStackObservation -> encoder -> FramePrioritizedReplay -> sample reproduces
exactly the stacked observations the env produced, across resets, terminations and truncations,
for both vector autoreset modes and both paddings, while the replay evicts by capacity and frames."""

from __future__ import annotations

from collections import deque

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers import FrameStackObservation
from hypothesis import given, settings
from hypothesis import strategies as st

from apexrl.replay import FramePrioritizedReplay, FrameStackEncoder


class RandomFrames(gym.Env):
    """Frames of random pixels in 0..3 (tiny, so identical frames occur); episodes end by
    termination or truncation after lengths taken in turn from ``episodes``."""

    observation_space = gym.spaces.Box(0, 255, (2, 3), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, episodes: list[tuple[int, bool]]) -> None:
        self.episodes, self.k, self.t = episodes, -1, 0

    def _frame(self) -> np.ndarray:
        return self.np_random.integers(0, 4, (2, 3), dtype=np.uint8)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.k, self.t = (self.k + 1) % len(self.episodes), 0
        return self._frame(), {}

    def step(self, action):
        self.t += 1
        length, terminates = self.episodes[self.k]
        end = self.t >= length
        return self._frame(), 1.0, end and terminates, end and not terminates, {}


episode = st.tuples(st.integers(1, 7), st.booleans())


@settings(max_examples=40, deadline=None)
@given(
    num_envs=st.integers(1, 3),
    stack=st.integers(1, 4),
    n_step=st.integers(1, 3),
    padding=st.sampled_from(["reset", "zero"]),
    mode=st.sampled_from([AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP]),
    episodes=st.lists(st.lists(episode, min_size=1, max_size=4), min_size=3, max_size=3),
    send_every=st.integers(1, 9),
    capacity=st.integers(4, 40),
    frame_slack=st.integers(0, 30),
    seed=st.integers(0, 2**16),
)
def test_sampled_stacks_equal_the_env_stacks(num_envs, stack, n_step, padding, mode, episodes,
                                             send_every, capacity, frame_slack, seed) -> None:
    envs = SyncVectorEnv(
        [lambda e=e: FrameStackObservation(RandomFrames(episodes[e]), stack, padding_type=padding)
         for e in range(num_envs)],
        autoreset_mode=mode,
    )
    enc = FrameStackEncoder(num_envs, stack, check=True)
    # Largest payload: send_every + num_envs * n_step transitions, each with 2K frames at most.
    max_frames = 2 * stack * (send_every + num_envs * n_step)
    buf = FramePrioritizedReplay(capacity, seed=seed, frame_capacity=max_frames + frame_slack)
    truth: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    obs, _ = envs.reset(seed=seed)
    ids = enc.observe_reset(np.arange(num_envs), obs)
    history = [deque() for _ in range(num_envs)]  # (ids, stack) of the last n observations
    out: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    prev_done = np.zeros(num_envs, bool)

    def flush() -> None:
        if out:
            o_ids, n_ids, o_true, n_true = map(np.stack, zip(*out))
            payload = enc.encode(o_ids, n_ids)
            payload["action"] = np.zeros(len(out), np.int64)
            for i, t_id in enumerate(buf.add(payload)):
                truth[int(t_id)] = (o_true[i], n_true[i])
            out.clear()

    for _ in range(40):
        nxt, _, term, trunc, info = envs.step(np.zeros(num_envs, np.int64))
        done = term | trunc
        next_ids = np.empty((num_envs, stack), np.int64)
        next_true = nxt.copy()
        if mode == AutoresetMode.SAME_STEP:
            for e in np.flatnonzero(done):
                next_ids[e] = enc.observe_final(e, info["final_obs"][e])
                next_true[e] = info["final_obs"][e]
            new_ids = enc.observe_step(nxt, reset_mask=done)
        else:
            new_ids = enc.observe_step(nxt, reset_mask=prev_done)
        next_ids[~done] = new_ids[~done]
        if mode == AutoresetMode.NEXT_STEP:
            next_ids[done] = new_ids[done]  # the final stack arrives as an ordinary step
        for e in range(num_envs):
            if mode == AutoresetMode.NEXT_STEP and prev_done[e]:
                history[e].clear()  # this step was the reset: no transition into it
                continue
            history[e].append((ids[e], obs[e]))
            if len(history[e]) == n_step or done[e]:
                while history[e]:
                    o_id, o = history[e].popleft()
                    out.append((o_id, next_ids[e], o, next_true[e]))
                    if not done[e]:
                        break
        if len(out) >= send_every:
            flush()
        ids, obs, prev_done = new_ids, nxt, done
    flush()

    assert 0 < len(buf) <= capacity
    assert set(truth) >= set(range(buf.total_added - len(buf), buf.total_added))
    batch, idx, _ = buf.sample(64, beta=0.4)
    assert (idx >= buf.total_added - len(buf)).all()
    for b, i in enumerate(idx):
        np.testing.assert_array_equal(batch["obs"][b], truth[int(i)][0])
        np.testing.assert_array_equal(batch["next_obs"][b], truth[int(i)][1])
