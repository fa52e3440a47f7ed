"""Build gymnasium environments from the config; the same factory runs in every actor process."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
import logging
import warnings
from typing import Any

import gymnasium as gym
import numpy as np

from apexrl.config import EnvConfig
from apexrl.envs.atari import is_atari, make_atari
from apexrl.envs.atari_vector import ale_vector_reason, make_ale_vector
from apexrl.envs.contract import check_spaces_hold
from apexrl.envs.minatar import is_minatar, make_minatar, register_minatar
from apexrl.envs.sources import call_creator, resolve_creator
from apexrl.envs.structured import StructuredObservation, mask_source, structure

log = logging.getLogger(__name__)


class EnvSpecError(ValueError):
    """The env id or its spaces cannot be used by the agent; the message says why and what to do."""


@functools.cache
def _register_ale() -> bool:
    try:
        import ale_py

        gym.register_envs(ale_py)
        return True
    except ImportError:  # pragma: no cover - ale-py is a dependency
        return False


def _import_env_module(env_id: str) -> str:
    """gymnasium's ``module:EnvId`` form: import the module (it registers the env), return ``EnvId``."""
    if ":" not in env_id:
        return env_id
    module, _, name = env_id.partition(":")
    try:
        importlib.import_module(module)
    except ImportError as e:
        raise EnvSpecError(f"env.id '{env_id}': cannot import module '{module}' ({e})") from None
    return name


# Substrings of env ids (or of the import error) -> the apexrl extra that installs what they need.
_EXTRAS = {**dict.fromkeys(("LunarLander", "BipedalWalker", "CarRacing", "box2d", "Box2D"), "box2d"),
           **dict.fromkeys(("HalfCheetah", "Hopper", "Walker2d", "Ant-", "Humanoid", "Swimmer", "Reacher", "Pusher",
                            "InvertedPendulum", "InvertedDoublePendulum", "mujoco"), "mujoco"),
           "MinAtar": "minatar"}


def _extra_hint(env_id: str, error: Exception) -> str:
    extra = next((x for k, x in _EXTRAS.items() if k in env_id or k in str(error)), None)
    return f"install it with: pip install 'apexrl[{extra}]'" if extra else "install the package it needs"


def _raw_make(cfg: EnvConfig, render_mode: str | None = None, **extra: Any) -> gym.Env:
    if is_atari(cfg) or cfg.id.startswith("ALE/"):
        _register_ale()
    creator = _creator(cfg)
    if creator is not None:
        return _call(creator, cfg, render_mode, extra)
    kwargs = dict(cfg.kwargs)
    kwargs.update(extra)
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    if cfg.max_episode_steps is not None:
        kwargs["max_episode_steps"] = cfg.max_episode_steps
    try:
        with warnings.catch_warnings():  # an old id (CartPole-v0, from an RLlib file) is the user's choice; each
            warnings.filterwarnings("ignore", message=".*is out of date", category=DeprecationWarning)  # env said it
            return gym.make(cfg.id, **kwargs)
    except ImportError as e:  # the env's own dependencies (MuJoCo, Box2D, ...), not gymnasium's error type
        raise EnvSpecError(f"cannot make env '{cfg.id}': {e}; {_extra_hint(cfg.id, e)}") from None
    except gym.error.Error as e:
        if _import_env_module(cfg.id) not in gym.registry:
            raise EnvSpecError(_unknown(cfg.id)) from None
        if isinstance(e, gym.error.DependencyNotInstalled):
            raise EnvSpecError(f"cannot make env '{cfg.id}': {str(e).splitlines()[0]}; {_extra_hint(cfg.id, e)}") from None
        raise EnvSpecError(f"cannot make env '{cfg.id}': {e}") from None


def _unknown(env_id: str) -> str:
    if env_id.startswith("<") and env_id.endswith(">"):
        return (f"env '{env_id}' was handed over as a Python object that config.yaml cannot rebuild (a lambda, a "
                "local or __main__ class); pass it again: apexrl.train({'env': it, ...}, resume=RUN_DIR) or "
                "ApexTrainer(config={'env': it, ...}).restore(PATH)")
    close = difflib.get_close_matches(env_id, list(gym.registry), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else "; see gymnasium.registry for ids"
    return (f"unknown env '{env_id}' (env.id): not a gymnasium id, a ray.tune register_env name or an importable "
            f"class path{hint}")


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0]}" if text else type(e).__name__


def _creator(cfg: EnvConfig) -> Any:
    try:
        return resolve_creator(cfg.id, cfg.creator)
    except Exception as e:  # a class path whose module fails to import
        raise EnvSpecError(f"env '{cfg.id}' (env.id): cannot import it: {_first_line(e)}") from None


def _call(creator: Any, cfg: EnvConfig, render_mode: str | None, extra: dict[str, Any]) -> gym.Env:
    config = {**cfg.kwargs, **extra}
    if render_mode is not None:
        config["render_mode"] = render_mode
    try:
        env = call_creator(creator, cfg.id, config)
    except Exception as e:
        raise EnvSpecError(f"env '{cfg.id}': its creator raised {_first_line(e)}; check env.kwargs (env_config) "
                           "and the creator") from None
    if render_mode is not None and getattr(env, "render_mode", None) is None:
        env.render_mode = render_mode  # a class that ignores env_config's render_mode: render() may still work
    if cfg.max_episode_steps is not None:
        env = gym.wrappers.TimeLimit(env, cfg.max_episode_steps)
    return env


def make_env(cfg: EnvConfig, seed: int | None = None, training: bool = True,
             render_mode: str | None = None) -> gym.Env:
    """One environment. ``training=False`` gives the evaluation variant (Atari: unclipped score,
    life loss not terminal)."""
    if is_atari(cfg):
        env = make_atari(cfg, training=training, render_mode=render_mode, raw_make=_raw_make)
    elif is_minatar(cfg):
        env = make_minatar(cfg, render_mode=render_mode, raw_make=_raw_make)
    else:
        env = _raw_make(cfg, render_mode=render_mode)
        try:
            env = structure(env, cfg.id, cfg.action_mask, tuple(cfg.ignore_observation))
        except ValueError as e:
            env.close()
            raise EnvSpecError(str(e)) from None
    if seed is not None:
        env.reset(seed=seed)
        env.action_space.seed(seed)
    return env


def create_env(env: Any, seed: int | None = None, training: bool = True,
               env_config: dict[str, Any] | None = None) -> gym.Env:
    """The env exactly as apexrl's actors build it, for your own loop: a gymnasium id (``module:Class``
    ids import their module), a register_env name, a class path, an env class or creator (called with
    ``env_config``), an ``env`` config section, or an ``EnvConfig``; Atari ids get DQN preprocessing,
    structured observations become packed rows (``observation_space.codec``)."""
    if isinstance(env, str):
        cfg = EnvConfig(id=env, kwargs=env_config or {})
    elif callable(env) and not isinstance(env, EnvConfig):
        from apexrl.config.parse import describe_env_object

        cfg = EnvConfig(id=describe_env_object(env), creator=env, kwargs=env_config or {})
    elif isinstance(env, dict):
        from apexrl.config import from_dict

        cfg = from_dict({"env": env}).env
    else:
        cfg = env
    return make_env(cfg, seed=seed, training=training)


def uses_ale_vector(cfg: EnvConfig) -> bool:
    """Whether actors step ``cfg``'s envs with ale-py's C++ vector env (``env.vector``)."""
    if cfg.vector == "gymnasium":
        return False
    reason = ale_vector_reason(cfg)
    if reason is not None and cfg.vector == "ale":
        raise EnvSpecError(f"config key 'env.vector' = 'ale' cannot step '{cfg.id}': {reason}; "
                           "allowed here: auto, gymnasium")
    return reason is None


def make_actor_envs(cfg: EnvConfig, num_envs: int, first_seed: int) -> tuple[gym.vector.VectorEnv, np.ndarray]:
    """An actor's training envs, reset with seeds ``first_seed + i``: the C++ Atari vector env where it
    applies (``env.vector``), else gymnasium's ``SyncVectorEnv`` of :func:`make_env`. Returns (envs, obs)."""
    if uses_ale_vector(cfg):
        envs: gym.vector.VectorEnv = make_ale_vector(cfg, num_envs, cfg.vector_threads)
        obs, _ = envs.reset(seed=np.arange(first_seed, first_seed + num_envs, dtype=np.int64))
        return envs, obs
    return sync_vector_env([lambda: make_env(cfg, seed=None, training=True)] * num_envs, first_seed)


def sync_vector_env(makers: list[Any], first_seed: int) -> tuple[gym.vector.VectorEnv, np.ndarray]:
    envs = gym.vector.SyncVectorEnv(makers, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    obs, _ = envs.reset(seed=[first_seed + i for i in range(len(makers))])
    return envs, obs


def env_spaces(cfg: EnvConfig, check: bool = False) -> tuple[gym.Space, gym.Space]:
    """The spaces of ``cfg``'s env; with ``check``, also reset and step it once against them."""
    env = make_env(cfg)
    try:
        if check:
            try:
                problem = check_spaces_hold(cfg.id, env.env if isinstance(env, StructuredObservation) else env)
            except Exception as e:  # the user's env raised: say so in one line
                raise EnvSpecError(f"env '{cfg.id}' failed on reset or its first step: {_first_line(e)}") from None
            if problem:
                raise EnvSpecError(problem)
        return env.observation_space, env.action_space
    finally:
        env.close()


def resolve_action_mask(cfg: EnvConfig) -> EnvConfig:
    """``env.action_mask: auto`` decided once (:func:`~apexrl.envs.structured.mask_source`), so actors and
    evaluation envs are built without looking again."""
    if cfg.action_mask != "auto":
        return cfg
    if is_atari(cfg) or is_minatar(cfg):
        return dataclasses.replace(cfg, action_mask="none")
    env = _raw_make(cfg)
    try:
        found = mask_source(env)
    finally:
        env.close()
    return dataclasses.replace(cfg, action_mask=found)


def check_env(cfg: EnvConfig) -> tuple[gym.Space, gym.Space]:
    """Make the env once in the driver so that a bad id or observation space fails before anything starts
    (the agent's builder checks the action space)."""
    _, obs_space, act_space = check_and_resolve(cfg)
    return obs_space, act_space


def resolve_id(cfg: EnvConfig) -> Any:
    """The creator of ``cfg.id`` (None for a gymnasium id), or EnvSpecError naming what is wrong; builds no
    env, so a command can say it before it starts anything."""
    env_id = _import_env_module(cfg.id)
    if env_id not in gym.registry:
        if cfg.id.startswith("ALE/") or is_atari(cfg):
            _register_ale()
        elif is_minatar(cfg):
            try:
                register_minatar()
            except ImportError as e:
                raise EnvSpecError(f"env.id '{cfg.id}': {e}") from None
    creator = _creator(cfg)
    if env_id not in gym.registry and creator is None:
        raise EnvSpecError(_unknown(cfg.id))
    return creator


def _check_multiagent(cfg: EnvConfig, creator: Any) -> tuple[EnvConfig, gym.Space, gym.Space] | None:
    """A multi-agent env's checked config and shared policy's spaces; None when ``cfg``'s creator builds a
    gymnasium env (``env.api: auto``)."""
    from apexrl.envs.multiagent.games import as_game
    from apexrl.envs.multiagent.make import MultiAgentSpecError, call_any_creator, check_game

    asked = cfg.api != "auto"
    if creator is None:
        raise EnvSpecError(f"config key 'env.api' = '{cfg.api}' but env '{cfg.id}' is a gymnasium id; set env.api "
                           "to gymnasium or auto, or name a multi-agent env's creator")
    try:
        obj = call_any_creator(creator, dict(cfg.kwargs))
    except Exception as e:
        if asked:
            raise EnvSpecError(f"env '{cfg.id}': its creator raised {_first_line(e)}; check env.kwargs "
                               "(env_config) and the creator") from None
        return None  # the gymnasium path calls it RLlib's way and says what fails
    game = as_game(obj)
    if game is None:
        getattr(obj, "close", lambda: None)()
        if asked:
            raise EnvSpecError(f"config key 'env.api' = '{cfg.api}' but env '{cfg.id}' gave a {type(obj).__name__}, "
                               "not a PettingZoo or RLlib multi-agent env")
        return None
    try:
        return check_game(dataclasses.replace(cfg, creator=creator), game)
    except MultiAgentSpecError as e:
        raise EnvSpecError(str(e)) from None


def check_and_resolve(cfg: EnvConfig) -> tuple[EnvConfig, gym.Space, gym.Space]:
    """:func:`check_env`, and ``cfg`` with what was found out: the creator of a register_env name or class path
    (which then travels to workers as an object) and where action masks come from."""
    creator = resolve_id(cfg)
    if cfg.api != "gymnasium" and (creator is not None or cfg.api != "auto"):
        found = _check_multiagent(cfg, creator)
        if found is not None:
            return found
        cfg = dataclasses.replace(cfg, api="gymnasium")
    uses_ale_vector(cfg)  # env.vector=ale where it cannot apply fails here, with the reason
    if creator is not None and cfg.creator is None:
        cfg = dataclasses.replace(cfg, creator=creator)
    cfg = resolve_action_mask(cfg)
    obs_space, act_space = env_spaces(cfg, check=True)
    if not isinstance(obs_space, gym.spaces.Box) or obs_space.shape is None:
        raise EnvSpecError(f"env '{cfg.id}' has observation space {obs_space}; apexrl needs numeric array leaves")
    if not np.issubdtype(obs_space.dtype, np.number):
        raise EnvSpecError(f"env '{cfg.id}' observations have dtype {obs_space.dtype}; need numeric arrays")
    return cfg, obs_space, act_space
