"""MinAtar ids: channel-first uint8 grids, MinAtar's conv torso, a time limit, one line when not installed."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from apexrl.config import EnvConfig, load
from apexrl.envs import check_env, make_env

pytest.importorskip("minatar", reason="MinAtar ids need the 'minatar' extra: pip install -e '.[minatar]'")


def test_observations_are_channel_first_uint8_grids_and_episodes_are_capped():
    env = make_env(EnvConfig(id="MinAtar/Breakout-v1", max_episode_steps=5), seed=0)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4, 10, 10) and obs.dtype == np.uint8 and set(np.unique(obs)) <= {0, 1}
    assert env.observation_space.shape == (4, 10, 10) and env.action_space.n == 3  # minimal action set
    for t in range(5):
        obs, r, terminated, truncated, _ = env.step(0)
        if terminated:
            break
    assert terminated or truncated, "the episode ends at max_episode_steps even if the game goes on"


def test_without_a_configured_limit_a_default_cap_applies():
    from apexrl.envs.minatar import DEFAULT_MAX_STEPS

    env = make_env(EnvConfig(id="MinAtar/Freeway-v1"))
    limits = []
    e = env
    while hasattr(e, "env"):
        if isinstance(e, gym.wrappers.TimeLimit):
            limits.append(e._max_episode_steps)
        e = e.env
    assert limits == [DEFAULT_MAX_STEPS]


def test_the_preset_builds_minatars_network_for_every_game():
    from apexrl.agents import get_builder

    for game in ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders"):
        cfg = load("minatar", [f"env.id=MinAtar/{game}-v1"])
        obs_space, act_space = check_env(cfg.env)
        net = get_builder("dqn").make_network(cfg, obs_space, act_space)
        q = net(torch.zeros((2, *obs_space.shape), dtype=torch.uint8))
        assert q.shape == (2, act_space.n)
        assert type(net.torso).__name__ == "MinAtarTorso"


def test_without_the_package_the_error_names_the_extra(monkeypatch):
    import sys

    from apexrl.envs import EnvSpecError
    from apexrl.envs.minatar import register_minatar

    register_minatar.cache_clear()
    monkeypatch.setitem(sys.modules, "minatar.gym", None)  # import fails as if not installed
    try:
        with pytest.raises(EnvSpecError) as e:
            check_env(EnvConfig(id="MinAtar/NotRegistered-v1"))
        assert "pip install 'apexrl[minatar]'" in str(e.value)
    finally:
        register_minatar.cache_clear()
