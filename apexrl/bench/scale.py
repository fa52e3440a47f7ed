"""The control plane at the paper's scale, with simulated actors: what the driver, the board and the
shards cost as the number of actors grows.

    apexrl bench scale --actors 8,64,360,1000 [--rate 35] [--per-host 125] [--seconds 30] [--config cartpole]

Per N, on a private Ray: the real driver loop (``runtime/driver.Loop``: fleet, supervisor, board summaries,
reports), the real replay shards, parameter server and board, the real ``LearnerWorker`` around a learner
that does not learn (``--update-ms`` per batch, publishing every ``--publish-every`` updates), and N
simulated actors, ``--per-host`` to a process. A simulated actor is the real ``ActorLoop`` (pushes,
leases, pause and stop) around a null actor that steps a null env at ``--rate`` steps/s (35: the paper's
per-actor agent-step rate, 50k frames/s over 360 actors at action repeat 4), sends ``send_every``
transitions shaped as the preset's actors send them through the real ``RayReplaySink``, and polls the real
``RayWeightSource`` every ``--poll-every`` env steps (8: 0.23 s at 35 steps/s; real actors pull every
``actors.weight_sync_period``, Ape-X's 400 frames), so the weight latency is the fan-out's plus at most
that poll period, not a sync period's.

Reported per N, over ``--seconds`` after a warm-up: the driver process's CPU (% of a core) and its Ray
actor calls per second; the board's pushes per second; the shards' CPU and calls per second (sends and
sample requests); weight publication -> in the actor's hands (median, p99) against the publication
period; the share of the actors' time spent outside their env's step (sends, weight polls, the loop),
and waiting on the board; env steps/s against N x rate; memory (PSS) per simulated actor; the driver's RSS.
Results: bench-results/scale-<date>.json.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import ray

from apexrl.bench._results import write_result


class _NullPolicy:
    exploration = np.array([0.1])
    exploration_name = "epsilon"

    def observe_global_steps(self, n: int) -> None:
        pass


class NullActor:
    """What ``ActorLoop`` drives, with the env and the network taken out: paced steps, real sends and
    weight polls. Episodes of ``episode_len`` steps end with return 1."""

    def __init__(self, cfg: Any, sink: Any, weights: Any, rate: float, payload: dict[str, np.ndarray],
                 poll_every: int, episode_len: int = 500) -> None:
        self.cfg, self.sink, self.weights, self.period = cfg, sink, weights, 1.0 / rate
        self.poll_every = poll_every
        self.payload, self.prios = payload, np.ones(len(payload["action"]))
        self.policy, self.episode_len = _NullPolicy(), episode_len
        self.env_steps = self.pending = 0
        self.next_t = time.perf_counter()
        self.env_s = self.poll_s = 0.0
        self.latencies: list[float] = []
        self.sends = 0

    def run(self, n: int, global_env_steps: int | None = None) -> dict[str, Any]:
        t0, started_at = time.perf_counter(), time.time()
        returns: list[float] = []
        for _ in range(n):
            self.next_t += self.period
            te = time.perf_counter()
            if self.next_t < te - 1.0:
                self.next_t = te  # fell more than a second behind: do not burst to catch up
            if self.next_t > te:
                time.sleep(self.next_t - te)
            self.env_s += time.perf_counter() - te
            self.env_steps += 1
            self.pending += 1
            if self.pending >= self.cfg.actors.send_every:
                self.sink.add(self.payload, self.prios)
                self.pending, self.sends = 0, self.sends + 1
            if self.env_steps % self.poll_every == 0:
                tp = time.perf_counter()
                got = self.weights.poll()
                self.poll_s += time.perf_counter() - tp
                if got is not None and "published_at" in got[1]:
                    self.latencies.append(time.time() - float(got[1]["published_at"][0]))
            if self.env_steps % self.episode_len == 0:
                returns.append(1.0)
        return {"env_steps": n, "time_s": time.perf_counter() - t0, "episode_returns": returns,
                "episode_lengths": [self.episode_len] * len(returns), "episode_exploration": [0.1] * len(returns),
                "exploration": [0.1], "exploration_name": "epsilon", "started_at": started_at}


@ray.remote(concurrency_groups={"control": 1})
class SimActorHost:
    """Many simulated actors in one process: each ``loop(j)`` call holds a thread of the default group
    (sized to them, plus one for Ray's readiness ping)."""

    def __init__(self, system: Any, indices: list[int], shards: list[Any], ps: Any, board: Any, rate: float,
                 poll_every: int, seed: int) -> None:
        from apexrl.bench.feed import payloads
        from apexrl.runtime.actor_loop import ActorLoop
        from apexrl.runtime.board import push_period
        from apexrl.runtime.transport import RayControl, RayReplaySink, RayWeightSource

        cfg = system.cfg
        payload = next(payloads(system, np.random.default_rng(seed), cfg.actors.send_every))
        period = push_period(system.num_actors, cfg.logging.report_interval_s)
        self.loops: dict[int, Any] = {}
        self.actors: dict[int, NullActor] = {}
        self.sinks: dict[int, Any] = {}
        for i in indices:
            self.sinks[i] = RayReplaySink(shards, cfg.actors.max_inflight_sends, start=i)
            self.actors[i] = NullActor(cfg, self.sinks[i], RayWeightSource(ps), rate, payload, poll_every)
            self.loops[i] = ActorLoop(self.actors[i], RayControl(board, i), period,  # type: ignore[arg-type]
                                      acknowledge=self.sinks[i].acknowledge)

    def loop(self, i: int) -> str:
        return self.loops[i].run()

    @ray.method(concurrency_group="control")
    def pause(self, i: int, timeout_s: float = 60.0) -> bool:
        return self.loops[i].pause(timeout_s)

    @ray.method(concurrency_group="control")
    def resume(self, i: int) -> None:
        self.loops[i].resume()

    @ray.method(concurrency_group="control")
    def stop(self, i: int) -> None:
        self.loops[i].stop()

    @ray.method(concurrency_group="control")
    def set_shards(self, i: int, shards: list[Any]) -> None:
        self.sinks[i].set_shards(shards)

    @ray.method(concurrency_group="control")
    def stats(self) -> dict[str, Any]:
        import psutil

        mem = psutil.Process().memory_full_info()
        a, lp, s = self.actors.values(), self.loops.values(), self.sinks.values()
        return {"steps": sum(x.env_steps for x in a), "env_s": sum(x.env_s for x in a),
                "poll_s": sum(x.poll_s for x in a), "sends": sum(x.sends for x in a),
                "send_s": sum(x.blocked_s for x in s), "board_wait_s": sum(x.waited_s for x in lp),
                "latencies": [v for x in a for v in x.latencies], "pss_mb": getattr(mem, "pss", mem.rss) / 1e6,
                "cpu_s": time.process_time(), "actors": len(self.actors)}


class _Method:
    def __init__(self, host: Any, name: str, i: int) -> None:
        self.host, self.name, self.i = host, name, i

    def remote(self, *args: Any) -> Any:
        return getattr(self.host, self.name).remote(self.i, *args)


class SimActorHandle:
    """A simulated actor as the fleet, the supervisor and the start watch see an actor handle."""

    def __init__(self, host: Any, i: int) -> None:
        self.host, self.i = host, i
        for name in ("loop", "pause", "resume", "stop", "set_shards"):
            setattr(self, name, _Method(host, name, i))
        self.__ray_ready__ = host.__ray_ready__


def _sim_topology(system: Any, rate: float, per_host: int, update_ms: float, poll_every: int) -> Any:
    from apexrl.bench.null_learner import NullLearner
    from apexrl.runtime.topology import Topology
    from apexrl.runtime.workers import LearnerWorker

    class Stamped(NullLearner):
        def weights(self) -> dict[str, np.ndarray]:
            return {**super().weights(), "published_at": np.array([time.time()])}

    class SimTopology(Topology):
        hosts: list[Any]

        def make_learner(self) -> Any:
            make = functools.partial(Stamped.for_system, update_s=update_ms / 1e3)
            return LearnerWorker.options(num_cpus=1).remote(self.system, self.shards, self.ps, 1, make)

        def make_actor(self, i: int) -> Any:
            if not hasattr(self, "hosts"):
                n = self.num_actors
                self.hosts = [SimActorHost.options(num_cpus=0.01, max_concurrency=min(per_host, n - h) + 1).remote(
                    self.system, list(range(h, min(n, h + per_host))), self.shards, self.ps, self.board, rate, poll_every, h)
                    for h in range(0, n, per_host)]
            return SimActorHandle(self.hosts[i // per_host], i)

        def kill(self) -> None:
            super().kill()
            for h in self.hosts:
                ray.kill(h)

    return SimTopology(system)


class _CallCounter:
    """Counts the Ray actor calls this process makes (the driver's)."""

    def __init__(self) -> None:
        from ray.actor import ActorMethod

        self.n, self.active, self.cls, self.orig = 0, True, ActorMethod, ActorMethod.remote

        def counted(method: Any, *args: Any, **kwargs: Any) -> Any:
            self.n += self.active
            return self.orig(method, *args, **kwargs)

        ActorMethod.remote = counted  # type: ignore[method-assign]

    def close(self) -> None:
        self.cls.remote = self.orig  # type: ignore[method-assign]


def measure(n: int, args: argparse.Namespace) -> dict[str, Any]:
    import psutil

    from apexrl.config import load
    from apexrl.metrics import Console
    from apexrl.runtime.assembly import assemble
    from apexrl.runtime.cluster import init_ray, shutdown_ray
    from apexrl.runtime.driver import Loop

    cfg = load(args.config, ["learner.device=cpu", "learner.num_gpus=0", "actors.num_gpus=0",
                             f"actors.num_actors={n}", "actors.envs_per_actor=1",
                             "replay.samples_per_insert=null", "replay.learning_starts=256", "replay.capacity=100000",
                             "evaluation.interval_s=0", "checkpoint.every_reports=0", "logging.console=off",
                             "logging.tensorboard=false", f"learner.publish_period={args.publish_every}",
                             *([f"actors.send_every={args.send_every}"] if args.send_every else []), *args.set])
    hosts = -(-n // args.per_host)
    init_ray(None, num_cpus=hosts + 2)
    counter = None
    try:
        system = assemble(cfg, num_actors=n)
        topology = _sim_topology(system, args.rate, args.per_host, args.update_ms, args.poll_every)
        loop = Loop(system.cfg, topology, Path(tempfile.mkdtemp(prefix="apexrl-scale-")), Console("off"), None, None)
        loop.start()
        loop.advance(args.warmup)
        deadline = time.monotonic() + 300  # many hosts on few cores start slowly: measure once weights flow
        while ray.get(topology.ps.get.remote(-1)) is None and time.monotonic() < deadline:
            loop.advance(2.0)
        counter = _CallCounter()

        def snap() -> dict[str, Any]:
            counter.active = False  # the benchmark's own calls are not the driver's
            out = {"t": time.monotonic(), "cpu": time.process_time(), "calls": counter.n,
                   "hosts": ray.get([h.stats.remote() for h in topology.hosts]),
                   "shard_cpu": sum(p["cpu_s"] for p in ray.get([s.profile.remote() for s in topology.shards])),
                   "pushes": ray.get(topology.board.pushed.remote()), "updates": loop.progress.updates,
                   "versions": (ray.get(topology.ps.get.remote(-1)) or (0,))[0],
                   "driver_rss_mb": psutil.Process().memory_info().rss / 1e6}
            counter.active = True
            return out

        a = snap()
        loop.advance(args.seconds)
        b = snap()
        counter.close()
        counter = None
        dt = b["t"] - a["t"]
        tot = lambda k: sum(h[k] for h in b["hosts"]) - sum(h[k] for h in a["hosts"])  # noqa: E731
        acting_s = n * dt
        lat = sorted(v for ha, hb in zip(a["hosts"], b["hosts"]) for v in hb["latencies"][len(ha["latencies"]):])
        pubs = (b["versions"] - a["versions"]) / max(1, args.publish_every)
        steps = tot("steps")
        row = {
            "actors": n, "hosts": hosts, "seconds": round(dt, 1),
            "driver_cpu_pct": round(100 * (b["cpu"] - a["cpu"]) / dt, 2),
            "driver_calls_per_s": round((b["calls"] - a["calls"]) / dt, 1),
            "board_pushes_per_s": round((b["pushes"] - a["pushes"]) / dt, 1),
            "shard_cpu_pct": round(100 * (b["shard_cpu"] - a["shard_cpu"]) / dt, 1),
            "shard_calls_per_s": round((tot("sends") + (b["updates"] - a["updates"]) / system.batches_per_request) / dt, 1),
            "publication_period_s": round(dt / pubs, 2) if pubs else None,
            "weight_latency_median_s": round(statistics.median(lat), 3) if lat else None,
            "weight_latency_p99_s": round(float(np.percentile(lat, 99)), 3) if lat else None,
            "non_env_share": round(1 - tot("env_s") / acting_s, 4),
            "board_wait_share": round(tot("board_wait_s") / acting_s, 5),
            "send_share": round(tot("send_s") / acting_s, 4),
            "env_steps_per_s": round(steps / dt, 1), "env_steps_per_s_ideal": n * args.rate,
            "driver_rss_mb": round(b["driver_rss_mb"], 1),
            "pss_mb_per_actor": round(sum(h["pss_mb"] for h in b["hosts"]) / n, 2),
            "learner_updates_per_s": round((b["updates"] - a["updates"]) / dt, 1),
        }
        loop.fleet.stop()
        topology.kill()
        return row
    finally:
        if counter is not None:
            counter.close()
        shutdown_ray()


def format_row(r: dict[str, Any]) -> str:
    lat = f"{r['weight_latency_median_s']}/{r['weight_latency_p99_s']}" if r["weight_latency_median_s"] is not None \
        else "-"
    return (f"{r['actors']:>5} | {r['driver_cpu_pct']:>6.2f} | {r['driver_calls_per_s']:>6.1f} | "
            f"{r['board_pushes_per_s']:>6.1f} | {r['shard_cpu_pct']:>5.1f} | {r['shard_calls_per_s']:>6.1f} | "
            f"{lat:>12} s | {r['publication_period_s']} s | {100 * r['non_env_share']:>5.2f}% | "
            f"{100 * r['board_wait_share']:.3f}% | {r['env_steps_per_s']:>8.0f} / {r['env_steps_per_s_ideal']:.0f} | "
            f"{r['pss_mb_per_actor']:.2f} MB | {r['driver_rss_mb']:.0f} MB")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="apexrl bench scale", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--actors", default="8,64,360,1000", help="comma-separated numbers of simulated actors")
    ap.add_argument("--rate", type=float, default=35.0, help="env steps/s of each simulated actor")
    ap.add_argument("--per-host", type=int, default=125, help="simulated actors per process")
    ap.add_argument("--seconds", type=float, default=30.0, help="measured window per N")
    ap.add_argument("--warmup", type=float, default=10.0, help="seconds before the window (start-up, replay warm-up)")
    ap.add_argument("--config", default="cartpole", help="preset whose sends are simulated (cartpole, atari)")
    ap.add_argument("--send-every", type=int, default=50, help="transitions per send (Ape-X: 50); 0: the preset's")
    ap.add_argument("--poll-every", type=int, default=8, help="env steps between a simulated actor's weight polls")
    ap.add_argument("--update-ms", type=float, default=50.0, help="the null learner's time per update")
    ap.add_argument("--publish-every", type=int, default=20, help="updates between publications")
    ap.add_argument("--set", action="append", default=[], help="more config overrides, key=value")
    args = ap.parse_args(argv)
    rows = []
    print("actors | driver CPU % | driver calls/s | board pushes/s | shard CPU % | shard calls/s | weight latency "
          "median/p99 | publication period | time outside env | waiting on board | env steps/s / ideal | PSS/actor | driver RSS")
    for n in [int(x) for x in args.actors.split(",")]:
        row = measure(n, args)
        rows.append(row)
        print(format_row(row), flush=True)
    write_result("scale", {"rows": rows, "args": vars(args), "cpus": os.cpu_count()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
