"""What an agent gives the runtime: a builder of networks, acting policies and a learner.

In the spirit of Acme's ``Builder``: the runtime (actors' env loop, n-step, replay, transport,
supervision, checkpoints) calls only these methods, so a new algorithm is a new package under
``apexrl/agents/`` registered in ``apexrl/agents/__init__.py``, with nothing to change in ``runtime/``.

    builder = get_builder(cfg.agent)
    builder.check_spaces(env_id, obs_space, act_space)          # before anything starts
    net = builder.make_acting_network(cfg, obs_space, act_space, None, seed)  # what actors act with
    policy = builder.make_actor_policy(cfg, net, act_space, i, N, envs, seed)
    writer = builder.make_writer(cfg, policy, envs)                 # steps -> replay items
    learner = builder.make_learner(cfg, obs_space, act_space)     # learner.weights() -> policy.set_weights
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import gymnasium as gym
import numpy as np

from apexrl.config import Config
from apexrl.core import Batch, Weights

if TYPE_CHECKING:  # an actor acting with a numpy network never loads torch
    import torch


class ModelFactory(Protocol):
    """``model_factory(observation_space, action_space) -> nn.Module``: a user's own acting network.

    Factories, not live modules, cross process boundaries: each actor and the learner build their own copy.
    """

    def __call__(self, observation_space: gym.Space, action_space: gym.Space) -> torch.nn.Module: ...


class Policy(Protocol):
    """Acts in a batch of E environments and gives the initial priorities of what it sent.

    Two ways to prioritize: ``priorities(batch)`` from the observations themselves (array observations),
    or, where a batch carries only keys of observations (de-duplicated frame stacks), from values the
    policy kept when it acted: ``act(obs, keys)`` and ``remember`` let it keep them, ``keyed_priorities``
    uses them. ``precompute`` computes values for the observations the next ``act`` will see (reused there).
    """

    exploration_name: str  # what the per-env exploration figure is called in metrics ("epsilon", "noise")
    exploration: np.ndarray  # [E] exploration of each environment slot

    def set_weights(self, weights: Weights) -> None: ...

    def observe_global_steps(self, env_steps: int) -> None:
        """The run's env steps over all actors, given with each chunk of work (schedules over the run)."""
        ...

    def act(self, obs: np.ndarray, keys: np.ndarray | None = None, slots: np.ndarray | None = None) -> np.ndarray:
        """Actions for ``obs``, the rows of env ``slots`` (each slot its own exploration), else of the first."""
        ...

    def priorities(self, batch: Batch) -> np.ndarray:
        """|TD| + eps of transitions with ``obs``, ``action``, ``reward``, ``discount``, ``next_obs``."""
        ...

    def remember(self, obs: np.ndarray, keys: np.ndarray, bootstrap: np.ndarray) -> None:
        """Keep values of observations that will not be acted on (episode ends); zero where not bootstrap."""
        ...

    def precompute(self, obs: np.ndarray, keys: np.ndarray) -> None: ...

    def reset_slots(self, mask: np.ndarray) -> None:
        """Episodes ended in the ``mask``ed env slots (a recurrent policy zeroes their state; others ignore it)."""
        ...

    def knows(self, keys: np.ndarray) -> bool: ...

    def keyed_priorities(self, obs_keys: np.ndarray, action: np.ndarray, reward: np.ndarray,
                         discount: np.ndarray, next_keys: np.ndarray) -> np.ndarray: ...


class Learner(Protocol):
    """One gradient step at a time on prioritized batches; Ray-free.

    ``state_dict()["net"]`` is the acting network's state (what ``weights()`` publishes), so a
    checkpoint can be evaluated without knowing the agent's other parts.
    """

    updates: int
    skipped_updates: int
    consecutive_skips: int

    def update(self, batch: Batch, weights: np.ndarray) -> tuple[np.ndarray | None, dict[str, float]]:
        """Returns (new priorities, metrics); priorities are None when the update was skipped."""
        ...

    def weights(self) -> Weights: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class ExperienceWriter(Protocol):
    """What an actor turns its steps into for replay: n-step transitions, or sequences (recurrent agents)."""

    def step(self, obs: np.ndarray, action: np.ndarray, reward: np.ndarray, next_obs: np.ndarray,
             terminated: np.ndarray, truncated: np.ndarray) -> Batch | None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class AgentBuilder(Protocol):
    name: str
    frame_replay: bool  # whether frame-stacked observations may travel as de-duplicated frames
    acts_by_slot: bool  # whether its policies act for any subset of env slots (``Policy.act(slots=...)``), as the
    #                     agents of a turn-based game need

    def check_spaces(self, env_id: str, observation_space: gym.Space, action_space: gym.Space) -> None:
        """Raise ``EnvSpecError`` with one line naming what to change if the agent cannot use these spaces."""
        ...

    def make_network(self, cfg: Config, observation_space: gym.Space, action_space: gym.Space,
                     model_factory: ModelFactory | None = None) -> torch.nn.Module: ...

    def make_acting_network(self, cfg: Config, observation_space: gym.Space, action_space: gym.Space,
                            model_factory: ModelFactory | None, seed: int, role: str = "actors") -> Any:
        """What an actor (``role`` "actors") or an evaluation ("eval") acts with, first weights drawn from
        ``seed``: the torch network, or a torch-free one the agent's policies take (DQN's MLP in numpy)."""
        ...

    def make_actor_policy(self, cfg: Config, network: Any, action_space: gym.Space,
                          actor_index: int, num_actors: int, num_envs: int, seed: int,
                          key_capacity: int = 0) -> Policy:
        """Actor ``actor_index`` of ``num_actors``, with its share of the agent's spread of exploration;
        ``key_capacity`` > 0: keyed priorities over that many recent observation keys."""
        ...

    def make_eval_policy(self, cfg: Config, network: Any, action_space: gym.Space, num_envs: int,
                         seed: int, explore: float | None = None) -> Policy:
        """The policy evaluations play with: greedy at ``explore`` = 0; None = the config's evaluation setting."""
        ...

    def make_writer(self, cfg: Config, policy: Policy, num_envs: int) -> ExperienceWriter:
        """How the actor with ``policy`` turns steps of ``num_envs`` envs into replay items."""
        ...

    def replay_units(self, cfg: Config) -> tuple[int, int]:
        """Transitions one replay item counts for when inserted and when sampled (the rate limiter and
        ``replay.capacity`` / ``learning_starts`` count transitions): (1, 1) for n-step transitions."""
        ...

    def make_learner(self, cfg: Config, observation_space: gym.Space, action_space: gym.Space,
                     model_factory: ModelFactory | None = None, device: str | None = None) -> Learner: ...



def seeded_network(builder: AgentBuilder, cfg: Config, observation_space: gym.Space, action_space: gym.Space,
                   model_factory: ModelFactory | None, seed: int) -> torch.nn.Module:
    """The agent's torch network with first weights from ``seed``: same seed, same network, on every
    actor restart (``make_acting_network`` of agents that act with torch)."""
    import torch

    torch.manual_seed(seed)
    return builder.make_network(cfg, observation_space, action_space, model_factory)
