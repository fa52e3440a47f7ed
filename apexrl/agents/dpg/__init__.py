"""Ape-X DPG: deterministic policy and critics, Gaussian-noise actors with Ape-X's spread of exploration,
n-step prioritized learner with TD3's options (Horgan et al., 2018; Fujimoto et al., 2018)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from apexrl.agents.base import ModelFactory, Policy, seeded_network
from apexrl.agents.dpg.learner import DPGLearner
from apexrl.agents.dpg.networks import ActionScale, StructuredModel, build_actor_critic
from apexrl.agents.dpg.policy import NoisePolicy, actor_noise_scales
from apexrl.config import Config
from apexrl.envs import EnvSpecError
from apexrl.envs.spaces import codec_of
from apexrl.replay.nstep import NStepBuilder


class DPGBuilder:
    frame_replay = True  # Atari frame stacks go to replay as de-duplicated frames
    acts_by_slot = True  # its policies act for any subset of env slots (multi-agent games)
    name = "dpg"

    def check_spaces(self, env_id: str, observation_space: gym.Space, action_space: gym.Space) -> None:
        if not isinstance(action_space, gym.spaces.Box):
            raise EnvSpecError(f"env '{env_id}' has a {type(action_space).__name__} action space; agent 'dpg' "
                               "needs a continuous (Box) one (set agent=dqn for discrete actions)")
        if not (np.isfinite(action_space.low).all() and np.isfinite(action_space.high).all()):
            raise EnvSpecError(f"env '{env_id}' has unbounded actions (low {action_space.low}, high "
                               f"{action_space.high}); agent 'dpg' needs finite bounds (wrap the env with "
                               "gymnasium.wrappers.ClipAction or RescaleAction and register it)")
        codec = codec_of(observation_space)
        if codec is not None and codec.mask_leaf is not None:
            raise EnvSpecError(f"env '{env_id}' gives action masks; agent 'dpg' acts in continuous spaces and cannot "
                               "use them (set env.action_mask=none to ignore them)")
        if not np.issubdtype(action_space.dtype, np.floating):
            raise EnvSpecError(f"env '{env_id}' has {action_space.dtype} Box actions; agent 'dpg' needs float ones")

    def make_network(self, cfg: Config, observation_space: gym.Space, action_space: gym.Space,
                     model_factory: ModelFactory | None = None) -> torch.nn.Module:
        codec = codec_of(observation_space)
        if model_factory is not None:
            if codec is not None:
                return StructuredModel(codec, model_factory(codec.space, action_space))
            return model_factory(observation_space, action_space)
        return build_actor_critic(observation_space, action_space, cfg.network.torso,
                                  2 if cfg.dpg.twin_critics else 1)

    def make_acting_network(self, cfg: Config, observation_space: gym.Space, action_space: gym.Space,
                            model_factory: ModelFactory | None, seed: int, role: str = "actors") -> torch.nn.Module:
        return seeded_network(self, cfg, observation_space, action_space, model_factory, seed)

    def make_actor_policy(self, cfg: Config, network: torch.nn.Module, action_space: gym.Space,
                          actor_index: int, num_actors: int, num_envs: int, seed: int,
                          key_capacity: int = 0) -> NoisePolicy:
        d = cfg.dpg
        noise = actor_noise_scales(actor_index, num_actors, num_envs, d.noise_max, d.noise_min,
                                   cfg.actors.epsilon_per)
        warmup = -(-cfg.replay.learning_starts // num_actors)
        return NoisePolicy(network, ActionScale(action_space), noise, seed,  # type: ignore[arg-type]
                                   cfg.replay.priority_eps, warmup, d.ou_theta if d.noise == "ou" else None)

    def make_eval_policy(self, cfg: Config, network: torch.nn.Module, action_space: gym.Space, num_envs: int,
                         seed: int, explore: float | None = None) -> NoisePolicy:
        noise = cfg.evaluation.epsilon if explore is None else explore
        return NoisePolicy(network, ActionScale(action_space), np.full(num_envs, noise),  # type: ignore[arg-type]
                                   seed, cfg.replay.priority_eps)

    def make_writer(self, cfg: Config, policy: Policy, num_envs: int) -> NStepBuilder:
        return NStepBuilder(num_envs, cfg.learner.n_step, cfg.learner.gamma)

    def replay_units(self, cfg: Config) -> tuple[int, int]:
        return 1, 1  # a replay item is one transition

    def make_learner(self, cfg: Config, observation_space: gym.Space, action_space: gym.Space,
                     model_factory: ModelFactory | None = None, device: str | None = None) -> DPGLearner:
        torch.manual_seed(cfg.seed)
        net = self.make_network(cfg, observation_space, action_space, model_factory)
        return DPGLearner(cfg, net, ActionScale(action_space), device)  # type: ignore[arg-type]
