"""Atari: DQN preprocessing, the actor's frame path, and an end-to-end run through the driver."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import torch

import apexrl.runtime.actor as actor_mod
from apexrl.config import Config, EnvConfig, from_dict, load
from apexrl.envs import make_env
from apexrl.envs.atari import frame_stacked
from apexrl.replay import FramePrioritizedReplay
from apexrl.runtime.assembly import assemble

pytestmark = pytest.mark.atari


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """As in the Ray workers: on a shared 2-core host, two OpenMP threads per tiny forward pass spin
    against each other (100x slower than one thread under load)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ---------------------------------------------------------------- preprocessing
@pytest.mark.parametrize("training", [True, False])
def test_observations_are_uint8_stacks(training: bool) -> None:
    env = make_env(EnvConfig(id="ALE/Pong-v5"), seed=0, training=training)
    try:
        assert env.observation_space.shape == (4, 84, 84)
        assert env.observation_space.dtype == np.uint8
        obs, _ = env.reset(seed=0)
        assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
        assert (obs[0] == obs[-1]).all()  # reset pads with copies of the first frame
        for _ in range(5):
            obs, *_ = env.step(0)
        assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
        assert env.action_space.n == 6  # minimal action set, not the full 18
        ale = env.unwrapped
        assert ale._frameskip == 1  # the skip happens in AtariPreprocessing (with max-pool)
    finally:
        env.close()


def test_dqn_protocol_settings() -> None:
    from gymnasium.wrappers import AtariPreprocessing

    env = make_env(EnvConfig(id="ALE/Pong-v5"), seed=0, training=True)
    try:
        w = env
        while not isinstance(w, AtariPreprocessing):
            w = w.env
        assert (w.noop_max, w.frame_skip, w.screen_size) == (30, 4, (84, 84))
        assert not w.terminal_on_life_loss  # our LifeLossTerminal handles it (game continues)
        spec_kwargs = env.unwrapped.spec.kwargs
        assert spec_kwargs["repeat_action_probability"] == 0.0
        assert spec_kwargs["max_num_frames_per_episode"] == 108_000
        assert spec_kwargs["full_action_space"] is False
    finally:
        env.close()


def _play(env: Any, steps: int, seed: int) -> tuple[set[float], int, list[int]]:
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    rewards: set[float] = set()
    ends, lives = 0, []
    for _ in range(steps):
        _, r, term, trunc, _ = env.step(int(rng.integers(env.action_space.n)))
        rewards.add(float(r))
        if term or trunc:
            ends += 1
            lives.append(int(env.unwrapped.ale.lives()))
            env.reset()
    return rewards, ends, lives


def test_reward_clipping_only_in_training() -> None:
    # Breakout's upper bricks are worth 4 and 7 points; random play hits a few.
    cfg = EnvConfig(id="ALE/Breakout-v5")
    train_r, _, _ = _play(make_env(cfg, training=True), 1500, seed=1)
    eval_r, _, _ = _play(make_env(cfg, training=False), 1500, seed=1)
    assert train_r <= {-1.0, 0.0, 1.0}
    assert max(eval_r) >= 1.0
    cfg_big = EnvConfig(id="ALE/SpaceInvaders-v5")  # 5..30 points per invader
    assert max(_play(make_env(cfg_big, training=False), 400, seed=2)[0]) > 1.0
    assert _play(make_env(cfg_big, training=True), 400, seed=2)[0] <= {-1.0, 0.0, 1.0}


def test_life_loss_terminal_only_in_training_and_game_goes_on() -> None:
    cfg = EnvConfig(id="ALE/Breakout-v5")  # 5 lives
    _, ends, lives = _play(make_env(cfg, training=True), 1200, seed=3)
    assert ends >= 5
    assert lives[:5] == [4, 3, 2, 1, 0]  # each end is one life, not a restarted game
    _, ends_eval, lives_eval = _play(make_env(cfg, training=False), 1200, seed=3)
    assert ends_eval < ends and set(lives_eval) <= {0}  # evaluation ends only at game over


def test_episode_frame_cap_truncates() -> None:
    env = make_env(EnvConfig(id="ALE/Pong-v5", max_episode_frames=400), training=False)
    env.reset(seed=0)
    for t in range(1, 200):
        _, _, term, trunc, _ = env.step(0)
        if term or trunc:
            break
    # 400 emulator frames, counted from the reset: 1..30 no-op frames, then 4 frames per agent step.
    assert trunc and not term and 100 - 30 // 4 - 1 <= t <= 100


# ---------------------------------------------------------------- actor frame path
class _ReplaySink:
    """Stores what an actor sends in a replay buffer and remembers the raw sends for checks."""

    def __init__(self, buf: Any) -> None:
        self.buf, self.sends = buf, []
        self.ids: list[np.ndarray] = []

    def add(self, batch: dict[str, np.ndarray], priorities: np.ndarray) -> None:
        self.sends.append((batch, priorities))
        self.ids.append(self.buf.add(batch, priorities))

    def flush(self) -> None:
        pass


def _tiny_cfg(**over: Any) -> Config:
    base = {
        "seed": 3,
        "env": {"id": "ALE/Breakout-v5", "max_episode_frames": 600},
        "actors": {"envs_per_actor": 2, "send_every": 16, "eps_base": 0.4},
        "learner": {"n_step": 3, "gamma": 0.99},
        "replay": {"capacity": 4096},
    }
    cfg = from_dict(base)
    return cfg.replace(**over) if over else cfg


def _factory() -> Any:
    from apexrl.agents.dqn.networks import build_network

    def make(obs_space: Any, act_space: Any) -> torch.nn.Module:
        torch.manual_seed(0)
        return build_network(obs_space, act_space, _tiny_cfg().network)

    return make


@pytest.mark.parametrize("vector", ["gymnasium", "ale"])
def test_actor_frame_path_round_trips_through_replay(vector: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two actors with the same seed and weights act identically; one sends pixel stacks (array path),
    the other de-duplicated frames. Replay must give back exactly the stacks the env produced, and the
    cached-Q priorities must equal the ones computed from those stacks. Both env paths (``env.vector``)."""
    cfg = _tiny_cfg(**{"env.vector": vector})
    assert frame_stacked(cfg.env)
    frame_sink = _ReplaySink(FramePrioritizedReplay(4096, seed=0))
    framed = assemble(cfg, num_actors=2, model_factory=_factory()).make_actor(0, frame_sink)
    assert framed.frames
    monkeypatch.setattr(actor_mod, "frame_stacked", lambda env_cfg: False)
    array_sink = _ReplaySink(FramePrioritizedReplay(4096, seed=0))  # only .sends used
    array_sink.add = lambda b, p: array_sink.sends.append((b, p))  # type: ignore[method-assign]
    plain = assemble(cfg, num_actors=2, model_factory=_factory()).make_actor(0, array_sink)
    assert not plain.frames

    stats = framed.run(400)
    plain.run(400)
    framed.close()
    plain.close()
    assert stats["episode_returns"], "expected episode ends (life losses and truncations) in the run"

    truth = {k: np.concatenate([b[k] for b, _ in array_sink.sends]) for k in array_sink.sends[0][0]}
    prio_truth = np.concatenate([p for _, p in array_sink.sends])
    ids = np.concatenate(frame_sink.ids)
    assert len(ids) == len(truth["action"]) > 500
    assert (truth["discount"] == 0).any() and (truth["discount"] < 0.99**3 - 1e-6).any()  # ends happened
    # What went over the wire: 1 + E(K-1+n)/send_every = 1.75 frames per transition (plus resets), not
    # the 2K = 8 of obs + next_obs stacks.
    sent_frames = sum(len(b["frames"]) for b, _ in frame_sink.sends)
    assert sent_frames < 2.2 * len(ids)
    prios = np.concatenate([p for _, p in frame_sink.sends])
    np.testing.assert_allclose(prios, prio_truth, rtol=1e-4, atol=1e-4)

    buf = frame_sink.buf
    for _ in range(5):
        batch, idx, _ = buf.sample(64, beta=0.4)
        pos = np.searchsorted(ids, idx)
        assert (ids[pos] == idx).all()
        for k in ("obs", "next_obs", "action", "reward", "discount"):
            np.testing.assert_array_equal(batch[k], truth[k][pos], err_msg=k)
# ---------------------------------------------------------------- human-normalized scores
def test_human_normalized_scores() -> None:
    from apexrl.envs.scores import ATARI_SCORES, game_name, human_normalized_score, median_hns

    assert len(ATARI_SCORES) == 57
    assert game_name("ALE/MontezumaRevenge-v5") == "montezuma_revenge"
    assert game_name("KungFuMasterNoFrameskip-v4") == "kung_fu_master"
    assert game_name("ALE/UpNDown-v5") == "up_n_down"
    assert game_name("CartPole-v1") is None and human_normalized_score("CartPole-v1", 500) is None
    assert human_normalized_score("ALE/Pong-v5", -20.7) == pytest.approx(0.0)
    assert human_normalized_score("ALE/Pong-v5", 14.6) == pytest.approx(1.0)
    assert median_hns({"ALE/Pong-v5": 14.6, "ALE/Breakout-v5": 1.7, "boxing": 24.1}) == pytest.approx(1.0)


def test_every_ale_game_in_the_table_exists() -> None:
    import gymnasium as gym

    from apexrl.envs.factory import _register_ale
    from apexrl.envs.scores import ATARI_SCORES, game_name

    _register_ale()
    known = {game_name(i) for i in gym.registry if i.startswith("ALE/") and i.endswith("-v5")}
    assert set(ATARI_SCORES) <= known


# ---------------------------------------------------------------- end to end
def test_atari_preset_is_valid_and_paper_shaped() -> None:
    cfg = load("atari")
    assert cfg.env.id == "ALE/Pong-v5" and frame_stacked(cfg.env)
    le = cfg.learner
    assert (le.n_step, le.batch_size, le.optimizer, le.grad_clip, le.target_update_period) == (
        3, 512, "rmsprop", 40.0, 2500)
    assert le.lr == pytest.approx(0.00025 / 4) and le.optimizer_eps == pytest.approx(1.5e-7)
    assert cfg.actors.weight_sync_period == 400
    assert load("atari", ["env.id=ALE/Breakout-v5"]).env.id == "ALE/Breakout-v5"


def test_train_atari_end_to_end(tmp_path: Any) -> None:
    from apexrl import checkpoint as ckpt
    from apexrl.cli import main
    from apexrl.runtime.driver import train

    cfg = load("atari", [
        "actors.num_actors=1", "actors.envs_per_actor=2", "actors.send_every=32", "actors.num_cpus=0.5",
        "learner.num_cpus=0.5",
        "replay.capacity=4000", "replay.learning_starts=300", "replay.samples_per_insert=null",
        "learner.batch_size=32", "learner.target_update_period=50", "learner.publish_period=5",
        "env.max_episode_frames=400", "evaluation.episodes=1", "evaluation.interval_s=2",
        "logging.report_interval_s=1", "logging.tensorboard=false", "logging.console='off'",
        "checkpoint.every_reports=0", "stop.max_env_steps=1500", "stop.max_time_s=240",
    ])
    result = train(cfg, run_dir=tmp_path / "run")
    assert result.stop_reason.startswith("reached")  # env steps (or the time guard on a slow host)
    assert result.learner_updates > 0
    assert result.checkpoint is not None and result.checkpoint.exists()
    records = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert max(r["replay_size"] or 0 for r in records) > 300  # None until the learner first reports
    evals = [r for r in records if "eval_return_mean" in r]
    assert evals, "no evaluation ran"
    assert "eval_hns" in evals[-1]  # Pong is in the human-normalized score table
    _, state = ckpt.resolve(result.checkpoint)
    assert state["counters"]["learner_updates"] == result.learner_updates
    gif = tmp_path / "pong.gif"
    assert main(["eval", str(result.checkpoint), "--episodes", "1", "--video", str(gif)]) == 0
    assert gif.stat().st_size > 1000


def test_atari_gpu_preset_puts_learner_and_actor_inference_on_the_gpu() -> None:
    cfg = load("atari-gpu")
    assert (cfg.actors.device, cfg.learner.device) == ("cuda", "cuda")
    assert cfg.actors.num_actors * cfg.actors.num_gpus + cfg.learner.num_gpus <= 1.0  # one GPU in all
    assert cfg.env.vector == "auto" and cfg.actors.envs_per_actor == 32
    assert (cfg.learner.n_step, cfg.learner.batch_size) == (3, 512) and frame_stacked(cfg.env)
