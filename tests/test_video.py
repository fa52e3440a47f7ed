"""apexrl.video: greedy episodes written as GIF (Pillow) or mp4 (imageio-ffmpeg, when installed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from apexrl.agents import get_builder
from apexrl.config import Config, EnvConfig, NetworkConfig
from apexrl.envs import env_spaces
from apexrl.video import VideoError, open_writer, record_episode


def _gif_frames(path: Path) -> tuple[int, int, tuple[int, int]]:
    """(frames, total duration in ms, size); Pillow merges identical consecutive frames, adding up
    their durations, so the duration is what counts frames reliably."""
    with Image.open(path) as im:
        total = 0
        for i in range(im.n_frames):
            im.seek(i)
            total += im.info["duration"]
        return im.n_frames, total, im.size


def _net(cfg: EnvConfig):
    """A greedy policy of an untrained network, as ``apexrl eval --video`` records."""
    torch.manual_seed(0)
    obs, act = env_spaces(cfg)
    config = Config(env=cfg, network=NetworkConfig(torso=(16,), head=16))
    builder = get_builder("dqn")
    return builder.make_eval_policy(config, builder.make_network(config, obs, act), act, 1, seed=0)


def test_cartpole_gif_has_one_frame_per_step(tmp_path: Path) -> None:
    cfg = EnvConfig(id="CartPole-v1")
    path = tmp_path / "cartpole.gif"
    ret, steps = record_episode(_net(cfg), cfg, path, seed=0)
    assert steps >= 1 and ret == steps  # CartPole: +1 per step
    n, total_ms, size = _gif_frames(path)
    assert n <= steps + 1 and size == (600, 400)
    assert total_ms == (steps + 1) * 20  # the reset frame, then one per step; 50 fps


@pytest.mark.atari
def test_atari_gif_shows_the_rgb_screen(tmp_path: Path) -> None:
    cfg = EnvConfig(id="ALE/Pong-v5", max_episode_frames=200)  # ~45 agent steps
    path = tmp_path / "pong.gif"
    ret, steps = record_episode(_net(cfg), cfg, path, seed=0)
    n, total_ms, size = _gif_frames(path)
    assert size == (160, 210) and steps >= 20
    # 15 agent steps/s (60 Hz / frame skip 4): 66.7 ms per frame, stored by GIF in 10 ms units
    assert abs(total_ms - (steps + 1) * 1000 / 15) <= 10 * (steps + 1)


def test_mp4(tmp_path: Path) -> None:
    pytest.importorskip("imageio_ffmpeg")
    import imageio.v2 as imageio

    cfg = EnvConfig(id="CartPole-v1")
    path = tmp_path / "cartpole.mp4"
    _, steps = record_episode(_net(cfg), cfg, path, seed=0)
    reader = imageio.get_reader(str(path))
    try:
        assert reader.count_frames() == steps + 1
        assert reader.get_meta_data()["size"] == (600, 400)
    finally:
        reader.close()


def test_bad_paths_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(VideoError, match=r"\.mp4 or \.gif"):
        open_writer(tmp_path / "x.avi", 30)
    with pytest.raises(VideoError, match="does not exist"):
        open_writer(tmp_path / "missing" / "x.gif", 30)


def test_gif_writer_roundtrip(tmp_path: Path) -> None:
    w = open_writer(tmp_path / "f.gif", 10)
    frames = [np.full((8, 6, 3), v, dtype=np.uint8) for v in (0, 128, 255)]
    for f in frames:
        w.append(f)
    w.close()
    with Image.open(tmp_path / "f.gif") as im:
        assert im.n_frames == 3
        im.seek(2)
        assert np.asarray(im.convert("RGB"))[0, 0].tolist() == [255, 255, 255]
