"""``ApeX``: Ape-X DQN in the user's own loop, in one process: the article's single-machine API.

    apex = ApeX(env, model, optimizer)              # any nn.Module -> Q-values, any torch.optim optimizer
    action = apex.select_action(state)
    apex.store_experience(state, action, reward, next_state, terminated, truncated)
    apex.learn()                                    # an update every `train_freq` steps after learning_starts
    apex.get_score()                                # mean return of the last 100 finished episodes

Built from the parts the distributed system runs: the same n-step builder, prioritized replay, DQN
learner (double DQN, IS-weighted loss, target copies, |TD| priorities) and actor-side initial priorities.
One stream has no per-actor spread of epsilons, so exploration is an epsilon annealed linearly from
``epsilon_start`` to ``epsilon_end`` over ``epsilon_decay_steps`` stored steps.

A recurrent model (one with ``initial_state(batch, device)`` and ``forward(obs [B, T, ...], state, begin)
-> (q, state)``, as :class:`~apexrl.agents.r2d2.networks.RecurrentQNetwork`) makes it R2D2: ``select_action``
carries the model's state from step to step, an episode's end (or ``reset()``) clears it, and replay holds
sequences (``r2d2.*`` keys; ``batch_size`` counts sequences).
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from apexrl.agents.dqn.distributional import value_head
from apexrl.agents.dqn.learner import DQNLearner, dqn_learner
from apexrl.agents.dqn.noisy import has_noise, set_noise
from apexrl.agents.dqn.policy import EpsilonGreedyPolicy
from apexrl.agents.encoders import MaskedQ
from apexrl.agents.r2d2 import R2D2Builder
from apexrl.agents.r2d2.learner import R2D2Learner
from apexrl.config import ALIASES, Config, ConfigError, from_dict, to_dict
from apexrl.envs.spaces import ObservationCodec, codec_of, needs_codec
from apexrl.replay.client import beta_at
from apexrl.replay.nstep import NStepBuilder
from apexrl.replay.prioritized import PrioritizedReplay
from apexrl.replay.sequences import SequenceWriter

# Short keys of the agent's constructor, beside apexrl's dotted keys and RLlib-style aliases.
KEYS = {"batch_size": "learner.batch_size", "alpha": "replay.alpha", "beta": "replay.beta",
        "target_update_period": "learner.target_update_period", "grad_clip": "learner.grad_clip",
        "capacity": "replay.capacity"}


@dataclass(frozen=True)
class LoopConfig:
    train_freq: int = 4  # stored steps per update: 16 samples per inserted transition at batch 64
    epsilon_start: float = 1.0
    epsilon_end: float = 0.01  # get_score() counts exploring episodes too: keep the end small
    epsilon_decay_steps: int = 10_000  # stored steps of the linear anneal


def _with_head(cfg: Config, model: torch.nn.Module) -> Config:
    """The config's network.* head keys from a distributional model (``apexrl.q_network(..., distribution=...)``,
    or a user's model with the same ``kind`` / ``atoms`` / ``v_range`` / ``distribution`` / ``acting_outputs``)."""
    over: dict[str, Any] = {"network.noisy": has_noise(model)}
    model = getattr(model, "inner", model)
    if getattr(model, "distributional", False):
        lo, hi = getattr(model, "v_range", (cfg.network.v_min, cfg.network.v_max))
        over.update({"network.distribution": model.kind, "network.num_atoms": int(model.atoms),
                     "network.v_min": float(lo), "network.v_max": float(hi)})
    return cfg.replace(**over)


def _split(base: Config | None, config: dict[str, Any]) -> tuple[Config, LoopConfig]:
    loop_keys = {k: config.pop(k) for k in list(config) if k in LoopConfig.__dataclass_fields__}
    dotted = {KEYS.get(k, ALIASES.get(k, k)): v for k, v in config.items()}
    data = to_dict(base or Config())
    for key, value in dotted.items():
        node = data
        *path, last = key.split(".")
        for p in path:
            if not isinstance(node.get(p), dict):
                raise ConfigError(f"unknown ApeX key '{key}'")
            node = node[p]
        if last not in node:
            allowed = sorted([*KEYS, *LoopConfig.__dataclass_fields__, "gamma", "n_step", "buffer_size",
                              "learning_starts", "seed"])
            raise ConfigError(f"unknown ApeX key '{key}'; allowed: {', '.join(allowed)} or apexrl's dotted keys")
        node[last] = value
    loop = LoopConfig(**loop_keys)
    if loop.train_freq < 1 or loop.epsilon_decay_steps < 0:
        raise ConfigError(f"ApeX: train_freq must be >= 1 and epsilon_decay_steps >= 0, got {loop}")
    return from_dict(data), loop


class ApeX:
    def __init__(self, env: gym.Env, model: torch.nn.Module, optimizer: torch.optim.Optimizer | Any,
                 config: Config | None = None, **overrides: Any) -> None:
        """``overrides``: short keys (``batch_size``, ``gamma``, ``n_step``, ``buffer_size``, ``alpha``,
        ``beta``, ``learning_starts``, ``target_update_period``, ``train_freq``, ``epsilon_*``, ``seed``) or
        apexrl's dotted keys (``"replay.priority_eps"``) on ``config`` (default: apexrl's defaults)."""
        self.cfg, self.loop = _split(config, dict(overrides))
        if not isinstance(env.action_space, gym.spaces.Discrete):
            raise ConfigError(f"ApeX needs a discrete action space, got {env.action_space}")
        self.env, self.model, self.optimizer = env, model, optimizer
        space = env.observation_space
        # Structured observations: packed rows (an env from create_env gives them; a raw Dict/Discrete/... env's
        # states are packed here); the model receives the structure and masks apply to its Q-values.
        self.codec = codec_of(space) or (ObservationCodec(space, int(env.action_space.n)) if needs_codec(space)
                                         else None)
        self._pack = self.codec is not None and codec_of(space) is None
        self.recurrent = callable(getattr(model, "initial_state", None))
        r, n = self.cfg.replay, int(env.action_space.n)
        eps0 = np.array([self.loop.epsilon_start])
        self.period = 1  # transitions per replay item: a recurrent model's sequences bring `period` new steps
        if self.recurrent:
            if self.codec is not None:
                raise ConfigError("ApeX: a recurrent model takes array observations; wrap a Dict/Discrete env with "
                                  "apexrl.create_env and use apexrl.train(agent='r2d2') for structured ones")
            builder = R2D2Builder()  # the distributed run's policy and sequence writer, for one env slot
            self.net = model
            self.learner: DQNLearner = R2D2Learner(self.cfg, model, optimizer=optimizer)
            self.policy: EpsilonGreedyPolicy = builder.make_eval_policy(self.cfg, model, env.action_space, 1,
                                                                        self.cfg.seed, self.loop.epsilon_start)
            self.writer: NStepBuilder | SequenceWriter = builder.make_writer(self.cfg, self.policy, 1)  # type: ignore[arg-type]
            self.period = builder.replay_units(self.cfg)[0]
        else:
            wrap = self.codec is not None and not isinstance(model, MaskedQ)  # q_network's come masked
            self.net = MaskedQ(self.codec, model, structured_input=True) if wrap else model
            self.cfg = _with_head(self.cfg, model)
            self.learner = dqn_learner(self.cfg, self.net, optimizer=optimizer)
            self.policy = EpsilonGreedyPolicy(self.net, n, eps0, self.cfg.seed, r.priority_eps,
                                              head=value_head(self.cfg.network))
            self.writer = NStepBuilder(1, self.cfg.learner.n_step, self.cfg.learner.gamma)
        self.replay = PrioritizedReplay(max(1, r.capacity // self.period), alpha=r.alpha, seed=self.cfg.seed)
        self.steps = 0
        self.episode_return = 0.0
        self.returns: deque[float] = deque(maxlen=100)
        self.last_stats: dict[str, float] | None = None

    # ------------------------------------------------------------------ acting and storing
    @property
    def epsilon(self) -> float:
        lp = self.loop
        frac = 1.0 if lp.epsilon_decay_steps == 0 else min(1.0, self.steps / lp.epsilon_decay_steps)
        return lp.epsilon_start + frac * (lp.epsilon_end - lp.epsilon_start)

    def select_action(self, state: Any, explore: bool = True) -> int:
        self.policy.exploration[0] = self.epsilon if explore else 0.0
        was_training = self.model.training
        set_noise(self.model, explore)  # noisy layers explore; greedy play uses their means
        action = int(self.policy.act(self._row(state))[0])
        set_noise(self.model, True)
        self.model.train(was_training)
        return action

    def _row(self, state: Any) -> np.ndarray:
        if self.codec is None:
            return np.asarray(state, dtype=np.float32)[None]
        return (self.codec.pack(state) if self._pack else np.asarray(state, dtype=np.uint8))[None]

    def store_experience(self, state: Any, action: int, reward: float, next_state: Any, done: bool,
                         truncated: bool = False) -> None:
        """``done``: the env terminated (no bootstrap); ``truncated``: a time limit cut it (bootstrap).
        Either ends the episode."""
        out = self.writer.step(self._row(state), np.array([action]), np.array([reward]),
                               self._row(next_state), np.array([bool(done)]),
                               np.array([bool(truncated)]))
        if out is not None:
            self.replay.add(out, self.policy.priorities(out))
        self.steps += 1
        self.episode_return += float(reward)
        if done or truncated:
            self.returns.append(self.episode_return)
            self.episode_return = 0.0
            self.policy.reset_slots(np.array([True]))

    def reset(self) -> None:
        """Start a new episode without ending the last through ``store_experience``: a recurrent model's
        state is cleared and the unfinished episode's steps not yet in replay are dropped."""
        self.policy.reset_slots(np.array([True]))
        self.writer.reset()
        self.episode_return = 0.0

    # ------------------------------------------------------------------ learning
    def learn(self) -> dict[str, float] | None:
        """One update every ``train_freq`` stored steps once replay holds ``learning_starts`` transitions;
        returns the update's stats, or None when it did not update."""
        if len(self.replay) < max(-(-self.cfg.replay.learning_starts // self.period), self.cfg.learner.batch_size):
            return None
        if self.steps % self.loop.train_freq:
            return None
        batch, indices, weights = self.replay.sample(self.cfg.learner.batch_size,
                                                     beta_at(self.cfg, self.learner.updates))
        prios, stats = self.learner.update(batch, weights)
        if prios is not None:
            self.replay.update_priorities(indices, prios)
        self.last_stats = stats
        return stats

    def get_score(self) -> float:
        return float(np.mean(self.returns)) if self.returns else 0.0

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | os.PathLike[str]) -> None:
        """Model, target network, optimizer, replay, counters and config: ``load`` resumes exactly here."""
        torch.save({"config": to_dict(self.cfg), "loop": asdict(self.loop), "learner": self.learner.state_dict(),
                    "replay": self.replay.state_dict(), "steps": self.steps, "returns": list(self.returns),
                    "episode_return": self.episode_return, "rng": self.policy.rng.bit_generator.state,
                    "nstep": self.writer.state_dict(),
                    "recurrent_state": self.policy.state.cpu() if self.recurrent else None}, path)  # type: ignore[attr-defined]

    @classmethod
    def load(cls, path: str | os.PathLike[str], env: gym.Env, model: torch.nn.Module,
             optimizer: torch.optim.Optimizer | Any) -> ApeX:
        from apexrl.checkpoint import safe_load

        state = safe_load(path)
        agent = cls(env, model, optimizer, config=from_dict(state["config"]), **state["loop"])
        agent.learner.load_state_dict(state["learner"])
        agent.replay.load_state_dict(state["replay"])
        agent.steps, agent.episode_return = state["steps"], state["episode_return"]
        agent.returns.extend(state["returns"])
        agent.policy.rng.bit_generator.state = state["rng"]
        if "nstep" in state:  # files saved before it was kept resume with an empty window
            agent.writer.load_state_dict(state["nstep"])
        if agent.recurrent and state.get("recurrent_state") is not None:
            agent.policy.set_recurrent_state(state["recurrent_state"].numpy())  # type: ignore[attr-defined]
        return agent


def q_network(env: gym.Env, seed: int = 0, **network: Any) -> torch.nn.Module:
    """apexrl's own Q-network for ``env``'s spaces, with ``network.*`` keys as arguments (``distribution=
    "quantile"``, ``num_atoms=51``, ``noisy=True``, ``torso=(256, 256)``): the model to hand to ``ApeX`` for a
    distributional or noisy head, which ApeX then trains with that head's loss."""
    from apexrl.agents.dqn.networks import build_network

    cfg = from_dict({"network": {k: list(v) if isinstance(v, tuple) else v for k, v in network.items()}})
    torch.manual_seed(seed)
    space = env.observation_space
    if codec_of(space) is None and needs_codec(space):
        raise ConfigError("q_network: wrap a Dict/Discrete-observation env with apexrl.create_env first")
    return build_network(space, env.action_space, cfg.network)
