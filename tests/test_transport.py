"""Weight pulls through the parameter server: a long poll, so actors do not call it every sync period."""

from __future__ import annotations

import time

import numpy as np


def _publish(ray, ps, version: int, value: float) -> None:
    ref = ray.put({"w": np.full(3, value, dtype=np.float32)})
    ray.get(ps.set.remote(version, [ref]))


def test_an_open_weight_request_is_answered_by_the_next_publication(ray_local):
    ray = ray_local
    from apexrl.runtime.transport import ParameterServer, RayWeightSource

    ps = ParameterServer.remote()
    src = RayWeightSource(ps)
    assert src.poll() is None  # opens the long poll; nothing published yet
    time.sleep(0.3)
    assert src.poll() is None  # still open: the server holds it instead of answering "nothing new"
    _publish(ray, ps, 0, 1.0)
    got = None
    deadline = time.monotonic() + 10
    while got is None and time.monotonic() < deadline:
        got = src.poll()
        time.sleep(0.01)
    assert got is not None
    version, weights = got
    assert version == 0 and np.all(weights["w"] == 1.0)
    assert src.version == 0


def test_a_long_poll_returns_nothing_after_its_wait_and_at_once_without_one(ray_local):
    ray = ray_local
    from apexrl.runtime.transport import ParameterServer

    ps = ParameterServer.remote()
    t0 = time.monotonic()
    assert ray.get(ps.get.remote(-1)) is None  # no wait asked: answers at once
    assert ray.get(ps.get.remote(-1, 0.5)) is None
    assert time.monotonic() - t0 >= 0.5
    _publish(ray, ps, 3, 2.0)
    assert ray.get(ps.get.remote(3, 0.2)) is None  # nothing newer than what the caller has
    version, [ref] = ray.get(ps.get.remote(2, 30.0))  # newer exists: no wait
    assert version == 3 and np.all(ray.get(ref)["w"] == 2.0)


def test_an_older_publication_never_replaces_a_newer_one(ray_local):
    ray = ray_local
    from apexrl.runtime.transport import ParameterServer

    ps = ParameterServer.remote()
    _publish(ray, ps, 5, 5.0)
    _publish(ray, ps, 4, 4.0)
    version, [ref] = ray.get(ps.get.remote(-1))
    assert version == 5 and np.all(ray.get(ref)["w"] == 5.0)


def test_an_actor_heeds_a_shards_wait_before_its_next_send_not_after_max_inflight(ray_local):
    """A shard's "the learner is behind, wait" is obeyed before the actor's next send even when fewer
    than ``max_inflight`` sends are out: the actor must not pour more data from an old network into
    replay while the learner catches up."""
    ray = ray_local
    from apexrl.runtime.transport import RayReplaySink

    @ray.remote
    class Shard:
        def __init__(self) -> None:
            self.adds, self.polls, self.polls_before_add = 0, 0, []

        def add(self, batch, priorities) -> bool:
            self.adds += 1
            self.polls_before_add.append(self.polls)
            return self.adds < 2  # the second send puts the actor too far ahead

        def insert_allowed(self) -> bool:
            self.polls += 1
            return self.polls >= 3  # the learner catches up after a few polls

        def log(self) -> list[int]:
            return self.polls_before_add

    shard = Shard.remote()
    sink = RayReplaySink([shard], max_inflight=8)
    batch = {"obs": np.zeros((4, 2), np.float32)}
    for _ in range(2):
        sink.add(batch, np.ones(4))
    ray.wait([sink._inflight[-1][1]], timeout=10)  # the refusal has arrived
    sink.add(batch, np.ones(4))
    sink.flush()
    assert ray.get(shard.log.remote()) == [0, 0, 3]


def test_an_actor_keeps_one_send_in_flight_until_a_shard_has_answered(ray_local):
    """Sends do not pile up behind a shard whose process is still starting: they would all land at once,
    past the rate limiter's warm-up gate. After the first answer the actor pipelines up to max_inflight."""
    ray = ray_local
    from apexrl.runtime.transport import RayReplaySink

    @ray.remote
    class SlowStartingShard:
        def __init__(self) -> None:
            time.sleep(1.0)

        def add(self, batch, priorities) -> bool:
            return True

    shard = SlowStartingShard.remote()
    sink = RayReplaySink([shard], max_inflight=8)
    batch = {"obs": np.zeros((4, 2), np.float32)}
    sink.add(batch, np.ones(4))
    first = sink._inflight[0][1]
    sink.add(batch, np.ones(4))  # returns only once the first send is answered (the shard is up)
    assert ray.wait([first], timeout=0)[0] and len(sink._inflight) == 1
    assert sink._heard  # from now on up to max_inflight sends may be out
    sink.flush()
    assert not sink._inflight


def test_the_server_keeps_its_own_copy_of_weights_whose_owner_died(ray_local):
    ray = ray_local
    from apexrl.runtime.transport import ParameterServer

    @ray.remote(num_cpus=0)
    class Owner:
        def publish(self, ps, version: int, value: float) -> None:
            self.ref = ray.put({"w": np.full(3, value, dtype=np.float32)})  # owned by this process
            ray.get(ps.set.remote(version, [self.ref]))

    ps = ParameterServer.remote()
    owner = Owner.remote()
    ray.get(owner.publish.remote(ps, 1, 1.0))
    deadline = time.monotonic() + 10
    while ray.get(ps.backup.remote()) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    ray.get(owner.publish.remote(ps, 2, 2.0))  # within BACKUP_S of the first: not copied
    ray.kill(owner)
    version, [ref] = ray.get(ps.get.remote(-1))
    assert version == 2
    try:
        ray.get(ref, timeout=10)
    except ray.exceptions.ObjectLostError:
        pass  # usually gone with its owner; the server's copy is what a restarted learner gets
    version, weights = ray.get(ps.backup.remote())
    assert version == 1 and np.all(weights["w"] == 1.0)
