"""Recurrent Ape-X, R2D2 (Kapturowski et al., 2019): the DQN torso under an LSTM or GRU core, actors that
keep a recurrent state per env slot and send overlapping sequences with the state at their start,
a learner that burns in from it and trains on n-step double-Q targets inside each sequence."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from apexrl.agents.base import ModelFactory, seeded_network
from apexrl.agents.dqn import DQNBuilder
from apexrl.agents.dqn.exploration import actor_exploration
from apexrl.agents.r2d2.learner import R2D2Learner, settings_of
from apexrl.agents.r2d2.networks import build_recurrent_network
from apexrl.agents.r2d2.policy import RecurrentEpsilonGreedyPolicy
from apexrl.agents.torch_utils import resolve_device
from apexrl.config import Config
from apexrl.replay.sequences import SequenceWriter


class R2D2Builder(DQNBuilder):
    name = "r2d2"
    frame_replay = False  # sequences carry their observations; frames are not de-duplicated across them

    def make_network(self, cfg: Config, observation_space: gym.Space, action_space: gym.Space,
                     model_factory: ModelFactory | None = None) -> torch.nn.Module:
        if model_factory is not None:
            net = model_factory(observation_space, action_space)
            if not callable(getattr(net, "initial_state", None)):
                raise TypeError("agent 'r2d2' needs a recurrent model: forward(obs [B, T, ...], state [B, S], "
                                "begin [B, T] or None) -> (q [B, T, A], state) and initial_state(batch, device)")
            return net
        return build_recurrent_network(observation_space, action_space, cfg)

    def make_acting_network(self, cfg: Config, observation_space: gym.Space, action_space: gym.Space,
                            model_factory: ModelFactory | None, seed: int, role: str = "actors") -> torch.nn.Module:
        return seeded_network(self, cfg, observation_space, action_space, model_factory, seed)

    def make_actor_policy(self, cfg: Config, network: torch.nn.Module, action_space: gym.Space,
                          actor_index: int, num_actors: int, num_envs: int, seed: int,
                          key_capacity: int = 0) -> RecurrentEpsilonGreedyPolicy:
        eps, anneal = actor_exploration(cfg.actors, actor_index, num_actors, num_envs)
        return RecurrentEpsilonGreedyPolicy(network, int(action_space.n), eps, seed,  # type: ignore[attr-defined]
                                            cfg.replay.priority_eps, settings_of(cfg), cfg.r2d2.priority_eta,
                                            resolve_device(cfg.actors.device, "actors"), anneal)

    def make_eval_policy(self, cfg: Config, network: torch.nn.Module, action_space: gym.Space, num_envs: int,
                         seed: int, explore: float | None = None) -> RecurrentEpsilonGreedyPolicy:
        eps = cfg.evaluation.epsilon if explore is None else explore
        return RecurrentEpsilonGreedyPolicy(network, int(action_space.n),  # type: ignore[attr-defined]
                                            np.full(num_envs, eps), seed, cfg.replay.priority_eps,
                                            settings_of(cfg), cfg.r2d2.priority_eta)

    def make_writer(self, cfg: Config, policy: RecurrentEpsilonGreedyPolicy, num_envs: int) -> SequenceWriter:
        q = cfg.r2d2
        return SequenceWriter(num_envs, q.burn_in, q.seq_len, q.shared_steps, policy.state_before.shape[1],
                              lambda: policy.state_before)

    def replay_units(self, cfg: Config) -> tuple[int, int]:
        """(transitions an inserted sequence counts for: its new steps; ...a sampled one: its trained steps)."""
        return cfg.r2d2.period, cfg.r2d2.seq_len

    def make_learner(self, cfg: Config, observation_space: gym.Space, action_space: gym.Space,
                     model_factory: ModelFactory | None = None, device: str | None = None) -> R2D2Learner:
        torch.manual_seed(cfg.seed)
        return R2D2Learner(cfg, self.make_network(cfg, observation_space, action_space, model_factory), device)
