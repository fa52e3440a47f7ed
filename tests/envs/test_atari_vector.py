"""Actors' Atari envs in C++ (``env.vector=ale``): the same protocol, pixel for pixel, as the gymnasium path."""

from __future__ import annotations

import numpy as np
import pytest

from apexrl.config import EnvConfig, load
from apexrl.envs import EnvSpecError, make_env
from apexrl.envs.atari_vector import ale_vector_reason, make_ale_vector, rom_name
from apexrl.envs.factory import make_actor_envs, uses_ale_vector
from apexrl.replay.frames import FrameStackEncoder

pytestmark = pytest.mark.atari


@pytest.mark.parametrize("env_id, rom", [("ALE/Pong-v5", "pong"), ("PongNoFrameskip-v4", "pong"),
                                         ("ALE/MsPacman-v5", "ms_pacman"), ("ALE/SpaceInvaders-v5", "space_invaders"),
                                         ("BreakoutNoFrameskip-v4", "breakout"), ("ALE/UpNDown-v5", "up_n_down")])
def test_rom_names(env_id: str, rom: str) -> None:
    assert rom_name(env_id) == rom


def test_same_pixels_rewards_and_ends_as_the_gymnasium_path() -> None:
    cfg = EnvConfig(id="ALE/Pong-v5", noop_max=0)  # no random no-ops: both paths start in the same state
    gym_env = make_env(cfg, training=True)
    vec = make_ale_vector(cfg, 1)
    g_obs, _ = gym_env.reset(seed=0)
    v_obs, _ = vec.reset(seed=np.array([0]))
    actions = np.random.default_rng(0).integers(0, 6, size=400)
    rewards = 0
    for t, a in enumerate(actions):
        g_obs, g_r, g_term, g_trunc, _ = gym_env.step(int(a))
        v_obs, v_r, v_term, v_trunc, _ = vec.step(np.array([a]))
        # Whole stacks once the reset padding (zeros here, copies of the first frame there) is gone.
        np.testing.assert_array_equal(v_obs[0, -1], g_obs[-1], err_msg=f"step {t}")
        if t >= 3:
            np.testing.assert_array_equal(v_obs[0], g_obs, err_msg=f"step {t}")
        assert (v_r[0], v_term[0], v_trunc[0]) == (g_r, g_term, g_trunc), t
        rewards += abs(g_r)
    assert rewards >= 1, "the comparison should include scored points"


def _breakout(**over) -> EnvConfig:
    return EnvConfig(id="ALE/Breakout-v5", **over)


def test_a_lost_life_is_terminal_and_the_game_goes_on() -> None:
    vec = make_ale_vector(_breakout(), 1)
    vec.reset(seed=np.array([3]))
    lives, frames = [], []
    rng = np.random.default_rng(0)
    while len(lives) < 5:
        _, _, term, trunc, info = vec.step(rng.integers(0, 4, size=1))
        if term[0] or trunc[0]:
            lives.append(int(info["lives"][0]))
            frames.append(int(info["episode_frame_number"][0]))
            assert "final_obs" in info
    assert lives == [4, 3, 2, 1, 5]  # four lost lives, then game over and a new game
    assert frames[:4] == sorted(frames[:4]) and frames[4] < frames[3]  # one game's clock until game over


def test_rewards_are_clipped_to_their_sign_in_training() -> None:
    cfg = _breakout(noop_max=0)
    vec = make_ale_vector(cfg, 1)
    vec.reset(seed=np.array([0]))
    env = make_env(cfg, training=False)  # raw scores, same game
    env.reset(seed=0)
    rng = np.random.default_rng(1)
    clipped, raw = [], []
    for _ in range(1500):
        a = rng.integers(0, 4)
        _, r, term, trunc, _ = vec.step(np.array([a]))
        _, r_raw, term_raw, trunc_raw, _ = env.step(int(a))
        clipped.append(r[0])
        raw.append(r_raw)
        if term_raw or trunc_raw:
            break
    assert sum(raw) > 0 and np.array_equal(np.asarray(clipped), np.sign(raw))


def test_the_episode_frame_cap_truncates() -> None:
    vec = make_ale_vector(EnvConfig(id="ALE/Pong-v5", max_episode_frames=400), 1)
    vec.reset(seed=np.array([0]))
    for t in range(1, 200):
        _, _, term, trunc, _ = vec.step(np.array([0]))
        if term[0] or trunc[0]:
            break
    assert trunc[0] and not term[0] and 100 - 30 // 4 - 1 <= t <= 100


def test_stacks_shift_by_one_frame_through_life_losses_and_game_overs() -> None:
    """The frame encoder's consistency check, run over the C++ env's final observations and resets as the
    actor feeds them (``observe_final`` before ``observe_step``)."""
    E = 3
    envs, obs = make_actor_envs(_breakout(max_episode_frames=2000), E, 7)
    enc = FrameStackEncoder(E, 4, check=True)
    enc.observe_reset(np.arange(E), obs)
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(800):
        obs, _, term, trunc, info = envs.step(rng.integers(0, 4, size=E))
        done = term | trunc
        for e in np.flatnonzero(done):
            enc.observe_final(e, info["final_obs"][e])
        enc.observe_step(obs, reset_mask=done)
        ends += int(done.sum())
    assert ends >= 10


def test_env_vector_picks_the_path() -> None:
    pong = load("atari").env
    assert uses_ale_vector(pong) and uses_ale_vector(EnvConfig(id="ALE/Pong-v5", vector="ale"))
    assert not uses_ale_vector(EnvConfig(id="ALE/Pong-v5", vector="gymnasium"))
    assert not uses_ale_vector(EnvConfig(id="CartPole-v1"))  # auto: gymnasium for everything else
    assert "only passed on by the gymnasium path" in ale_vector_reason(EnvConfig(id="ALE/Pong-v5",
                                                                                 kwargs={"mode": 1}))


def test_env_vector_ale_where_it_cannot_apply_is_one_clear_error() -> None:
    with pytest.raises(EnvSpecError, match=r"env.vector' = 'ale' cannot step 'CartPole-v1': it is not an Atari"):
        uses_ale_vector(EnvConfig(id="CartPole-v1", vector="ale"))
