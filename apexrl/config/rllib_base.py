"""The rows' vocabulary of RLlib's key mapping: the config being translated (``Ctx``), a row (``Key``) and the
common kinds of row (same meaning, no effect, refused). The rows themselves: ``rllib_keys`` and ``rllib_r2d2``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from apexrl.config.schema import ConfigError

ITERATION_S = 5.0  # an iteration's seconds when min_time_s_per_iteration is not given (ApexTrainer's default)


class Ctx:
    """The RLlib config being translated (dotted keys), its ``run`` and the host's CPUs."""

    def __init__(self, flat: Mapping[str, Any], run: str, host_cpus: int, base: Mapping[str, Any]) -> None:
        self.flat, self.run, self.host_cpus, self.base = flat, run, host_cpus, base
        self.notes: list[str] = []

    def get(self, key: str, default: Any = None) -> Any:
        return self.flat.get(key, default)

    @property
    def dpg(self) -> bool:
        return self.run in ("APEX_DDPG", "DDPG", "TD3")

    def batch_size(self) -> int:
        b = self.get("train_batch_size", self.base.get("learner", {}).get("batch_size", 64))
        return max(1, int(b))

    def iteration_s(self) -> float:
        return float(self.get("min_time_s_per_iteration") or ITERATION_S)


Apply = Callable[[Any, Ctx], dict[str, Any]]


@dataclass(frozen=True)
class Key:
    rllib: str
    sets: str  # apexrl keys it sets ("" = none), for the docs
    how: str  # the meaning, for the docs
    apply: Apply
    rename: bool = False  # the value is used as it is (``--set lr=...`` may set it directly)


def refuse(key: str, value: Any, why: str) -> ConfigError:
    return ConfigError(f"RLlib key '{key}' = {value!r} is not supported: {why}")


def same(rllib: str, ours: str, how: str = "same meaning", convert: Callable[[Any], Any] | None = None) -> Key:
    return Key(rllib, ours, how, lambda v, c: {ours: v if convert is None else convert(v)}, rename=convert is None)


def inert(rllib: str, why: str, ok: Callable[[Any], bool] = lambda v: True, refusal: str = "") -> Key:
    """Accepted and listed once (changes nothing here); refused where ``ok(value)`` is false."""
    def apply(v: Any, c: Ctx) -> dict[str, Any]:
        if not ok(v):
            raise refuse(rllib, v, refusal or why)
        c.notes.append(f"{rllib} ({why})")
        return {}
    return Key(rllib, "", f"no effect: {why}" + (f"; other values refused: {refusal}" if refusal else ""), apply)
