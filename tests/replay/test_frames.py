"""FrameStackEncoder and FramePrioritizedReplay specification (exact, small cases)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from apexrl.replay import FramePrioritizedReplay, FrameStackEncoder

K = 4


def frame(v: int) -> np.ndarray:
    return np.full((2, 3), v, dtype=np.uint8)


def stack(*vals: int) -> np.ndarray:
    return np.stack([frame(v) for v in vals])


def reconstruct(payload: dict[str, np.ndarray], key: str) -> np.ndarray:
    return payload["frames"][payload[key]]


# --------------------------------------------------------------------------- encoder
def test_reset_padding_by_repetition_is_stored_once() -> None:
    enc = FrameStackEncoder(num_envs=1, stack=K)
    ids = enc.observe_reset([0], stack(7, 7, 7, 7)[None])
    assert ids.tolist() == [[0, 0, 0, 0]] and enc.frames_observed == 1


def test_zero_padding_costs_two_frames() -> None:
    enc = FrameStackEncoder(num_envs=1, stack=K)
    ids = enc.observe_reset([0], stack(0, 0, 0, 9)[None])
    assert ids.tolist() == [[0, 0, 0, 1]] and enc.frames_observed == 2


def test_a_step_shifts_the_stack_and_adds_one_frame_per_env() -> None:
    enc = FrameStackEncoder(num_envs=2, stack=K)
    enc.observe_reset([0, 1], np.stack([stack(1, 1, 1, 1), stack(2, 2, 2, 2)]))
    ids = enc.observe_step(np.stack([stack(1, 1, 1, 3), stack(2, 2, 2, 4)]))
    assert ids.tolist() == [[0, 0, 0, 2], [1, 1, 1, 3]]


def test_reset_mask_restarts_only_the_masked_envs() -> None:
    enc = FrameStackEncoder(num_envs=2, stack=K)
    enc.observe_reset([0, 1], np.stack([stack(1, 1, 1, 1), stack(2, 2, 2, 2)]))
    ids = enc.observe_step(np.stack([stack(1, 1, 1, 3), stack(5, 5, 5, 5)]), reset_mask=np.array([False, True]))
    assert ids.tolist() == [[0, 0, 0, 2], [3, 3, 3, 3]]


def test_observe_final_extends_the_pre_step_stack_without_changing_it() -> None:
    enc = FrameStackEncoder(num_envs=1, stack=K)
    enc.observe_reset([0], stack(1, 1, 1, 1)[None])
    final = enc.observe_final(0, stack(1, 1, 1, 8))
    assert final.tolist() == [0, 0, 0, 1]
    ids = enc.observe_step(stack(6, 6, 6, 6)[None], reset_mask=np.array([True]))
    assert ids.tolist() == [[2, 2, 2, 2]]


def test_encode_sends_each_frame_once_and_reconstructs_both_stacks() -> None:
    enc = FrameStackEncoder(num_envs=1, stack=K)
    stacks = [stack(0, 0, 0, 1)]
    ids = [enc.observe_reset([0], stacks[0][None])[0]]
    for v in range(2, 7):
        stacks.append(np.concatenate([stacks[-1][1:], frame(v)[None]]))
        ids.append(enc.observe_step(stacks[-1][None])[0])
    obs_ids, next_ids = np.stack(ids[:-3]), np.stack(ids[3:])  # 3-step transitions
    payload = enc.encode(obs_ids, next_ids)
    assert payload["frames"].shape[0] == 7  # frames 0..6, each once
    assert payload["obs_frames"].dtype == np.int32
    np.testing.assert_array_equal(reconstruct(payload, "obs_frames"), np.stack(stacks[:-3]))
    np.testing.assert_array_equal(reconstruct(payload, "next_obs_frames"), np.stack(stacks[3:]))


def test_check_mode_catches_a_missed_reset() -> None:
    enc = FrameStackEncoder(num_envs=1, stack=K, check=True)
    enc.observe_reset([0], stack(1, 1, 1, 1)[None])
    with pytest.raises(ValueError, match="reset not reported"):
        enc.observe_step(stack(5, 5, 5, 5)[None])


def test_encoding_frames_that_left_the_cache_raises() -> None:
    enc = FrameStackEncoder(num_envs=1, stack=2, cache_size=6)
    first = enc.observe_reset([0], np.stack([frame(0), frame(1)])[None])
    for v in range(2, 10):
        enc.observe_step(np.stack([frame(v - 1), frame(v)])[None])
    with pytest.raises(ValueError, match="encoder cache"):
        enc.encode(first, first)


def test_encoder_rejects_bad_shapes() -> None:
    enc = FrameStackEncoder(num_envs=2, stack=K)
    with pytest.raises(ValueError, match="stacks of shape"):
        enc.observe_reset([0, 1], stack(1, 1, 1, 1)[None])
    enc.observe_reset([0, 1], np.stack([stack(1, 1, 1, 1)] * 2))
    with pytest.raises(ValueError, match="differ from the first"):
        enc.observe_step(np.zeros((2, K, 3, 3), np.uint8))
    with pytest.raises(ValueError, match=r"\[B, 4\]"):
        enc.encode(np.zeros((3, 2), np.int64), np.zeros((3, 2), np.int64))
    with pytest.raises(ValueError, match="cache_size"):
        FrameStackEncoder(num_envs=4, stack=4, cache_size=10)


# --------------------------------------------------------------------------- replay
def stream(n_steps: int, start: int = 0) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """A payload of 1-step transitions from one env over frames start..start+n_steps+K-1."""
    fr = np.stack([frame(v % 256) for v in range(start, start + n_steps + K)])
    obs_idx = np.arange(n_steps)[:, None] + np.arange(K)
    payload = {"frames": fr, "obs_frames": obs_idx.astype(np.int32), "next_obs_frames": (obs_idx + 1).astype(np.int32),
               "action": np.arange(start, start + n_steps, dtype=np.int64),
               "reward": np.ones(n_steps, np.float32), "discount": np.full(n_steps, 0.99, np.float32)}
    return payload, fr[obs_idx], fr[obs_idx + 1]


def test_sample_returns_stacks_like_an_ordinary_replay() -> None:
    buf = FramePrioritizedReplay(capacity=100, seed=0)
    payload, obs, next_obs = stream(10)
    ids = buf.add(payload)
    batch, idx, w = buf.sample(32, beta=0.4)
    assert set(batch) == {"obs", "next_obs", "action", "reward", "discount"}
    assert batch["obs"].shape == (32, K, 2, 3) and batch["obs"].dtype == np.uint8
    np.testing.assert_array_equal(batch["obs"], obs[idx - ids[0]])
    np.testing.assert_array_equal(batch["next_obs"], next_obs[idx - ids[0]])
    assert w.dtype == np.float32


def test_frame_ring_overflow_evicts_the_oldest_transitions_first() -> None:
    buf = FramePrioritizedReplay(capacity=100, frame_capacity=30, seed=0)
    a = buf.add(stream(10, start=0)[0])  # 14 frames
    b = buf.add(stream(10, start=20)[0])  # 14 frames: 28 of 30
    assert len(buf) == 20
    payload, obs, _ = stream(10, start=40)
    c = buf.add(payload)  # would overwrite a's frames: a's transitions go first
    assert len(buf) == 20 and buf.frames_added == 42
    batch, idx, _ = buf.sample(200, beta=0.4)
    assert set(idx.tolist()) == set(b.tolist()) | set(c.tolist())
    from_c = idx >= c[0]
    np.testing.assert_array_equal(batch["obs"][from_c], obs[idx[from_c] - c[0]])
    # The learner's late update for an evicted transition is ignored.
    assert buf.update_priorities(a[:3], np.full(3, 5.0)) == 0


def test_transition_capacity_still_applies() -> None:
    buf = FramePrioritizedReplay(capacity=15, frame_capacity=1000, seed=0)
    buf.add(stream(10)[0])
    buf.add(stream(10, start=50)[0])
    _, idx, _ = buf.sample(100, beta=0.4)
    assert len(buf) == 15 and idx.min() >= 5


def test_a_bad_payload_raises_and_changes_nothing() -> None:
    buf = FramePrioritizedReplay(capacity=50, seed=0)
    good, _, _ = stream(5)
    buf.add(good)
    with pytest.raises(ValueError, match="lacks"):
        buf.add({k: v for k, v in good.items() if k != "frames"})
    with pytest.raises(ValueError, match="index into frames"):
        buf.add({**good, "obs_frames": good["obs_frames"] + 100})
    with pytest.raises(ValueError, match="frames .* differ"):
        buf.add({**good, "frames": np.zeros((9, 3, 3), np.uint8)})
    with pytest.raises(ValueError, match="'reward'"):
        buf.add({**good, "reward": np.ones(5, np.float64)})
    with pytest.raises(ValueError, match="frame_capacity"):
        FramePrioritizedReplay(capacity=50, frame_capacity=3).add(good)
    assert len(buf) == 5 and buf.frames_added == 9


def test_state_dict_round_trip_continues_bit_exactly() -> None:
    a = FramePrioritizedReplay(capacity=40, frame_capacity=50, seed=1)
    for s in range(0, 60, 12):
        a.add(stream(12, start=s)[0], priorities=np.linspace(0.1, 2, 12))
    b = FramePrioritizedReplay(capacity=40, frame_capacity=50, seed=2)
    b.load_state_dict(pickle.loads(pickle.dumps(a.state_dict())))
    for s in range(100, 130, 6):
        ba, ia, wa = a.sample(8, beta=0.4)
        bb, ib, wb = b.sample(8, beta=0.4)
        assert np.array_equal(ia, ib) and np.array_equal(wa, wb)
        assert all(np.array_equal(ba[k], bb[k]) for k in ba)
        payload = stream(6, start=s)[0]
        assert np.array_equal(a.add(payload), b.add(payload))
        a.update_priorities(ia, wa + 1)
        b.update_priorities(ib, wb + 1)
    assert len(a) == len(b) and a.frames_added == b.frames_added


def test_memory_per_transition_for_atari_frames_is_under_8_kib() -> None:
    # Deterministic bound from the allocation (the benchmark measures RSS on a 1M buffer).
    buf = FramePrioritizedReplay(capacity=10_000)
    payload = {"frames": np.zeros((516, 84, 84), np.uint8),
               "obs_frames": np.zeros((512, 4), np.int32), "next_obs_frames": np.zeros((512, 4), np.int32),
               "action": np.zeros(512, np.int64), "reward": np.zeros(512, np.float32),
               "discount": np.zeros(512, np.float32)}
    buf.add(payload)
    assert buf.nbytes / buf.capacity < 8192


def test_numpy_gather_fallback_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    import apexrl.replay.frame_replay as fr

    payload, obs, next_obs = stream(10)
    results = []
    for backend in (fr.numba, None):
        monkeypatch.setattr(fr, "numba", backend)
        buf = FramePrioritizedReplay(capacity=100, seed=0)
        ids = buf.add(payload)
        batch, idx, _ = buf.sample(16, beta=0.4)
        np.testing.assert_array_equal(batch["obs"], obs[idx - ids[0]])
        np.testing.assert_array_equal(batch["next_obs"], next_obs[idx - ids[0]])
        results.append(batch)
    assert all(np.array_equal(results[0][k], results[1][k]) for k in results[0])
