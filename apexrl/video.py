"""Record a greedy episode as a video: ``apexrl eval CHECKPOINT --video out.mp4`` (or ``.gif``).

The episode runs in the evaluation variant of the env (Atari: unclipped score, the whole game) with
``render_mode="rgb_array"``; the video shows the full-resolution RGB screen the env renders, not the
84x84 grayscale stacks the network sees.

Formats: ``.mp4`` through ``imageio`` + ``imageio-ffmpeg`` (``pip install "apexrl[video]"``, ~70 MB,
so not a dependency of apexrl), streamed frame by frame; ``.gif`` through Pillow (comes with tensorboard),
kept in memory as 8-bit palette frames (~34 KB per Atari frame), so long episodes are better as mp4.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from apexrl.agents.base import Policy
from apexrl.config import EnvConfig
from apexrl.envs import is_atari, make_env

FORMATS = (".mp4", ".gif")


class VideoError(ValueError):
    """The video cannot be written (format, missing encoder); the message says what to do."""


class _Writer(Protocol):
    def append(self, frame: np.ndarray) -> None: ...

    def close(self) -> None: ...


class _Mp4Writer:
    def __init__(self, path: Path, fps: float) -> None:
        try:
            import imageio.v2 as imageio
            import imageio_ffmpeg  # noqa: F401
        except ImportError:
            raise VideoError(f"writing '{path}' needs imageio with ffmpeg: pip install \"imageio[ffmpeg]\" "
                             "(or give a .gif path, written with Pillow)") from None
        # macro_block_size=2: libx264/yuv420p needs even sizes; Atari's 210x160 and CartPole's 400x600
        # are, so no resizing.
        self._w = imageio.get_writer(str(path), fps=fps, codec="libx264", quality=7, macro_block_size=2)

    def append(self, frame: np.ndarray) -> None:
        self._w.append_data(frame)

    def close(self) -> None:
        self._w.close()


class _GifWriter:
    def __init__(self, path: Path, fps: float) -> None:
        self.path, self.fps = path, fps
        self.frames: list[Any] = []

    def append(self, frame: np.ndarray) -> None:
        from PIL import Image

        self.frames.append(Image.fromarray(frame).quantize(colors=256))

    def close(self) -> None:
        if not self.frames:
            return
        first, *rest = self.frames
        first.save(self.path, save_all=True, append_images=rest, duration=max(20, round(1000 / self.fps)),
                   loop=0, optimize=False)


def open_writer(path: str | os.PathLike[str], fps: float) -> _Writer:
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in FORMATS:
        raise VideoError(f"--video {p}: unsupported format '{suffix or '(none)'}'; use .mp4 or .gif")
    if p.parent and not p.parent.exists():
        raise VideoError(f"--video {p}: directory '{p.parent}' does not exist")
    return _Mp4Writer(p, fps) if suffix == ".mp4" else _GifWriter(p, fps)


def video_fps(env: Any, env_cfg: EnvConfig) -> float:
    """Real-time playback: one video frame per agent step. Atari: the console's 60 frames/s over the
    frame skip (ALE's own ``render_fps`` metadata does not know about our skip); else the env's fps."""
    if is_atari(env_cfg):
        return 60.0 / env_cfg.frame_skip
    return float(env.metadata.get("render_fps") or 30)


@torch.no_grad()
def record_episode(policy: Policy, env_cfg: EnvConfig, path: str | os.PathLike[str], seed: int = 0,
                   max_steps: int = 30_000) -> tuple[float, int]:
    """Play one episode with ``policy`` (an evaluation policy of one env) and write it to ``path``.

    Returns (episode return, steps). ``max_steps`` bounds the video (Atari's own cap is 27,000 steps).
    """
    env = make_env(env_cfg, seed=None, training=False, render_mode="rgb_array")
    writer: _Writer | None = None
    try:
        writer = open_writer(path, video_fps(env, env_cfg))
        obs, _ = env.reset(seed=seed)
        writer.append(np.asarray(env.render()))
        total, steps = 0.0, 0
        for steps in range(1, max_steps + 1):
            action = policy.act(np.asarray(obs)[None])[0]
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            writer.append(np.asarray(env.render()))
            if terminated or truncated:
                break
        return total, steps
    finally:
        if writer is not None:
            writer.close()
        env.close()
