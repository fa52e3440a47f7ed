"""Property tests: PrioritizedReplay against a dict model under any sequence of adds, updates, samples."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from apexrl.replay import PrioritizedReplay
from apexrl.replay.sum_tree import HAVE_NUMBA

priority = st.floats(min_value=0.0, max_value=1e3, allow_nan=False, allow_infinity=False)


class ReplayMachine(RuleBasedStateMachine):
    """Model: ``live`` maps each live id to its raw priority; ids are consecutive and FIFO."""

    @initialize(capacity=st.integers(1, 12), alpha=st.sampled_from([0.0, 0.5, 0.6, 1.0]),
                backend=st.sampled_from(["numpy", "numba"] if HAVE_NUMBA else ["numpy"]))
    def setup(self, capacity: int, alpha: float, backend: str) -> None:
        self.buf = PrioritizedReplay(capacity, alpha=alpha, seed=0, backend=backend)  # type: ignore[arg-type]
        self.capacity, self.alpha = capacity, alpha
        self.live: dict[int, float] = {}
        self.next_id = 0
        self.max_p = 1.0
        self.issued: list[int] = []  # ids the "learner" holds, possibly stale by now

    @rule(n=st.integers(1, 20), data=st.data())
    def add(self, n: int, data: st.DataObject) -> None:
        ids = np.arange(self.next_id, self.next_id + n)
        given = data.draw(st.none() | st.lists(priority, min_size=n, max_size=n))
        batch = {"id": ids.astype(np.int64), "obs": np.stack([ids, -ids], axis=1).astype(np.float32)}
        got = self.buf.add(batch, None if given is None else np.array(given))
        assert got.tolist() == ids.tolist()
        if given is not None:
            self.max_p = max(self.max_p, max(given))
        for i, i_ in enumerate(ids):
            self.live[int(i_)] = self.max_p if given is None else given[i]
        self.next_id += n
        for old in [k for k in self.live if k < self.next_id - self.capacity]:
            del self.live[old]

    @precondition(lambda self: bool(self.issued))
    @rule(data=st.data())
    def update(self, data: st.DataObject) -> None:
        ids = data.draw(st.lists(st.sampled_from(self.issued), min_size=1, max_size=10))
        prios = data.draw(st.lists(priority, min_size=len(ids), max_size=len(ids)))
        applied = self.buf.update_priorities(np.array(ids, dtype=np.int64), np.array(prios))
        assert applied == sum(i in self.live for i in ids)
        for i, p in zip(ids, prios):  # in order: the last duplicate wins
            if i in self.live:
                self.live[i] = p
                self.max_p = max(self.max_p, p)

    @precondition(lambda self: any(np.float64(p) ** self.alpha > 0 for p in self.live.values()))
    @rule(batch_size=st.integers(1, 16))
    def sample(self, batch_size: int) -> None:
        batch, idx, w = self.buf.sample(batch_size, beta=0.4)
        assert all(int(i) in self.live for i in idx), "sampled a dead index"
        mass = {i: np.float64(p) ** self.alpha for i, p in self.live.items()}  # 0**0 == 1
        assert all(mass[int(i)] > 0 for i in idx), "sampled an item with no probability mass"
        assert np.array_equal(batch["id"], idx), "data does not belong to the index"
        assert np.all((w >= 0) & (w <= 1.0))  # 0 only by float32 underflow at absurd ratios
        self.issued.extend(int(i) for i in idx)

    @invariant()
    def counters_match(self) -> None:
        if not hasattr(self, "buf"):
            return
        assert len(self.buf) == len(self.live)
        assert self.buf.total_added == self.next_id
        assert self.buf.max_priority == self.max_p

    @invariant()
    def total_is_sum_of_live_priorities_to_the_alpha(self) -> None:
        if not hasattr(self, "buf"):
            return
        # 0 ** 0 == 1 in numpy too: with alpha 0 every live item is equally likely.
        expected = sum(np.float64(p) ** self.alpha for p in self.live.values())
        assert self.buf.total_priority == pytest.approx(expected, rel=1e-9, abs=1e-12)


ReplayMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestReplayMachine = ReplayMachine.TestCase
