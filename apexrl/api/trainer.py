"""``ApexTrainer``: the distributed system as an iterative trainer, in RLlib's shape.

    ray.init(address="auto")                     # optional: join a `ray start` cluster; else a loopback Ray
    trainer = ApexTrainer(config={"env": "CartPole-v1", "num_workers": 8, "lr": 1e-4})
    for i in range(100):
        result = trainer.train()                 # ~min_time_s_per_iteration of the whole system
        print(result["episode_reward_mean"])
        if i % 10 == 0:
            path = trainer.save()
    trainer.stop()

Each call advances the driver loop ``apexrl train`` runs (reports, evaluations, checkpoints, restarts) for
one iteration; between calls the system holds still, as RLlib's Algorithm does: actors and learner finish
the work in flight and take no more, and the learner's weights are published, so ``get_weights``,
``compute_single_action``, ``evaluate`` and ``save`` all see the state ``train()`` returned.

It is a Ray Tune ``Trainable``, as RLlib's algorithms are: ``tune.Tuner(ApexTrainer, param_space=config,
tune_config=tune.TuneConfig(scheduler=ASHAScheduler(...)))`` runs trials of it, and its checkpoints let PBT
exploit and trials restart. ``save()`` returns Tune's result with a checkpoint directory; ``restore()``
takes that directory (or any directory of apexrl checkpoints, e.g. a run dir of ``apexrl train``).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import ray
from ray import tune

from apexrl import checkpoint as ckpt
from apexrl.config import Config, ConfigError, from_dict, load, to_dict
from apexrl.envs.spaces import codec_of
from apexrl.metrics import Console
from apexrl.runtime.assembly import System, assemble, logical_cpus
from apexrl.runtime.cluster import init_ray, shutdown_ray
from apexrl.runtime.driver import Loop, build_topology, run_name
from apexrl.runtime.footprint import PeakMemory
from apexrl.runtime.topology import Topology

# RLlib keys of an iteration's length: the trainer's, and read by the mapping (evaluation_interval counts them).
ITERATION_KEYS = {"min_time_s_per_iteration": 5.0, "min_sample_timesteps_per_iteration": 0}
STARTUP_TIMEOUT_S = 120.0
LEARNER_STATS = ("loss", "actor_loss", "q_mean", "td_abs_mean", "grad_norm", "is_weight_mean")


def _config(config: Mapping[str, Any]) -> tuple[Config, dict[str, float]]:
    """The run's Config and the iteration's length from a trainer's config dict."""
    iteration = dict(ITERATION_KEYS)
    raw = dict(config)
    for k in ITERATION_KEYS:
        if k in raw:
            iteration[k] = float(raw[k])
    raw.setdefault("logging", {})
    if isinstance(raw["logging"], Mapping):
        raw["logging"] = {"console": "off", **raw["logging"]}  # a trainer's caller prints what it wants
    return from_dict(raw), iteration


def _is_row(observation: Any, row_bytes: int) -> bool:
    """Whether a structured env's observation was already packed (an env from ``apexrl.create_env``)."""
    return isinstance(observation, np.ndarray) and observation.dtype == np.uint8 and observation.shape == (row_bytes,)


class ApexTrainer(tune.Trainable):
    """``config``: a dict of apexrl keys (nested or dotted) and RLlib's Ape-X keys, plus the trainer's own
    ``min_time_s_per_iteration`` / ``min_sample_timesteps_per_iteration``, ``run_dir`` and
    ``model_factory`` (a ``(observation_space, action_space) -> nn.Module`` callable)."""

    def __init__(self, config: Config | Mapping[str, Any] | str | None = None, **kwargs: Any) -> None:
        if isinstance(config, str):
            config = load(config)
        if isinstance(config, Config):
            config = to_dict(config, objects=True)
        super().__init__(config=dict(config or {}), **kwargs)

    def setup(self, config: dict[str, Any]) -> None:
        config = dict(config)
        run_dir, model_factory = config.pop("run_dir", None), config.pop("model_factory", None)
        cfg, self.iteration_spec = _config(config)
        assemble(cfg, num_actors=1)  # env and agent checked before Ray or a run dir
        # Joins the Ray that ray.init(address=...) connected to (or Tune runs on), or starts a loopback one.
        self._started_ray = init_ray(None, num_cpus=logical_cpus(cfg, max(os.cpu_count() or 1, 1)))
        self.topology: Topology | None = None
        # A private Ray's processes are this one's children: their memory is this trainer's to report.
        self._memory = PeakMemory().start() if self._started_ray else None
        group = _trial_group()
        try:
            self.run_dir = Path(run_dir) if run_dir is not None else Path("runs") / run_name(cfg)
            self.cfg, self.topology = build_topology(cfg, self.run_dir, model_factory, private=self._started_ray,
                                                     group=group)
            self.system = self.topology.system
            self.loop = Loop(self.cfg, self.topology, self.run_dir, Console(self.cfg.logging.console), None, None,
                             memory=self._memory)
            self.loop.start(held=True)  # the first train() call lets it run
        except BaseException:
            self._shutdown()
            raise
        self._nets: dict[str, Any] = {}  # built on the first get_policy(): until then this process needs no torch
        self._acting: dict[str, Any] = {}  # what compute_single_action acts with (numpy where the agent allows)

    @classmethod
    def default_resource_request(cls, config: dict[str, Any]) -> Any:
        """Under Tune, a trial reserves what its system uses, as RLlib's Algorithm did: one bundle for the
        learner and one per actor (``actors.num_actors``, 1 when unset); the trial's driver loop mostly
        waits on Ray and takes none, so ``num_workers: 1`` fits a 2-CPU Ray. Replay shards and the
        parameter server take no CPU."""
        from ray.tune import PlacementGroupFactory

        cfg, _ = _config({k: v for k, v in config.items() if k not in ("run_dir", "model_factory")})
        learner = {"CPU": max(cfg.learner.num_cpus, 0.01), "GPU": cfg.learner.num_gpus}
        actor = {"CPU": max(cfg.actors.num_cpus, 0.01), "GPU": cfg.actors.num_gpus}
        return PlacementGroupFactory([{}, learner, *[dict(actor) for _ in range(cfg.actors.num_actors or 1)]])

    # ------------------------------------------------------------------ training
    def step(self) -> dict[str, Any]:
        """One iteration (``train()`` calls this): at least ``min_time_s_per_iteration`` seconds and
        ``min_sample_timesteps_per_iteration`` env steps of the running system, at least one env step."""
        p, spec = self.loop.progress, self.iteration_spec
        t0, steps0, evals0 = time.monotonic(), p.env_steps, p.evaluations
        self.loop.release()
        self.loop.advance(spec["min_time_s_per_iteration"])
        # At least one env step per iteration (the first waits out the workers' start-up).
        need = max(1.0, spec["min_sample_timesteps_per_iteration"])
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not self.loop.stop_reason and p.env_steps - steps0 < need:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no env steps in {STARTUP_TIMEOUT_S:g} s: the actors were not scheduled or do not "
                                   "run; check the cluster's free CPUs (ray status)")
            self.loop.advance(0.1)
            self.loop.sync()
        self.loop.hold()
        return self._result(time.monotonic() - t0, evaluated=p.evaluations > evals0)

    def _result(self, iter_s: float, evaluated: bool) -> dict[str, Any]:
        p, rec = self.loop.progress, self.loop.last_record
        returns = list(p.recent_returns)
        low = p.low_exploration_returns()  # RLlib's Ape-X: the lowest-epsilon third of its workers
        out: dict[str, Any] = {
            "episode_reward_mean": float(np.mean(low)) if low else math.nan,
            "sampler_results/episode_reward_mean": float(np.mean(low)) if low else math.nan,
            "info/episode_reward_mean_all_slots": float(np.mean(returns)) if returns else math.nan,
            "episode_reward_min": float(np.min(returns)) if returns else math.nan,
            "episode_reward_max": float(np.max(returns)) if returns else math.nan,
            "episode_len_mean": float(np.mean(p.recent_lengths)) if p.recent_lengths else math.nan,
            "episodes_total": p.episodes,
            "timesteps_total": p.env_steps,
            "time_this_iter_s": iter_s,
            "time_total_s": p.time_offset + self.loop.elapsed(),
            "done": bool(self.loop.stop_reason),
            "info/learner/updates": p.updates,
            "info/learner/updates_per_s": rec.get("updates_per_s"),
            "info/replay/size": rec.get("replay_size"),
            "info/actors/env_steps_per_s": rec.get("env_steps_per_s"),
            "info/actors/restarts": p.actor_restarts,
        }
        for k in LEARNER_STATS:
            if k in rec:
                out[f"info/learner/{k}"] = rec[k]
        if evaluated and p.last_eval is not None:
            out["evaluation/episode_reward_mean"] = p.last_eval
        if self._memory is not None and self._memory.sample():
            out["info/memory_mb"], out["info/peak_memory_mb"] = self._memory.last_mb, self._memory.peak_mb
        return out

    # ------------------------------------------------------------------ checkpoints (Tune's API)
    def save_checkpoint(self, checkpoint_dir: str) -> None:
        """The learner, counters and config (replay too with ``checkpoint.replay``) into ``checkpoint_dir``."""
        cp = self.loop.checkpointer
        cp.save(cp.request(self.loop.elapsed()), run_dir=Path(checkpoint_dir))

    def load_checkpoint(self, checkpoint: str | dict[str, Any]) -> None:
        """The newest apexrl checkpoint under ``checkpoint`` (a ``save()`` directory or a run dir of
        ``apexrl train``) into the running system, as ``apexrl train --resume`` does."""
        where, state = ckpt.resolve(Path(checkpoint))  # type: ignore[arg-type]
        self.loop.checkpointer.resume(state, where)
        self.loop.progress.time_offset -= self.loop.elapsed()  # time_total_s goes on from the checkpoint's

    # ------------------------------------------------------------------ the policy
    def _policy(self, policy_id: str | None) -> System:
        """The System of policy ``policy_id``: the one policy (``multiagent.policy_id``, or RLlib's
        ``default_policy``), or one of several, which must then be named."""
        ids = self.system.policy_ids
        if not self.system.policies:
            if policy_id is not None and policy_id not in {"default_policy", ids[0]}:
                raise ValueError(f"policy_id '{policy_id}': this trainer has one policy, '{ids[0]}'")
            return self.system
        if policy_id not in ids:
            raise ValueError(f"policy_id {policy_id!r}: name one of this trainer's policies: {', '.join(ids)}")
        return self.system.member(policy_id)

    def _published(self) -> dict[str, np.ndarray]:
        got = ray.get(self.topology.ps.get.remote(-1), timeout=60)
        if got is None:
            raise RuntimeError("no weights published yet")
        return ray.get(got[1][0], timeout=60)

    def get_weights(self, policy_id: str | None = None) -> Any:
        """The newest weights of the policy (several policies and no ``policy_id``: ``{policy id: weights}``,
        as RLlib's ``get_weights()``)."""
        weights = self._published()
        if not self.system.policies:
            self._policy(policy_id)
            return weights
        from apexrl.runtime.policy_set import split

        parts = split(weights)
        return parts if policy_id is None else parts[self._policy(policy_id).cfg.multiagent.policy_id]

    def set_weights(self, weights: dict[str, Any]) -> None:
        """RLlib's ``set_weights({policy_id: weights})`` (one policy: its weights as they are too): the learner
        takes them and the actors pull them before the next ``train()``, e.g. a frozen policy's trained weights."""
        from ray.exceptions import RayTaskError

        from apexrl.runtime.policy_set import join, split

        ids = self.system.policy_ids
        nested = bool(weights) and all(isinstance(v, dict) for v in weights.values())
        if not self.system.policies:
            if nested:
                unknown = [p for p in weights if p not in {"default_policy", ids[0]}]
                if unknown or len(weights) != 1:
                    raise ValueError(f"set_weights: policy '{(unknown or list(weights))[0]}'; this trainer has one "
                                     f"policy, '{ids[0]}'")
                weights = next(iter(weights.values()))
            flat = dict(weights)
        else:
            if not nested:
                raise ValueError(f"set_weights: give {{policy_id: weights}} for this trainer's policies: {', '.join(ids)}")
            unknown = [p for p in weights if p not in ids]
            if unknown:
                raise ValueError(f"set_weights: policy '{unknown[0]}' is not one of {', '.join(ids)}")
            parts = split(self._published())
            parts.update(weights)
            flat = join(parts)
        try:
            ray.get(self.topology.learner.set_weights.remote(flat), timeout=120)
        except RayTaskError as e:
            raise ValueError(f"set_weights: the weights do not fit the network: {str(e.cause).splitlines()[0]}") from None

    def get_policy(self, policy_id: str | None = None) -> Any:
        """The acting network with the newest weights (an ``nn.Module``); ``policy_id`` as RLlib's."""
        member = self._policy(policy_id)
        from apexrl.core import load_numpy_state_dict

        pid = member.cfg.multiagent.policy_id
        if pid not in self._nets:
            self._nets[pid] = member.make_network()
        load_numpy_state_dict(self._nets[pid], self.get_weights(policy_id))
        return self._nets[pid]

    def compute_single_action(self, observation: Any, state: Any = None, explore: bool = False,
                              policy_id: str | None = None) -> Any:
        """The action of the newest weights for one observation: greedy, or with ``explore`` as the run's
        most exploring actor acts. A recurrent agent, as RLlib's: pass ``state`` (first
        ``get_policy().get_initial_state()``) and get ``(action, state_out, {})`` back. A multi-agent env's
        agent: its own observation (a Dict with its ``action_mask``); its one policy is every agent's."""
        member = self._policy(policy_id)
        pid = member.cfg.multiagent.policy_id
        if isinstance(state, bool):  # compute_single_action(obs, True): the old positional explore
            state, explore = None, state
        if pid not in self._acting:
            self._acting[pid] = member.make_acting_network(self.cfg.seed, role="eval")
        net = self._acting[pid]  # a numpy MLP needs no torch in this process
        if explore:
            policy = member.builder.make_actor_policy(member.cfg, net, member.action_space, 0,
                                                      member.num_actors, 1, self.training_iteration)
            if hasattr(policy, "warmup_steps"):  # a trained agent explores with its noise, not at random
                policy.warmup_steps = 0
        else:
            policy = member.make_eval_policy(net, 1, seed=self.training_iteration, explore=0.0)
        policy.set_weights(self.get_weights(policy_id))
        codec = codec_of(member.observation_space)
        row = np.asarray(observation) if codec is None or _is_row(observation, codec.row_bytes) else codec.pack(observation)
        if state is not None and hasattr(policy, "set_recurrent_state"):
            policy.set_recurrent_state(np.asarray(state[0] if isinstance(state, (list, tuple)) else state)[None])
        action = policy.act(row[None])[0]
        action = action.item() if np.ndim(action) == 0 else action
        if state is None:
            return action
        return action, [policy.state[0].cpu().numpy()] if hasattr(policy, "state") else [], {}

    def evaluate(self) -> dict[str, Any]:
        """A greedy evaluation now (``evaluation.episodes`` episodes)."""
        ev = self.topology.evaluator or _evaluator(self)
        res = ev.evaluate()
        self.loop.take_evaluation(lambda: res)
        return {"evaluation": {"episode_reward_mean": float(np.mean(res["eval_returns"])) if res["eval_returns"]
                               else math.nan, "episodes": len(res["eval_returns"]),
                               **({"seats": res["eval_seats"]} if "eval_seats" in res else {}),
                               **({"policies": res["eval_policies"]} if "eval_policies" in res else {})}}

    # ------------------------------------------------------------------ shutdown
    def cleanup(self) -> None:
        """``stop()`` calls this: drain, final checkpoint, and end every process this trainer started."""
        try:
            if not self.loop.stop_reason:
                self.loop.stop_reason = "stopped by the caller"
            self.loop.finish()
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        if self._memory is not None:
            self._memory.stop()
        if self.topology is not None:
            self.topology.kill()
        if self._started_ray:
            shutdown_ray()


def _trial_group() -> Any:
    """The placement group Tune reserved with ``default_resource_request`` (learner + one bundle per actor),
    or None outside Tune (or under a resource request of another shape)."""
    from ray.util import get_current_placement_group

    group = get_current_placement_group()
    return group if group is not None and len(group.bundle_specs) >= 2 else None


def _evaluator(trainer: ApexTrainer) -> Any:
    from apexrl.runtime.evaluator import DriverEvaluator

    return DriverEvaluator(trainer.system, trainer.topology.ps)


__all__ = ["ApexTrainer", "ConfigError"]
