"""Atomic checkpoints: written to a temporary file, fsynced, then renamed, so the newest file that
exists is always complete; resume picks the newest one that loads and says which.

A checkpoint holds only tensors, numpy arrays and plain values, and is read with ``torch.load(...,
weights_only=True)`` (numpy's array and dtype constructors allowed, nothing else): a file someone shares
cannot run code when ``apexrl eval`` or ``--resume`` opens it. One that needs other objects is refused.

A run's driver has no torch loaded: the learner's process turns a checkpoint into bytes (``to_bytes``)
and the driver writes them (``save`` and ``save_best`` take either)."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

log = logging.getLogger(__name__)

_NAME = re.compile(r"^ckpt-(\d{10})\.pt$")


class CheckpointError(ValueError):
    """A checkpoint or run dir that cannot be used; the message names the path and what to do."""


def checkpoint_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


BEST = "best.pt"


def to_bytes(state: dict[str, Any]) -> bytes:
    """The file's contents for ``state`` (torch's format)."""
    import io

    import torch

    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def save(run_dir: Path, state: dict[str, Any] | bytes, step: int, keep: int = 3) -> Path:
    path = _write(checkpoint_dir(run_dir) / f"ckpt-{step:010d}.pt", state)
    for old in list_checkpoints(run_dir)[:-keep]:
        old.unlink(missing_ok=True)
    return path


def save_best(run_dir: Path, state: dict[str, Any] | bytes) -> Path:
    """``checkpoints/best.pt``: the weights of the best greedy evaluation so far and that evaluation
    (``state["evaluation"]``); what ``apexrl eval RUN`` plays by default. Resume never reads it."""
    return _write(checkpoint_dir(run_dir) / BEST, state)


def best_path(run_dir: Path) -> Path | None:
    path = checkpoint_dir(run_dir) / BEST
    return path if path.is_file() else None


def _write(path: Path, state: dict[str, Any] | bytes) -> Path:
    d = path.parent
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".{path.name}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        if isinstance(state, bytes):
            f.write(state)
        else:  # streamed: a replay snapshot can be gigabytes
            import torch

            torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    try:
        dir_fd = os.open(d, os.O_RDONLY)
        os.fsync(dir_fd)
        os.close(dir_fd)
    except OSError:  # pragma: no cover - not every filesystem allows fsync on a directory
        pass
    return path


def list_checkpoints(run_dir: Path) -> list[Path]:
    d = checkpoint_dir(run_dir)
    if not d.is_dir():
        return []
    return sorted((p for p in d.iterdir() if _NAME.match(p.name)), key=lambda p: p.name)


def _numpy_globals() -> list[Any]:
    """What unpickling numpy arrays needs: the array constructor, ndarray, dtype and its classes."""
    core = getattr(np, "_core", None) or np.core  # numpy 2 renamed np.core
    dtype_classes = [getattr(np.dtypes, n) for n in dir(np.dtypes) if n.endswith("DType")]
    return [core.multiarray._reconstruct, np.ndarray, np.dtype, *dtype_classes]


def safe_load(path: Path | str | BinaryIO) -> Any:
    """``torch.load`` that runs no code from the file: tensors, numpy arrays and plain values only.
    Raises ``CheckpointError`` naming the first disallowed object."""
    import pickle

    import torch

    try:
        with torch.serialization.safe_globals(_numpy_globals()):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        import re

        found = re.search(r"(?:unsupported GLOBAL|Unsupported global:)\s*(?:GLOBAL\s*)?([\w.]+)", str(e), re.IGNORECASE)
        if found is None:
            raise  # not a disallowed object: a damaged file, reported by the caller
        what = found.group(1)
        raise CheckpointError(f"'{path}' holds Python objects other than tensors, arrays and plain values "
                              f"({what}); apexrl does not load it, since unpickling them could run code") from None


def load_file(path: Path) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint '{path}' does not exist")
    try:
        state = safe_load(path)
    except CheckpointError:
        raise
    except Exception as e:
        raise CheckpointError(f"checkpoint '{path}' cannot be read ({type(e).__name__}); it may be truncated") from None
    if not isinstance(state, dict) or "learner" not in state or "config" not in state:
        raise CheckpointError(f"'{path}' is not an apexrl checkpoint")
    return state


def load_latest(run_dir: Path) -> tuple[Path, dict[str, Any]]:
    """The newest checkpoint of a run that loads; older ones are tried when the newest is damaged."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise CheckpointError(f"run dir '{run_dir}' does not exist")
    candidates = list_checkpoints(run_dir)
    if not candidates:
        raise CheckpointError(f"run dir '{run_dir}' has no checkpoints (expected {checkpoint_dir(run_dir)}/ckpt-*.pt)")
    for path in reversed(candidates):
        try:
            return path, load_file(path)
        except CheckpointError as e:
            log.warning("skipping damaged checkpoint: %s", e)
    raise CheckpointError(f"no checkpoint in '{checkpoint_dir(run_dir)}' could be read")


def resolve(path: Path, best: bool = False) -> tuple[Path, dict[str, Any]]:
    """A checkpoint file, or a run dir: its newest checkpoint, or with ``best`` its best.pt where the run
    has one (else the newest)."""
    path = Path(path)
    if path.is_dir():
        found = best_path(path) if best else None
        return (found, load_file(found)) if found is not None else load_latest(path)
    return path, load_file(path)
