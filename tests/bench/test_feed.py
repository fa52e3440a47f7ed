"""bench feed measures the real path: its null learner receives, through the same loop, client and shards,
exactly what the DQN learner receives, and what it writes back is applied. Frames encode their own number,
so every received stack is checked against the transition it claims to be."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from apexrl.bench.null_learner import NullLearner
from apexrl.config import load
from apexrl.replay.client import LocalShards
from apexrl.replay.shard import ReplayShard
from apexrl.runtime.assembly import assemble

K, N, B, PAYLOAD = 4, 3, 16, 64  # frame stack, n-step, batch, transitions per send
F = PAYLOAD + K - 1 + N  # frames per send: one env's consecutive frames


def _system():
    cfg = load("atari", ["replay.capacity=1024", "replay.learning_starts=64", f"learner.batch_size={B}",
                         "learner.batches_per_request=2", "learner.prefetch=2", "learner.publish_period=1000",
                         "network.head=16"])
    return assemble(cfg, num_actors=1)


def _frame(g: int) -> np.ndarray:
    f = np.full((84, 84), g % 251, np.uint8)
    f[0, :4] = np.frombuffer(np.int32(g).tobytes(), np.uint8)
    return f


def _number(frames: np.ndarray) -> np.ndarray:
    """[..., 84, 84] frames -> [...] the global numbers they were made from."""
    return np.ascontiguousarray(frames[..., 0, :4]).view(np.int32)[..., 0]


def _fill(shard, sends: int) -> None:
    rows = np.arange(PAYLOAD)[:, None]
    rng = np.random.default_rng(1)
    for p in range(sends):
        g = p * F + rows[:, 0]  # transition's first obs frame
        shard.add({"frames": np.stack([_frame(p * F + i) for i in range(F)]),
                   "obs_frames": (rows + np.arange(K)).astype(np.int32),
                   "next_obs_frames": (rows + N + np.arange(K)).astype(np.int32),
                   "action": g % 6, "reward": g.astype(np.float32), "discount": np.full(PAYLOAD, 0.9, np.float32)},
                  rng.uniform(0.1, 1.0, PAYLOAD))


def _check_is_what_it_claims(batch: dict[str, np.ndarray]) -> None:
    """obs frames g..g+K-1 and next_obs g+N..g+N+K-1 of the transition whose reward says g."""
    g = batch["reward"].astype(np.int64)[:, None]
    np.testing.assert_array_equal(_number(batch["obs"]), g + np.arange(K))
    np.testing.assert_array_equal(_number(batch["next_obs"]), g + N + np.arange(K))
    np.testing.assert_array_equal(batch["action"], g[:, 0] % 6)


class Recording:
    """The DQN learner, keeping a copy of what it was given."""

    def __init__(self, learner) -> None:
        self.learner, self.received = learner, []

    def __getattr__(self, name):
        return getattr(self.learner, name)

    def update(self, batch, weights):
        self.received.append(({k: np.array(v) for k, v in batch.items()}, np.array(weights)))
        return self.learner.update(batch, weights)


def _run(system, learner, updates: int):
    shard = ReplayShard(**system.shard_kwargs(0), reuse_batches=True)
    _fill(shard, sends=8)
    loop = system.make_learner_loop(LocalShards([shard]), lambda version, weights: None, learner=learner)
    written: list[tuple[np.ndarray, np.ndarray]] = []
    write_back = loop.client.write_back
    loop.client.write_back = lambda s, idx, prio: (written.append((idx.copy(), prio.copy())), write_back(s, idx, prio))
    loop.train(60.0, max_updates=updates)
    return shard, loop, written


def test_the_null_learner_receives_what_the_dqn_learner_receives_and_its_priorities_are_applied():
    system = _system()
    real = Recording(system.make_learner())
    null = NullLearner.for_system(system, record=True)
    runs = {"dqn": (_run(system, real, 6), real.received), "null": (_run(system, null, 6), null.received)}
    for (shard, loop, written), received in runs.values():
        assert len(received) == len(written) == 6
        for batch, _ in received:
            _check_is_what_it_claims(batch)
        # Every write-back sent with a later request is in the shard's tree: p^alpha (the last one wins).
        # Requests still in flight carry some: run them; those not yet attached to any stay pending.
        while loop.client.inflight:
            loop.client.transport.result(loop.client.inflight.popleft()[1])
        pending = sum(len(i) for i, _ in loop.client.pending[0])
        sent = {}
        for idx, prio in written[: len(written) - pending // B]:
            sent.update(zip(idx.tolist(), prio.tolist()))
        ids = np.array(list(sent))
        got = shard.buffer._sampler._tree.get(ids % shard.buffer.capacity)
        np.testing.assert_allclose(got, np.array(list(sent.values())) ** system.cfg.replay.alpha, rtol=1e-12)
    # Same shard seed, same first request: the same transitions, arrays and IS weights for both learners.
    (_, _, dqn_written), dqn_received = runs["dqn"]
    (_, _, null_written), null_received = runs["null"]
    for j in range(2):  # the first request carried two batches
        np.testing.assert_array_equal(dqn_written[j][0], null_written[j][0])
        np.testing.assert_array_equal(dqn_received[j][1], null_received[j][1])
        for key, value in dqn_received[j][0].items():
            np.testing.assert_array_equal(value, null_received[j][0][key])


def test_through_ray_a_reused_gather_buffer_never_changes_a_batch_the_learner_holds(ray_local):
    """The shard gathers every answer into the same arrays; with two requests in flight the next answer is
    gathered while the learner still uses the previous one, so Ray must have copied it out."""
    ray = ray_local
    from apexrl.runtime.transport import ParameterServer
    from apexrl.runtime.workers import LearnerWorker, ReplayShardWorker

    system = _system()
    shard = ReplayShardWorker.remote(**system.shard_kwargs(0))

    class Sink:  # _fill's adds, as Ray calls
        def add(self, payload, prios):
            ray.get(shard.add.remote(payload, prios))

    _fill(Sink(), sends=8)
    ps = ParameterServer.remote()
    make = functools.partial(NullLearner.for_system, update_s=0.002, record=True)
    learner = LearnerWorker.remote(system, [shard], ps, 1, make)
    stats = ray.get(learner.train.remote(30.0, 40))
    received = ray.get(learner.state_dict.remote())["received"]
    assert stats["updates"] == len(received) == 40
    for batch, weights in received:
        _check_is_what_it_claims(batch)
        assert batch["obs"].shape == (B, K, 84, 84) and weights.shape == (B,)
    # Not the same transitions over and over: 40 batches of 16 from 512 stored
    assert len({int(r) for batch, _ in received for r in batch["reward"]}) > 200


@pytest.mark.parametrize("reuse", [False, True])
def test_a_shard_answer_of_k_batches_is_the_k_independent_draws(reuse):
    """k batches per request are k stratified draws in one gather: the same as k single-batch requests."""
    system = _system()
    one, many = (ReplayShard(**system.shard_kwargs(0), reuse_batches=reuse) for _ in range(2))
    for s in (one, many):
        _fill(s, sends=4)
    # A reused answer is valid until the next sample: copy it as Ray does.
    singles = [{**a, "batch": {k: v.copy() for k, v in a["batch"].items()}} for a in
               (one.sample(B, 0.4) for _ in range(3))]
    stacked = many.sample(B, 0.4, num_batches=3)
    assert stacked["num_batches"] == 3
    np.testing.assert_array_equal(stacked["indices"], np.concatenate([a["indices"] for a in singles]))
    np.testing.assert_array_equal(stacked["weights"], np.concatenate([a["weights"] for a in singles]))
    for key in stacked["batch"]:
        np.testing.assert_array_equal(stacked["batch"][key], np.concatenate([a["batch"][key] for a in singles]))
