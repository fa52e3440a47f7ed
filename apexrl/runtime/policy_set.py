"""Several policies behind the one learner interface the runtime knows: each trained policy has its own shards
(a contiguous group), its own replay client, learner and priorities; one publication carries every policy's
weights under ``<policy id>/`` names, so the parameter server, checkpoints, ``best.pt`` and a recovering learner
handle them as one flat set of weights. Ray-free; the learner worker and the in-process runner run it as they
run one policy's :class:`~apexrl.runtime.learning.LearnerLoop`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from apexrl.agents.base import Learner
from apexrl.core import Weights
from apexrl.replay.client import ShardTransport
from apexrl.runtime.learning import LearnerLoop, Publish

SEP = "/"


def join(per_policy: dict[str, Weights]) -> Weights:
    return {f"{p}{SEP}{k}": v for p, w in per_policy.items() for k, v in w.items()}


def split(weights: Weights) -> dict[str, Weights]:
    """``join``'s inverse; a policy's own names may hold the separator (only the first one splits)."""
    out: dict[str, Weights] = {}
    for k, v in weights.items():
        p, _, name = k.partition(SEP)
        out.setdefault(p, {})[name] = v
    return out


class GroupTransport:
    """Shards ``offset .. offset + n - 1`` of the run seen by one policy's replay client as ``0 .. n - 1``."""

    def __init__(self, transport: ShardTransport, offset: int) -> None:
        self.transport, self.offset = transport, offset

    def request(self, s: int, *args: Any) -> Any:
        return self.transport.request(self.offset + s, *args)

    def result(self, handle: Any) -> dict[str, Any] | None:
        return self.transport.result(handle)


class PolicySetLearner:
    """Every policy's learner as one: ``updates`` counts them all (a publication's version only grows), the
    state holds each policy's under its id."""

    def __init__(self, learners: dict[str, Learner]) -> None:
        self.learners = learners
        self._base = 0  # updates a recovered learner counts beyond its policies' (versions stay newer)

    @property
    def updates(self) -> int:
        return self._base + sum(lr.updates for lr in self.learners.values())

    @property
    def skipped_updates(self) -> int:
        return sum(lr.skipped_updates for lr in self.learners.values())

    @property
    def consecutive_skips(self) -> int:
        return max(lr.consecutive_skips for lr in self.learners.values())

    def weights(self) -> Weights:
        return join({p: lr.weights() for p, lr in self.learners.items()})

    def state_dict(self) -> dict[str, Any]:
        return {"policies": {p: lr.state_dict() for p, lr in self.learners.items()}, "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """A checkpoint's state; ``net`` (flat, prefixed: published weights, ``best.pt``) replaces each policy's
        network, as for one policy."""
        parts = {p: dict(st) for p, st in (state.get("policies") or {}).items()}
        missing = [p for p in self.learners if p not in parts and "net" not in state]
        if missing:
            raise ValueError(f"the checkpoint holds no state for policy '{missing[0]}' (it has "
                             f"{', '.join(parts) or 'none'})")
        nets = split(state["net"]) if "net" in state else {}
        for p, lr in self.learners.items():
            st = parts.get(p) or lr.state_dict()
            if p in nets:
                st["net"] = nets[p]
            lr.load_state_dict(st)
        self._base = max(0, int(state.get("updates", 0)) - sum(lr.updates for lr in self.learners.values()))


class PolicySetLoop:
    """One :class:`LearnerLoop` per trained policy, stepped in turn; policies not trained keep their weights
    and go out with every publication. Same interface as a ``LearnerLoop``."""

    def __init__(self, loops: dict[str, LearnerLoop], learner: PolicySetLearner, publish: Publish,
                 sleep: Callable[[float], None]) -> None:
        self.loops, self.learner, self._publish, self._sleep = loops, learner, publish, sleep
        self.version = 0
        self.client = _Clients([lp.client for lp in loops.values()])
        for lp in loops.values():
            lp._publish = self._one_published
        self.publish()

    def _one_published(self, version: int, weights: Weights) -> None:
        self.publish()

    def publish(self) -> None:
        self.version = self.learner.updates
        self._publish(self.version, self.learner.weights())

    def train(self, duration_s: float, max_updates: int | None = None,
              stop_when_refused: bool = False) -> dict[str, Any]:
        import time

        t0 = time.perf_counter()
        n = 0
        per: dict[str, list[dict[str, Any]]] = {p: [] for p in self.loops}
        while time.perf_counter() - t0 < duration_s and (max_updates is None or n < max_updates):
            got = 0
            for p, lp in self.loops.items():
                res = lp.train(float("inf"), max_updates=1, stop_when_refused=True)
                per[p].append(res)
                got += res["updates"]
            n += got
            if not got:
                if stop_when_refused:
                    break
                self._sleep(0.002)
        return self._merge(per, n, time.perf_counter() - t0)

    def _merge(self, per: dict[str, list[dict[str, Any]]], n: int, elapsed: float) -> dict[str, Any]:
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        for p, results in per.items():
            for r in results:
                for k, v in r["metrics"].items():
                    for key in (k, f"{k}/{p}"):  # the mean over policies, and each policy's
                        sums[key] = sums.get(key, 0.0) + v * r["updates"]
                        counts[key] = counts.get(key, 0) + r["updates"]
        last = [rs[-1] for rs in per.values() if rs]
        return {
            "metrics": {k: sums[k] / counts[k] for k in sums if counts[k]},
            "cpu_s": sum(r["cpu_s"] for rs in per.values() for r in rs),
            "updates": n,
            "total_updates": self.learner.updates,
            "skipped_updates": self.learner.skipped_updates,
            "consecutive_skips": self.learner.consecutive_skips,
            "time_s": elapsed,
            "idle_s": sum(r["idle_s"] for rs in per.values() for r in rs),
            "gap_s": 0.0,
            "replay_size": int(sum(r["replay_size"] for r in last)),
            "replay_inserted": int(sum(r["replay_inserted"] for r in last)),
            "beta": float(np.mean([r["beta"] for r in last])) if last else 0.0,
            "weights_version": self.version,
        }


class _Clients:
    """The replay clients of every policy as the one a learner worker tells about replaced shards."""

    def __init__(self, clients: list[Any]) -> None:
        self.clients = clients

    @property
    def sizes(self) -> np.ndarray:
        return np.concatenate([c.sizes for c in self.clients])

    @property
    def inserted(self) -> np.ndarray:
        return np.concatenate([c.inserted for c in self.clients])

    def replaced(self, shards: list[int]) -> None:
        offset = 0
        for c in self.clients:
            n = len(c.sizes)
            c.replaced([s - offset for s in shards if offset <= s < offset + n])
            offset += n


def actor_sink(system: Any, make: Callable[[list[Any]], Any], shards: list[Any]) -> Any:
    """An actor's sink over the run's ``shards``: ``make(shards)``, or with several policies one such sink per
    trained policy's group of shards."""
    return GroupedSink(make, shards, len(system.trained)) if system.policies else make(shards)


class GroupedSink:
    """An actor's sends split by policy: one sink per trained policy over that policy's group of shards, made
    by ``make(shards)`` (Ray's or in-process sink); the rest of an actor's transport sees one sink."""

    def __init__(self, make: Callable[[list[Any]], Any], shards: list[Any], groups: int) -> None:
        self.per = len(shards) // groups
        self.sinks = [make(shards[g * self.per:(g + 1) * self.per]) for g in range(groups)]

    def group(self, g: int) -> Any:
        return self.sinks[g]

    def add(self, batch: Any, priorities: np.ndarray) -> None:
        raise TypeError("a policy's sends go to GroupedSink.group(g)")

    def flush(self) -> None:
        for s in self.sinks:
            s.flush()

    def acknowledge(self) -> None:
        for s in self.sinks:
            s.acknowledge()

    def set_shards(self, shards: list[Any]) -> None:
        for g, s in enumerate(self.sinks):
            s.set_shards(shards[g * self.per:(g + 1) * self.per])

    @property
    def dropped(self) -> int:
        return sum(s.dropped for s in self.sinks)

    @property
    def blocked_s(self) -> float:
        return sum(s.blocked_s for s in self.sinks)
