"""The env contract, checked where it is cheap: what a user's env returns must be what its spaces say.

A mis-shaped observation otherwise fails deep inside gymnasium's vector utilities in every actor (four
Ray tracebacks, a run dir left behind), and a NaN reward poisons the learner's targets for as long as the
run goes on. At start-up one env is reset and stepped once in the driver; in actors every vector step
checks rewards (and float observations) for non-finite values, one vectorized test per step.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class EnvContractError(ValueError):
    """An env broke its contract mid-run; restarting the actor would only meet it again, so the run stops
    after a final checkpoint with this one line."""


class NonFiniteEnvError(EnvContractError):
    """An env returned NaN or infinity; the message names the env, the actor, the env slot and the step."""


def _describe(x: Any) -> str:
    a = np.asarray(x)
    return f"shape {a.shape} {a.dtype}" if a.ndim else f"{type(x).__name__} {x!r}"


def check_spaces_hold(env_id: str, env: gym.Env) -> str | None:
    """Reset and step ``env`` once; a line saying what broke its declared spaces, or None."""
    space = env.observation_space
    obs, _ = env.reset(seed=0)
    problem = _observation_problem(obs, space)
    if problem:
        return f"env '{env_id}' returned {problem} at reset; its observation_space says {space}"
    env.action_space.seed(0)
    obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
    problem = _observation_problem(obs, space)
    if problem:
        return f"env '{env_id}' returned {problem} after a step; its observation_space says {space}"
    if not isinstance(reward, (int, float, np.integer, np.floating)) or isinstance(reward, (bool, np.bool_)):
        return f"env '{env_id}' returned a reward of type {type(reward).__name__} ({reward!r}); rewards must be numbers"
    if not np.isfinite(reward):
        return f"env '{env_id}' returned a non-finite reward ({reward}) after a step"
    return None


def _observation_problem(obs: Any, space: gym.Space, where: str = "") -> str | None:
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        keys = list(space.spaces) if isinstance(space, gym.spaces.Dict) else range(len(space.spaces))
        for k in keys:
            try:
                value = obs[k]
            except (KeyError, IndexError, TypeError):
                return f"an observation without its entry '{where}{k}'"
            problem = _observation_problem(value, space[k], f"{where}{k}.")
            if problem:
                return problem
        return None
    if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        ok = False
        try:
            ok = space.contains(np.asarray(obs, dtype=np.int64) if not isinstance(space, gym.spaces.Discrete)
                                else np.int64(obs))
        except (TypeError, ValueError):
            pass
        return None if ok else f"an observation entry '{where.rstrip('.') or 'observation'}' of {_describe(obs)}"
    if not isinstance(space, gym.spaces.Box):
        return None
    if where:
        problem = _observation_problem(obs, space)
        return problem and problem.replace("an observation", f"an observation entry '{where.rstrip('.')}'", 1)
    a = np.asarray(obs)
    if a.shape != space.shape:
        return f"an observation of {_describe(obs)}"
    if np.issubdtype(space.dtype, np.integer) and not np.issubdtype(a.dtype, np.integer):
        return f"an observation of {_describe(obs)} (the space holds integers)"
    if not np.issubdtype(a.dtype, np.number):
        return f"an observation of {_describe(obs)} (not numbers)"
    if np.issubdtype(a.dtype, np.floating) and not np.isfinite(a).all():
        return f"a non-finite observation ({a.ravel()[~np.isfinite(a.ravel())][0]})"
    low, high = np.broadcast_to(space.low, a.shape), np.broadcast_to(space.high, a.shape)
    out = (a < low) | (a > high)
    if out.any():
        i = int(np.flatnonzero(out.ravel())[0])
        return (f"an observation outside its bounds (element {i}: {a.ravel()[i]} not in "
                f"[{low.ravel()[i]}, {high.ravel()[i]}])")
    return None


def non_finite_rows(reward: np.ndarray, obs: np.ndarray, codec: Any = None) -> np.ndarray:
    """[E] bool: where a vector step's reward or (float) observation holds NaN or infinity; ``codec``: the
    float leaves of packed structured observations."""
    bad = ~np.isfinite(reward)
    if codec is not None:
        bad |= codec.non_finite_rows(obs)
    elif obs.dtype.kind == "f":
        bad |= ~np.isfinite(obs.reshape(len(obs), -1)).all(axis=1)
    return bad


def non_finite_items(items: dict[str, np.ndarray], obs_shape: tuple[int, ...], codec: Any = None) -> np.ndarray:
    """[N] bool: replay items (n-step transitions or sequences) holding a non-finite reward or observation."""
    reward = items["reward"]
    N = len(reward)
    bad = ~np.isfinite(reward.reshape(N, -1)).all(axis=1)
    sequences = "next_obs" not in items  # [N, T, *obs_shape] observations per item
    for key in ("obs", "next_obs"):
        if key in items:
            rows = items[key].reshape(-1, *obs_shape) if sequences else items[key]
            bad |= non_finite_rows(np.zeros(len(rows)), rows, codec).reshape(N, -1).any(axis=1)
    return bad


def first_non_finite(reward: np.ndarray, obs: np.ndarray, codec: Any = None) -> tuple[str, int, Any] | None:
    """(what, env slot, value) of the first non-finite reward or observation of a vector step, or None."""
    bad = ~np.isfinite(reward)
    if bad.any():
        e = int(np.flatnonzero(bad)[0])
        return "reward", e, reward[e]
    if codec is not None:
        rows = codec.non_finite_rows(obs)
        return ("observation", int(np.flatnonzero(rows)[0]), "nan/inf") if rows.any() else None
    if obs.dtype.kind == "f":
        flat = obs.reshape(len(obs), -1)
        rows = ~np.isfinite(flat).all(axis=1)
        if rows.any():
            e = int(np.flatnonzero(rows)[0])
            return "observation", e, flat[e][~np.isfinite(flat[e])][0]
    return None
