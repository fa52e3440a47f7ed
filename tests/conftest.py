"""Shared test setup: Ray on loopback only, and a clean Ray per test that asks for one."""

from __future__ import annotations

import os

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")

import pytest


@pytest.fixture
def ray_local():
    """A private 2-CPU Ray, always shut down (no processes left behind)."""
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
             logging_level="WARNING")
    try:
        yield ray
    finally:
        ray.shutdown()


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
