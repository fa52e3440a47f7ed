"""Sum tree specification: exact sums on tiny trees, prefix search, min tracking, both backends agree."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apexrl.replay.sum_tree import HAVE_NUMBA, SumTree, make_sum_tree

BACKENDS = ["numpy"] + (["numba"] if HAVE_NUMBA else [])


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


def test_a_new_tree_is_empty(backend: str) -> None:
    t = make_sum_tree(5, backend=backend)
    assert t.total == 0.0
    assert t.min == np.inf
    assert t.values().tolist() == [0.0] * 5


def test_total_is_the_exact_sum_of_leaves(backend: str) -> None:
    t = make_sum_tree(4, backend=backend)
    t.set(np.array([0, 1, 2, 3]), np.array([1.0, 2.0, 3.0, 4.0]))
    assert t.total == 10.0
    t.set(np.array([2]), np.array([0.5]))
    assert t.total == 7.5
    assert t.get(np.array([0, 1, 2, 3])).tolist() == [1.0, 2.0, 0.5, 4.0]


def test_capacity_that_is_not_a_power_of_two_pads_with_zeros(backend: str) -> None:
    t = make_sum_tree(3, backend=backend)  # padded internally (to 4, or to a block of 16); padding stays 0
    t.set(np.array([0, 1, 2]), np.array([1.0, 1.0, 1.0]))
    assert t.total == 3.0
    idx, _ = t.find_prefix(np.array([2.999999]))
    assert idx.tolist() == [2]


def test_prefix_search_returns_the_leaf_whose_interval_contains_the_target(backend: str) -> None:
    # cumulative sums: [0,1) -> 0, [1,3) -> 1, [3,6) -> 2, [6,10) -> 3
    t = make_sum_tree(4, backend=backend)
    t.set(np.array([0, 1, 2, 3]), np.array([1.0, 2.0, 3.0, 4.0]))
    targets = np.array([0.0, 0.99, 1.0, 2.5, 3.0, 5.99, 6.0, 9.99])
    idx, val = t.find_prefix(targets)
    assert idx.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert val.tolist() == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0]


def test_prefix_search_never_returns_a_zero_leaf(backend: str) -> None:
    t = make_sum_tree(8, backend=backend)
    t.set(np.array([1, 5]), np.array([2.0, 3.0]))
    # Exactly at a boundary, and at/after the total (what rounding can produce): still a live leaf.
    idx, _ = t.find_prefix(np.array([0.0, 2.0, 4.9, 5.0, 7.0]))
    assert idx.tolist() == [1, 5, 5, 5, 5]


def test_prefix_search_on_an_empty_tree_raises(backend: str) -> None:
    with pytest.raises(ValueError, match="total is 0"):
        make_sum_tree(4, backend=backend).find_prefix(np.array([0.0]))


def test_duplicated_indices_in_one_set_last_value_wins(backend: str) -> None:
    t = make_sum_tree(4, backend=backend)
    t.set(np.array([2, 0, 2, 2]), np.array([5.0, 1.0, 7.0, 3.0]))
    assert t.get(np.array([0, 2])).tolist() == [1.0, 3.0]
    assert t.total == 4.0


def test_min_ignores_zero_leaves(backend: str) -> None:
    t = make_sum_tree(4, backend=backend)
    t.set(np.array([0, 1, 2]), np.array([0.0, 0.25, 3.0]))
    assert t.min == 0.25
    t.set(np.array([1]), np.array([0.0]))
    assert t.min == 3.0


def test_set_range_equals_set(backend: str) -> None:
    a, b = make_sum_tree(10, backend=backend), make_sum_tree(10, backend=backend)
    vals = np.arange(1.0, 6.0)
    a.set_range(3, vals)
    b.set(np.arange(3, 8), vals)
    assert a.total == b.total == 15.0
    assert a.min == b.min == 1.0
    assert same_tree(a, b)


def test_set_range_outside_capacity_raises(backend: str) -> None:
    with pytest.raises(ValueError, match="outside"):
        make_sum_tree(4, backend=backend).set_range(3, np.ones(2))


def test_set_all_rebuilds_the_same_tree_as_incremental_sets(backend: str) -> None:
    rng = np.random.default_rng(0)
    a, b = make_sum_tree(37, backend=backend), make_sum_tree(37, backend=backend)
    for _ in range(20):
        idx = rng.integers(0, 37, size=9)
        a.set(idx, rng.random(9))
    b.set_all(a.values())
    # Bit-identical, not just close: sums are always recomputed from the leaves below them.
    assert same_tree(a, b)


def same_tree(a, b) -> bool:
    """Bit-identical leaves, total, min and answers to a grid of prefix searches."""
    targets = np.linspace(0.0, a.total, 101)
    return (np.array_equal(a.values(), b.values()) and a.total == b.total and a.min == b.min
            and all(np.array_equal(x, y) for x, y in zip(a.find_prefix(targets), b.find_prefix(targets))))


def test_invalid_construction_raises() -> None:
    with pytest.raises(ValueError, match="capacity"):
        make_sum_tree(0)
    with pytest.raises(ValueError, match="capacity"):
        make_sum_tree(0, backend="numba" if HAVE_NUMBA else "numpy")
    with pytest.raises(ValueError, match="backend"):
        make_sum_tree(4, backend="cuda")  # type: ignore[arg-type]


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
def test_numba_and_numpy_backends_agree() -> None:
    rng = np.random.default_rng(1)
    trees = [make_sum_tree(1000, backend="numpy"), make_sum_tree(1000, backend="numba")]
    for step in range(50):
        idx = rng.integers(0, 1000, size=64)  # includes duplicates
        vals = rng.random(64) * (step % 3)  # includes zeros
        for t in trees:
            t.set(idx, vals)
        start = int(rng.integers(0, 900))
        for t in trees:
            t.set_range(start, np.full(50, 0.5 + step))
    a, b = trees
    assert np.array_equal(a.values(), b.values()) and a.min == b.min
    assert a.total == pytest.approx(b.total, rel=1e-14)  # summed in another order
    targets = rng.random(512) * a.total
    (i0, v0), (i1, v1) = a.find_prefix(targets), b.find_prefix(targets)
    cums = np.cumsum(a.values())
    safe = np.abs(cums[i0] - targets) > 1e-9 * a.total  # not within rounding of a leaf's edge
    assert np.array_equal(i0[safe], i1[safe]) and np.array_equal(v0, a.get(i0)) and np.array_equal(v1, b.get(i1))


@pytest.mark.parametrize("capacity", [300_000, 2_000_000])
def test_large_trees_use_larger_blocks_and_find_the_same_leaves(capacity: int) -> None:
    rng = np.random.default_rng(3)
    t = SumTree(capacity)
    leaves = rng.random(capacity) * (rng.random(capacity) < 0.5)  # half of them 0
    t.set_all(leaves)
    assert t._block > 16
    targets = np.sort(rng.random(4096)) * t.total
    idx, val = t.find_prefix(targets)
    cums = np.cumsum(leaves)
    safe = np.abs(cums[idx] - targets) > 1e-9 * t.total
    assert np.array_equal(idx[safe], np.searchsorted(cums, targets, side="right")[safe])
    assert (val > 0).all() and np.array_equal(val, leaves[idx])


def test_the_default_tree_does_not_import_numba() -> None:
    import subprocess
    import sys

    code = ("import sys, numpy as np\nfrom apexrl.replay.prioritized import PrioritizedReplay\n"
            "r = PrioritizedReplay(100)\nr.add({'x': np.zeros((4, 2))}, np.ones(4))\nr.sample(2, 0.4)\n"
            "print('numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stdout + out.stderr


@settings(max_examples=60, deadline=None)
@given(
    capacity=st.integers(1, 40),
    ops=st.lists(st.lists(st.tuples(st.integers(0, 39), st.floats(0, 1e6)), min_size=1, max_size=12),
                 max_size=15),
)
def test_property_tree_matches_a_plain_array(capacity: int, ops: list[list[tuple[int, float]]]) -> None:
    for backend in BACKENDS:
        t = make_sum_tree(capacity, backend=backend)
        ref = np.zeros(capacity)
        for op in ops:
            idx = np.array([i % capacity for i, _ in op])
            vals = np.array([v for _, v in op])
            t.set(idx, vals)
            for i, v in zip(idx, vals):
                ref[i] = v
        assert np.array_equal(t.values(), ref)
        assert t.total == pytest.approx(ref.sum(), rel=1e-12, abs=0.0)
        pos = ref[ref > 0]
        assert t.min == (pos.min() if pos.size else np.inf)
        if ref.sum() > 0:
            cums = np.cumsum(ref)
            targets = np.linspace(0.0, t.total, 17)[:-1]
            idx, _ = t.find_prefix(targets)
            assert (ref[idx] > 0).all()
            # Exact interval check where float rounding of the two sums cannot matter.
            safe = np.abs(cums[idx] - targets) > 1e-9 * t.total
            expect = np.searchsorted(cums, targets, side="right")
            assert np.array_equal(idx[safe], expect[safe])


def test_docstring_examples_run() -> None:
    import doctest

    from apexrl.replay import prioritized, sum_tree

    for module in (sum_tree, prioritized):
        assert doctest.testmod(module).failed == 0


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
def test_a_replay_samples_the_same_ids_with_either_tree() -> None:
    """Through adds that wrap the ring and priority updates: the sampled ids and weights are identical."""
    from apexrl.replay.prioritized import PrioritizedReplay

    rng = np.random.default_rng(0)
    bufs = [PrioritizedReplay(500, 0.9, seed=1, backend=b) for b in ("numpy", "numba")]
    for step in range(300):
        n = int(rng.integers(1, 20))
        batch, priorities = {"x": rng.random((n, 2)).astype(np.float32)}, rng.random(n) * 5
        for b in bufs:
            b.add(batch, priorities)
        if step > 5:
            (i0, w0), (i1, w1) = (b._sampler.sample(16, 0.6, 4) for b in bufs)
            assert np.array_equal(i0, i1) and np.array_equal(w0, w1)
            new = rng.random(i0.size) * 3
            for b in bufs:
                b.update_priorities(i0, new)
