"""Where a run's numbers go: ``metrics.jsonl`` (one line per report), TensorBoard, and the console.

TensorBoard keys are namespaced like CleanRL's (``charts/``, ``losses/``, ``replay/``, ``actors/``) so
runs from different tools line up; the JSON lines keep flat, stable names for scripts.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from apexrl import strict_json

log = logging.getLogger(__name__)

# flat metrics.jsonl key -> TensorBoard tag
TB_TAGS = {
    "train_return_mean": "charts/train_return_mean",
    "train_return_low_explore_mean": "charts/train_return_low_explore_mean",
    "eval_return_mean": "charts/eval_return_mean",
    "eval_return_std": "charts/eval_return_std",
    "env_steps_per_s": "charts/env_steps_per_s",
    "updates_per_s": "charts/updates_per_s",
    "learner_idle_fraction": "charts/learner_idle_fraction",
    "loss": "losses/td_loss",
    "actor_loss": "losses/actor_loss",
    "q_mean": "losses/q_mean",
    "td_abs_mean": "losses/td_abs_mean",
    "grad_norm": "losses/grad_norm",
    "is_weight_mean": "replay/is_weight_mean",
    "replay_size": "replay/size",
    "replay_inserted": "replay/inserted",
    "priority_mass": "replay/priority_mass",
    "beta": "replay/beta",
    "skipped_updates": "losses/skipped_updates",
    "actor_restarts": "actors/restarts",
    "shard_restarts": "replay/shard_restarts",
}


class MetricsWriter:
    def __init__(self, run_dir: Path, tensorboard: bool = True, purge_step: int | None = None) -> None:
        self.path = run_dir / "metrics.jsonl"
        self._file = self.path.open("a")
        self._tb = None
        if tensorboard:
            try:
                from apexrl.tb_events import EventWriter

                self._tb = EventWriter(run_dir / "tb", purge_step=purge_step)
            except Exception as e:  # pragma: no cover - tensorboard is a dependency
                log.warning("TensorBoard disabled: %s", e)

    def hparams(self, flat_config: dict[str, Any]) -> None:
        if self._tb is not None:
            rows = "\n".join(f"|{k}|{v}|" for k, v in flat_config.items())
            self._tb.add_text("hyperparameters", f"|param|value|\n|-|-|\n{rows}")

    def write(self, record: dict[str, Any], step: int) -> None:
        self._file.write(strict_json.dumps(record) + "\n")
        self._file.flush()
        if self._tb is None:
            return
        for key, value in record.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                tag = TB_TAGS.get(key)
                if tag is None:
                    if "/" in key and key.partition("/")[0] in TB_TAGS:  # <learner metric>/<policy>: several policies
                        name, _, policy = key.partition("/")
                        tag = f"{TB_TAGS[name]}/{policy}"
                    elif key.startswith(("actor", "shard")):
                        tag = f"actors/{key}" if key.startswith("actor") else f"replay/{key}"
                    elif key.startswith("eval_seat_"):  # eval_seat_<agent>_<win|draw|loss>
                        tag = f"eval/{key[len('eval_seat_'):]}"
                    elif key.startswith("eval_policy_"):  # eval_policy_<policy>_return
                        tag = f"eval/{key[len('eval_policy_'):]}"
                    else:
                        continue
                self._tb.add_scalar(tag, value, step)

    def close(self) -> None:
        self._file.close()
        if self._tb is not None:
            self._tb.close()


def _fmt(v: Any, spec: str = ".1f") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return format(v, spec)


def progress_line(r: dict[str, Any]) -> str:
    return (
        f"{_fmt(r['time_s'], '6.0f')}s  steps {r['env_steps']:>9,}  updates {r['learner_updates']:>7,}  "
        f"return {_fmt(r.get('train_return_mean')):>6}  eval {_fmt(r.get('eval_return_mean_last')):>6}  "
        f"{_fmt(r.get('env_steps_per_s'), '.0f')} steps/s  {_fmt(r.get('updates_per_s'), '.0f')} upd/s  "
        f"replay {_fmt(r.get('replay_size'), ',')}" + seats_text(r)
    )


def seats_text(r: dict[str, Any]) -> str:
    """Win / draw / loss of the last evaluation against the opponent, per seat (multi-agent games)."""
    seats = sorted({k[len("eval_seat_"):].rsplit("_", 1)[0] for k in r if k.startswith("eval_seat_")})
    parts = [f"{s} {r[f'eval_seat_{s}_win']:.1%}/{r[f'eval_seat_{s}_draw']:.1%}/{r[f'eval_seat_{s}_loss']:.1%}"
             for s in seats]
    return f"  W/D/L {', '.join(parts)}" if parts else ""


class Console:
    """A live status line on a terminal (rewritten in place), plain periodic lines elsewhere."""

    def __init__(self, mode: str = "auto", stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        if mode == "auto":
            tty = getattr(self.stream, "isatty", lambda: False)()
            mode = "live" if tty and os.environ.get("TERM") != "dumb" else "plain"
        self.mode = mode
        self._last_plain = 0.0
        self._live = False

    def update(self, record: dict[str, Any]) -> None:
        if self.mode == "off":
            return
        line = progress_line(record)
        if self.mode == "live":
            # Clip to the terminal: a wrapped line leaves one stale row per update ("\x1b[2K" clears one).
            self.stream.write("\r\x1b[2K" + line[: max(20, self._columns() - 1)])
            self.stream.flush()
            self._live = True
        elif time.monotonic() - self._last_plain >= 10.0 or self._last_plain == 0.0:
            self._last_plain = time.monotonic()
            self.stream.write(line + "\n")
            self.stream.flush()

    def _columns(self) -> int:
        try:
            return os.get_terminal_size(self.stream.fileno()).columns
        except (AttributeError, ValueError, OSError):
            return shutil.get_terminal_size(fallback=(120, 24)).columns

    def message(self, text: str) -> None:
        if self.mode == "off":
            return
        if self._live:
            self.stream.write("\n")
            self._live = False
        self.stream.write(text + "\n")
        self.stream.flush()
