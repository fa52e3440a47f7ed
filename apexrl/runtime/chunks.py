"""How much work the driver hands out at a time: actor chunks of ~0.25 s of acting, learner chunks of
0.25 s, and no actor chunk past the run's env-step budget. Pure arithmetic, Ray-free."""

from __future__ import annotations

from typing import Any

import numpy as np

ACTOR_CHUNK_S = 0.25
LEARNER_CHUNK_S = 0.25


def first_actor_chunk(envs_per_actor: int) -> int:
    """Vector steps of an actor's first ``run`` call, before its speed is known (~256 env steps)."""
    return max(1, 256 // envs_per_actor)


def next_actor_chunk(res: dict[str, Any], envs_per_actor: int) -> int:
    """Vector steps for ~ACTOR_CHUNK_S of acting at the speed the last chunk ran: long enough that a Ray
    call per chunk costs the actor (and the driver) little, short enough that a dead actor is noticed and
    the report stays current."""
    per_step = res["time_s"] / max(1, res["env_steps"] // envs_per_actor)
    return int(np.clip(ACTOR_CHUNK_S / max(per_step, 1e-6), 1, 10_000))


def within_budget(steps: int, envs_per_actor: int, budget: int | None, counted: int, in_flight: int) -> int:
    """Vector steps of the next chunk so that what was counted, what is in flight and this chunk stay
    within ``budget`` env steps (rounded up to whole vector steps); 0: the budget is spoken for. Fast
    actors otherwise ran whole chunks past it (4 actors: 51k steps of a 30k budget)."""
    if budget is None:
        return steps
    left = budget - counted - in_flight
    return 0 if left <= 0 else min(steps, -(-left // envs_per_actor))
