"""Where an env comes from: the ways RLlib and SB3 users hand one over, resolved to one creator.

``env.id`` may be a gymnasium id (``module:Id`` imports its module), a name given to
``ray.tune.registry.register_env`` (RLlib's call), or a dotted class path (RLlib's experiment files); in
Python the config may carry the class or creator itself (``env.creator``). Classes and creators are called
with one argument, ``env_config`` (``env.kwargs``), as RLlib calls them; gymnasium ids get the same keys as
``gymnasium.make`` keyword arguments.

A ``register_env`` name is looked up once in the process that parses the config and kept here: Ray's
registry forgets names it has flushed to a Ray that has since shut down, and the creator object itself
travels to every worker inside the config.
"""

from __future__ import annotations

import functools
import importlib
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym

_REGISTERED: dict[str, Callable[..., Any]] = {}  # register_env names seen in this process


class EnvContext(dict):  # type: ignore[type-arg]
    """RLlib's ``env_config`` argument: the config's keys, plus which worker and env slot builds the env."""

    def __init__(self, config: Mapping[str, Any], worker_index: int = 0, vector_index: int = 0,
                 num_workers: int = 0) -> None:
        super().__init__(config)
        self.worker_index, self.vector_index, self.num_workers = worker_index, vector_index, num_workers


def registered_env(name: str) -> Callable[..., Any] | None:
    """The creator given to ``ray.tune.registry.register_env(name, ...)``, if any (ray.tune imported only
    where it is already loaded, i.e. where the user could have registered)."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    if "ray.tune.registry" not in sys.modules:
        return None
    from ray.tune.registry import ENV_CREATOR, _global_registry

    try:
        if not _global_registry.contains(ENV_CREATOR, name):
            return None
        creator = _global_registry.get(ENV_CREATOR, name)
    except Exception:  # a registry tied to a Ray that is gone
        return None
    _REGISTERED[name] = creator
    return creator


def import_env_path(path: str) -> Callable[..., Any] | None:
    """``my_pkg.envs.MyEnv`` -> the class (or function); None when ``path`` is not a dotted path at all.
    Raises ImportError / AttributeError naming what failed."""
    if "." not in path or ":" in path or "/" in path or path.startswith("."):
        return None
    module, _, name = path.rpartition(".")
    try:
        parent = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and module.startswith(e.name):
            return None  # not a module path (e.g. 'CartPole-v1.5'); the caller says what is unknown
        raise
    try:
        obj = getattr(parent, name)
    except AttributeError:
        try:  # a submodule its package does not import itself (mpe2.simple_spread_v3)
            obj = importlib.import_module(path)
        except ModuleNotFoundError:
            raise AttributeError(f"module '{module}' has no attribute '{name}'") from None
    if isinstance(obj, types.ModuleType):  # PettingZoo's convention: pettingzoo.classic.tictactoe_v3
        found = getattr(obj, "parallel_env", None) or getattr(obj, "env", None)
        if callable(found):
            return found  # all agents at once where the module offers it: one forward pass per step
        raise TypeError(f"'{path}' is a module without an env() or parallel_env() function")
    if not callable(obj):
        raise TypeError(f"'{path}' is a {type(obj).__name__}, not an env class or creator")
    return obj


def pettingzoo_registered(env_id: str) -> Callable[..., Any] | None:
    """A creator for an id of PettingZoo's own registry (``classic/tictactoe-v3``), where PettingZoo is
    installed and has one (its registry came with PettingZoo 1.26)."""
    if "/" not in env_id or ":" in env_id:
        return None
    try:
        import pettingzoo
    except ImportError:
        return None
    make = getattr(pettingzoo, "make", None)
    for api, registry in (("parallel", "parallel_registry"), ("aec", "aec_registry")):
        if env_id in (getattr(pettingzoo, registry, None) or ()):
            return functools.partial(make, api, env_id)
    return None


def resolve_creator(env_id: str, creator: Any) -> Callable[..., Any] | None:
    """The creator to call for this env, or None for a gymnasium id (gym.make)."""
    if creator is not None:
        return creator
    if env_id.partition(":")[2] in gym.registry or env_id in gym.registry:
        return None
    found = registered_env(env_id) or pettingzoo_registered(env_id)
    if found is not None:
        return found
    return import_env_path(env_id)


def call_creator(creator: Callable[..., Any], env_id: str, env_config: Mapping[str, Any],
                 worker_index: int = 0, vector_index: int = 0) -> gym.Env:
    env = creator(EnvContext(env_config, worker_index, vector_index))
    if not isinstance(env, gym.Env):
        raise TypeError(f"the env creator for '{env_id}' returned {type(env).__name__}, not a gymnasium.Env")
    return env
