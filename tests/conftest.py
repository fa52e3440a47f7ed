"""Shared test setup: a clean Ray per test that asks for one, started as apexrl starts it for a user (no
``RAY_*`` variable is set for the suite; tests that start extra nodes on one host set theirs)."""

from __future__ import annotations

import pytest


@pytest.fixture
def ray_local():
    """A private 2-CPU Ray (loopback, its own token), always shut down (no processes left behind)."""
    import ray

    from apexrl.runtime.cluster import init_ray, shutdown_ray

    init_ray(None, num_cpus=2)
    try:
        yield ray
    finally:
        shutdown_ray()


@pytest.fixture
def topologies(monkeypatch):
    """Every :class:`~apexrl.runtime.topology.Topology` built during the test, so a test can reach the
    Ray handles of a running ``train()`` (to kill one)."""
    from apexrl.runtime.topology import Topology

    made: list = []
    orig = Topology.__init__

    def init(self, *args, **kwargs):
        orig(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(Topology, "__init__", init)
    return made
