"""Ape-X DQN: dueling Q-network, epsilon-greedy actors with Ape-X's spread of epsilons, double-DQN
n-step learner (Horgan et al., 2018)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from apexrl.agents.base import ModelFactory, Policy, seeded_network
from apexrl.agents.dqn.distributional import value_head
from apexrl.agents.dqn.exploration import actor_exploration
from apexrl.agents.dqn.numpy_q import NumpyQNetwork, numpy_acting, numpy_q_network
from apexrl.agents.dqn.policy import EpsilonGreedyPolicy
from apexrl.config import Config, ConfigError
from apexrl.envs import EnvSpecError
from apexrl.envs.spaces import codec_of
from apexrl.replay.nstep import NStepBuilder

if TYPE_CHECKING:  # torch only where a network is built: actors of the built-in MLP act without it
    import torch

    from apexrl.agents.dqn.learner import DQNLearner


class DQNBuilder:
    frame_replay = True  # Atari frame stacks go to replay as de-duplicated frames
    acts_by_slot = True  # its policies act for any subset of env slots (multi-agent games)
    name = "dqn"

    def check_spaces(self, env_id: str, observation_space: gym.Space, action_space: gym.Space) -> None:
        if not isinstance(action_space, gym.spaces.Discrete):
            kind = "continuous (Box)" if isinstance(action_space, gym.spaces.Box) else type(action_space).__name__
            raise EnvSpecError(f"env '{env_id}' has a {kind} action space; agent 'dqn' needs a discrete one "
                               "(set agent=dpg for continuous actions)")

    def make_network(self, cfg: Config, observation_space: gym.Space, action_space: gym.Space,
                     model_factory: ModelFactory | None = None) -> torch.nn.Module:
        from apexrl.agents.dqn.networks import build_network
        from apexrl.agents.encoders import MaskedQ

        codec = codec_of(observation_space)
        if model_factory is not None:
            n = cfg.network
            if n.distribution != "expectation" or n.noisy:
                key = "network.noisy=true" if n.noisy else f"network.distribution={n.distribution}"
                raise ConfigError(f"{key} builds apexrl's own head; a custom model returns Q-values only "
                                  "(drop the model or the setting)")
            if codec is not None:  # the user's model gets the structure; masks apply to what it returns
                return MaskedQ(codec, model_factory(codec.space, action_space), structured_input=True)
            return model_factory(observation_space, action_space)
        return build_network(observation_space, action_space, cfg.network)

    def make_acting_network(self, cfg: Config, observation_space: gym.Space, action_space: gym.Space,
                            model_factory: ModelFactory | None, seed: int, role: str = "actors") -> Any:
        """The built-in MLP in numpy where the actors' settings allow (see ``numpy_q.numpy_acting``), so the
        process never loads torch; else the torch network."""
        a = cfg.actors
        device, precision = (a.device, a.precision) if role == "actors" else ("cpu", "float32")
        if numpy_acting(cfg, observation_space, model_factory is not None, device, precision):
            return numpy_q_network(cfg, observation_space, action_space, seed)
        return seeded_network(self, cfg, observation_space, action_space, model_factory, seed)

    def make_actor_policy(self, cfg: Config, network: Any, action_space: gym.Space,
                          actor_index: int, num_actors: int, num_envs: int, seed: int,
                          key_capacity: int = 0) -> EpsilonGreedyPolicy:
        a = cfg.actors
        eps, anneal = actor_exploration(a, actor_index, num_actors, num_envs)
        if cfg.network.noisy and not a.epsilon_with_noise:  # the noisy layers explore (Rainbow)
            eps, anneal = np.zeros_like(eps), None
        device: Any = "cpu"
        if not isinstance(network, NumpyQNetwork):
            from apexrl.agents.torch_utils import resolve_device

            device = resolve_device(a.device, "actors")
        return EpsilonGreedyPolicy(network, int(action_space.n), eps, seed,  # type: ignore[attr-defined]
                                   cfg.replay.priority_eps, key_capacity, a.precision, device, anneal,
                                   value_head(cfg.network))

    def make_eval_policy(self, cfg: Config, network: Any, action_space: gym.Space, num_envs: int,
                         seed: int, explore: float | None = None) -> EpsilonGreedyPolicy:
        eps = cfg.evaluation.epsilon if explore is None else explore
        return EpsilonGreedyPolicy(network, int(action_space.n), np.full(num_envs, eps),  # type: ignore[attr-defined]
                                   seed, cfg.replay.priority_eps, head=value_head(cfg.network), noise=False)

    def make_writer(self, cfg: Config, policy: Policy, num_envs: int) -> NStepBuilder:
        return NStepBuilder(num_envs, cfg.learner.n_step, cfg.learner.gamma)

    def replay_units(self, cfg: Config) -> tuple[int, int]:
        return 1, 1  # a replay item is one transition

    def make_learner(self, cfg: Config, observation_space: gym.Space, action_space: gym.Space,
                     model_factory: ModelFactory | None = None, device: str | None = None) -> DQNLearner:
        import torch

        from apexrl.agents.dqn.learner import dqn_learner

        torch.manual_seed(cfg.seed)
        return dqn_learner(cfg, self.make_network(cfg, observation_space, action_space, model_factory), device)
