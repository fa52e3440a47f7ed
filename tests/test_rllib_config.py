"""RLlib's Ape-X configs and experiment files, as apexrl reads them: every row of the mapping, the file format,
its stop criteria and the refusals (one line each)."""

from __future__ import annotations

import logging
import textwrap

import pytest

from apexrl import config as C
from apexrl.config import rllib
from apexrl.config.parse import load_all
from apexrl.config.rllib_keys import BY_NAME


def cfg_of(rllib_config: dict, run: str = "APEX", cpus: int = 8) -> C.Config:
    return C.from_dict(rllib.translate(rllib_config, run=run, host_cpus=cpus, strict=True))


def get(cfg: C.Config, dotted: str):
    v = cfg
    for part in dotted.split("."):
        v = getattr(v, part)
    return v


# RLlib key, value, run, {apexrl key: expected}. Hand-computed: batch 64 is apexrl's default batch size.
MAPPED = [
    ("env", "CartPole-v0", "APEX", {"env.id": "CartPole-v0"}),
    ("env_config", {"render_mode": None}, "APEX", {"env.kwargs": {"render_mode": None}}),
    ("seed", 7, "APEX", {"seed": 7}),
    ("num_workers", 3, "APEX", {"actors.num_actors": 3, "actors.envs_per_actor": 1, "actors.epsilon_per": "actor"}),
    ("num_rollout_workers", 2, "APEX", {"actors.num_actors": 2}),
    ("num_env_runners", 2, "APEX", {"actors.num_actors": 2}),
    ("num_envs_per_worker", 8, "APEX", {"actors.envs_per_actor": 8}),
    ("num_envs_per_env_runner", 4, "APEX", {"actors.envs_per_actor": 4}),
    ("rollout_fragment_length", 50, "APEX", {"actors.send_every": 50}),
    ("lr", 5e-5, "APEX", {"learner.lr": 5e-5}),
    ("train_batch_size", 512, "APEX", {"learner.batch_size": 512}),
    ("train_batch_size", 1000, "R2D2", {"learner.batch_size": 50}),  # timesteps / (0 burn-in + 20 max_seq_len)
    ("model.use_lstm", True, "APEX", {"agent": "r2d2", "r2d2.cell": "lstm"}),
    ("model.lstm_cell_size", 32, "R2D2", {"r2d2.cell_size": 32}),
    ("model.max_seq_len", 40, "R2D2", {"r2d2.seq_len": 40}),
    ("replay_buffer_config.replay_burn_in", 40, "R2D2", {"r2d2.burn_in": 40}),
    ("replay_burn_in", 40, "R2D2", {"r2d2.burn_in": 40}),
    ("replay_buffer_config.zero_init_states", True, "R2D2", {"r2d2.zero_init_states": True}),
    ("zero_init_states", True, "R2D2", {"r2d2.zero_init_states": True}),
    ("use_h_function", True, "R2D2", {"r2d2.use_h_function": True}),
    ("h_function_epsilon", 0.01, "R2D2", {"r2d2.h_epsilon": 0.01}),
    ("model.fcnet_activation", "linear", "APEX", {"network.activation": "linear"}),
    ("env", "ray.rllib.examples.env.stateless_cartpole.StatelessCartPole", "R2D2",
     {"env.id": "apexrl.envs.stateless:CartPoleNoVel-v1"}),
    ("gamma", 0.95, "APEX", {"learner.gamma": 0.95}),
    ("n_step", 1, "APEX", {"learner.n_step": 1}),
    ("target_network_update_freq", 6400, "APEX", {"learner.target_update_period": 100}),  # 6400 samples / 64
    ("tau", 0.01, "APEX_DDPG", {"dpg.tau": 0.01}),
    ("dueling", False, "APEX", {"network.dueling": False}),
    ("hiddens", [128], "APEX", {"network.head": 128}),
    ("model.fcnet_hiddens", [64, 64], "APEX", {"network.torso": (64, 64)}),
    ("actor_hiddens", [400, 300], "APEX_DDPG", {"network.torso": (400, 300)}),
    ("critic_hiddens", [400, 300], "APEX_DDPG", {"network.torso": (400, 300)}),
    ("actor_lr", 1e-4, "APEX_DDPG", {"dpg.actor_lr": 1e-4}),
    ("critic_lr", 3e-4, "APEX_DDPG", {"learner.lr": 3e-4}),
    ("twin_q", True, "APEX_DDPG", {"dpg.twin_critics": True}),
    ("policy_delay", 2, "APEX_DDPG", {"dpg.policy_delay": 2}),
    ("smooth_target_policy", True, "APEX_DDPG", {"dpg.target_noise": 0.2}),
    ("target_noise", 0.3, "TD3", {"dpg.target_noise": 0.3}),
    ("target_noise_clip", 0.4, "TD3", {"dpg.target_noise_clip": 0.4}),
    ("use_huber", False, "APEX", {"learner.loss": "mse"}),
    ("clip_rewards", False, "APEX", {"env.clip_rewards": False}),
    ("adam_epsilon", 1.5e-4, "APEX", {"learner.optimizer_eps": 1.5e-4}),
    ("grad_clip", 40, "APEX", {"learner.grad_clip": 40.0}),
    ("num_gpus", 1, "APEX", {"learner.num_gpus": 1.0, "learner.device": "auto"}),
    ("num_gpus_per_worker", 0.1, "APEX", {"actors.num_gpus": 0.1, "actors.device": "auto"}),
    ("num_cpus_per_worker", 0.5, "APEX", {"actors.num_cpus": 0.5}),
    ("replay_buffer_config.type", "MultiAgentReplayBuffer", "APEX", {"replay.alpha": 0.0}),
    ("replay_buffer_config.capacity", 20000, "APEX", {"replay.capacity": 20000}),
    ("buffer_size", 30000, "APEX", {"replay.capacity": 30000}),
    ("replay_buffer_config.prioritized_replay_alpha", 0.5, "APEX", {"replay.alpha": 0.5}),
    ("replay_buffer_config.prioritized_replay_beta", 0.6, "APEX", {"replay.beta": 0.6}),
    ("replay_buffer_config.prioritized_replay_eps", 1e-5, "APEX", {"replay.priority_eps": 1e-5}),
    ("replay_buffer_config.learning_starts", 3000, "APEX", {"replay.learning_starts": 3000}),
    ("replay_buffer_config.min_size_for_sampling", 1000, "APEX", {"replay.learning_starts": 1000}),
    ("num_steps_sampled_before_learning_starts", 4000, "APEX", {"replay.learning_starts": 4000}),
    ("learning_starts", 5000, "APEX", {"replay.learning_starts": 5000}),
    ("replay_buffer_config.prioritized_replay", False, "APEX", {"replay.alpha": 0.0}),
    ("optimizer.num_replay_buffer_shards", 2, "APEX", {"replay.num_shards": 2}),
    ("optimizer.max_weight_sync_delay", 200, "APEX", {"actors.weight_sync_period": 200}),
    ("training_intensity", 16, "APEX", {"replay.samples_per_insert": 16.0}),
    ("exploration_config.type", "PerWorkerOrnsteinUhlenbeckNoise", "APEX_DDPG", {"dpg.noise": "ou"}),
    # RLlib's default OU: 2 * 0.1 * 0.2 / sqrt(1 - 0.85^2) = 0.07593 in the [-1, 1] scale, x 0.4 for worker 0.
    ("exploration_config.ou_base_scale", 1.0, "APEX_DDPG", {"dpg.noise": "ou", "dpg.noise_max": pytest.approx(
        0.4 * 2 * 1.0 * 0.2 / (1 - 0.85 ** 2) ** 0.5), "dpg.noise_min": pytest.approx(0.4 ** 8 * 0.7593, rel=1e-3)}),
    ("exploration_config.ou_theta", 0.3, "APEX_DDPG", {"dpg.ou_theta": 0.3}),
    ("exploration_config.type", "EpsilonGreedy", "APEX", {"actors.eps_start": 1.0, "actors.eps_base": 0.05,
                                                          "actors.eps_alpha": 0.0, "actors.eps_anneal_steps": 100_000}),
    ("exploration_config.initial_epsilon", 0.5, "DQN", {"actors.eps_start": 0.5, "actors.eps_anneal_steps": 100_000}),
    ("exploration_config.final_epsilon", 0.02, "DQN", {"actors.eps_base": 0.02, "actors.eps_alpha": 0.0}),
    ("exploration_config.epsilon_timesteps", 5000, "DQN", {"actors.eps_anneal_steps": 5000}),
    ("exploration_config.ou_sigma", 0.4, "APEX_DDPG", {"dpg.noise_max": pytest.approx(0.4 * 2 * 0.1 * 0.4 / 0.5268,
                                                                                       rel=1e-3)}),
    ("exploration_config.stddev", 0.3, "APEX_DDPG", {"dpg.noise": "ou"}),  # stddev belongs to Gaussian types
    ("evaluation_interval", 5, "APEX", {"evaluation.interval_s": 25.0}),  # 5 iterations of 5 s
    ("evaluation_duration", 20, "APEX", {"evaluation.episodes": 20}),
    ("evaluation_config.explore", False, "APEX", {"evaluation.epsilon": 0.0}),
    ("min_time_s_per_iteration", 10, "APEX", {"logging.report_interval_s": 10.0}),
    ("placement_strategy", "SPREAD", "APEX", {"actors.placement": "spread"}),
    ("evaluation_duration_unit", "episodes", "APEX", {}),
    ("multiagent", {"policies": {}}, "APEX", {}),
    ("multi_agent", {"policies": ["a", "b"], "policy_mapping_fn": "pkg.mod.fn", "policies_to_train": ["a"]}, "APEX",
     {"multiagent.policies": {"a": {"config": {}}, "b": {"config": {}}}, "multiagent.policy_mapping": "pkg.mod.fn",
      "multiagent.policies_to_train": ("a",)}),
    ("policies", {"a": (None, None, None, {"lr": 0.01}), "b": None}, "APEX",
     {"multiagent.policies": {"a": {"config": {"learner.lr": 0.01}}, "b": {"config": {}}}}),
    ("policy_mapping_fn", "pkg.mod.fn", "APEX", {"multiagent.policy_mapping": "pkg.mod.fn"}),
    ("policies_to_train", ["main"], "APEX", {"multiagent.policies_to_train": ("main",)}),
    ("num_atoms", 51, "APEX", {"network.distribution": "categorical", "network.num_atoms": 51}),
    ("v_min", -5, "APEX", {"network.v_min": -5.0}),
    ("v_max", 5, "APEX", {"network.v_max": 5.0}),
    ("noisy", True, "APEX", {"network.noisy": True, "actors.epsilon_with_noise": True}),
    ("sigma0", 0.2, "APEX", {"network.sigma0": 0.2}),
    ("prioritized_replay_alpha", 0.5, "DQN", {"replay.alpha": 0.5}),
    ("prioritized_replay_beta", 0.6, "DQN", {"replay.beta": 0.6}),
    ("prioritized_replay_eps", 1e-5, "DQN", {"replay.priority_eps": 1e-5}),
    ("final_prioritized_replay_beta", 1.0, "DQN", {"replay.beta_final": 1.0}),
    # 400k env steps at 8 samples per insert and batch 64 (apexrl's DQN batch, RLlib's unset here)
    ("prioritized_replay_beta_annealing_timesteps", 400_000, "DQN", {"replay.beta_anneal_updates": 50_000}),
    ("prioritized_replay", False, "DQN", {"replay.alpha": 0.0}),
    ("gpu", True, "DQN", {"learner.num_gpus": 1.0, "learner.device": "auto"}),
    ("model.dim", 42, "DQN", {"env.screen_size": 42}),
]
INERT = [  # accepted, named once, and the config is what it would be without them
    ("framework", "tf"), ("double_q", True), ("actor_hidden_activation", "relu"),
    ("replay_buffer_config.storage_unit", "timesteps"), ("model.lstm_use_prev_action", False),
    ("model.lstm_use_prev_reward", False),
    ("critic_hidden_activation", "relu"), ("l2_reg", 1e-6), ("use_state_preprocessor", False),
    ("huber_threshold", 1.0), ("num_cpus_for_driver", 1), ("replay_buffer_config.worker_side_prioritization", True),
    ("worker_side_prioritization", True), ("replay_buffer_config.replay_buffer_shards_colocated_with_driver", True),
    ("replay_buffer_config.no_local_replay_buffer", True), ("replay_buffer_config.replay_sequence_length", 1),
    ("optimizer.debug", False), ("exploration_config.random_timesteps", 1000),
    ("exploration_config.initial_scale", 1.0), ("exploration_config.final_scale", 0.02),
    ("exploration_config.scale_timesteps", 10000), ("exploration_config.initial_epsilon", 1.0),
    ("exploration_config.final_epsilon", 0.02), ("exploration_config.epsilon_timesteps", 10000),
    ("explore", True), ("evaluation_num_workers", 1), ("evaluation_num_env_runners", 1),
    ("min_sample_timesteps_per_iteration", 1000), ("compress_observations", True),
    ("lr_schedule", None), ("model.grayscale", True), ("model.zero_mean", False),
    ("ignore_worker_failures", True), ("recreate_failed_workers", True), ("restart_failed_env_runners", True),
    ("log_level", "WARN"), ("metrics_num_episodes_for_smoothing", 100),
]
REFUSED = [  # values apexrl cannot honour: one line naming the key
    ("double_q", False), ("model.fcnet_activation", "elu"), ("actor_hidden_activation", "tanh"),
    ("model.lstm_use_prev_action", True), ("model.lstm_use_prev_reward", True),
    ("critic_hidden_activation", "elu"), ("use_state_preprocessor", True), ("huber_threshold", 2.0),
    ("replay_buffer_config.replay_sequence_length", 20), ("replay_buffer_config.type", "MyBuffer"),
    ("exploration_config.type", "SoftQ"), ("explore", False), ("evaluation_duration_unit", "timesteps"),
    ("evaluation_config.explore", True), ("lr_schedule", [[0, 1e-3]]), ("model.zero_mean", True),
    ("model.grayscale", False),
    ("multiagent", {"policies": {"a": None}, "policy_mapping_fn": "m.f", "observation_fn": "m.g"}),
    ("multiagent", {"policies": ["a", "b"], "policies_to_train": lambda pid, batch: True}), ("metrics_num_episodes_for_smoothing", 10), ("hiddens", [64, 64]),
    ("placement_strategy", "ANYWHERE"),
]


def _nest(dotted: str, value):
    head, _, rest = dotted.partition(".")
    return {head: _nest(rest, value)} if rest else {head: value}


def _config(key: str, value, run: str) -> dict:
    base = {"env": "Pendulum-v1" if "DDPG" in run or run == "TD3" else "CartPole-v1"}
    return {**base, **_nest(key, value)}


def test_every_row_of_the_mapping_is_checked_here():
    covered = {k for k, *_ in MAPPED} | {k for k, _ in INERT} | {k for k, _ in REFUSED}
    assert set(BY_NAME) <= covered, sorted(set(BY_NAME) - covered)


@pytest.mark.parametrize("key,value,run,expected", MAPPED, ids=[m[0] for m in MAPPED])
def test_a_mapped_key_sets_what_its_row_says(key, value, run, expected):
    cfg = cfg_of(_config(key, value, run), run=run)
    for ours, want in expected.items():
        assert get(cfg, ours) == want, ours


@pytest.mark.parametrize("key,value", INERT, ids=[k for k, _ in INERT])
def test_a_key_without_effect_is_accepted_named_once_and_changes_nothing(key, value, caplog):
    run = "APEX_DDPG" if key.startswith(("actor", "critic", "l2", "use_state", "exploration_config.random",
                                          "exploration_config.initial_s", "exploration_config.final_s",
                                          "exploration_config.scale")) else "APEX"
    with caplog.at_level(logging.WARNING, logger="apexrl.config"):
        cfg = cfg_of(_config(key, value, run), run=run)
    base = _config(key, value, run)
    base.pop(key.split(".")[0])
    if key.startswith("exploration_config.") and run == "APEX_DDPG":
        base["exploration_config"] = {"type": "PerWorkerOrnsteinUhlenbeckNoise"}  # the section itself picks OU
    assert cfg == cfg_of(base, run=run)
    notes = [r.getMessage() for r in caplog.records if "no effect" in r.getMessage()]
    assert len(notes) == 1 and key in notes[0]


@pytest.mark.parametrize("key,value", REFUSED, ids=[f"{k}={v}" for k, v in REFUSED])
def test_a_value_apexrl_cannot_honour_is_refused_in_one_line(key, value):
    run = "APEX_DDPG" if key.startswith(("actor", "critic", "use_state")) else "APEX"
    with pytest.raises(C.ConfigError) as e:
        cfg_of(_config(key, value, run), run=run)
    assert key in str(e.value) and "\n" not in str(e.value)


def test_rllibs_r2d2_file_runs_as_r2d2_with_its_sequences_and_epsilon_schedule():
    [(name, d)] = rllib.experiments(_r2d2_file(), host_cpus=2)
    cfg = C.from_dict(d)
    assert (name, cfg.agent, cfg.env.id) == ("stateless-cartpole-r2d2", "r2d2", "apexrl.envs.stateless:CartPoleNoVel-v1")
    assert (cfg.r2d2.cell_size, cfg.r2d2.seq_len, cfg.r2d2.burn_in, cfg.r2d2.zero_init_states) == (64, 20, 20, True)
    assert (cfg.network.torso, cfg.network.activation, cfg.learner.lr) == ((64,), "linear", 0.0005)
    assert (cfg.actors.eps_start, cfg.actors.eps_base, cfg.actors.eps_anneal_steps) == (1.0, 0.05, 50_000)
    assert (cfg.replay.alpha, cfg.stop.train_return) == (0.0, 150)


def _r2d2_file() -> dict:
    from pathlib import Path

    import yaml

    ref = Path(__file__).parents[2] / "shared" / "reference" / "rllib-apex-examples" / "stateless-cartpole-r2d2.yaml"
    if ref.exists():
        return yaml.safe_load(ref.read_text())
    return {"stateless-cartpole-r2d2": {  # the same file, for a checkout without the reference folder beside it
        "env": "ray.rllib.examples.env.stateless_cartpole.StatelessCartPole", "run": "R2D2",
        "stop": {"sampler_results/episode_reward_mean": 150, "timesteps_total": 1000000},
        "config": {"framework": "torch", "num_workers": 0, "replay_buffer_config": {
            "type": "MultiAgentReplayBuffer", "storage_unit": "sequences", "replay_burn_in": 20,
            "zero_init_states": True}, "lr": 0.0005, "exploration_config": {"epsilon_timesteps": 50000},
            "model": {"fcnet_hiddens": [64], "fcnet_activation": "linear", "use_lstm": True, "lstm_cell_size": 64,
                      "max_seq_len": 20}}}}


def test_unknown_rllib_keys_are_named_together_in_one_line():
    with pytest.raises(C.ConfigError, match="model.conv_filters, num_sgd_iter not supported"):
        cfg_of({"env": "CartPole-v1", "num_sgd_iter": 3, "model": {"conv_filters": []}})


def test_target_updates_count_trained_samples_as_rllib_did():
    assert cfg_of({"env": "CartPole-v1", "train_batch_size": 512, "target_network_update_freq": 500000}
                  ).learner.target_update_period == 977  # 500000 / 512
    ddpg = cfg_of({"env": "Pendulum-v1", "target_network_update_freq": 50000, "tau": 1.0}, run="APEX_DDPG")
    assert (ddpg.dpg.tau, ddpg.learner.target_update_period) == (0.0, 781)  # hard copies every 50000 / 64 updates
    with pytest.raises(C.ConfigError, match="target_network_update_freq"):
        cfg_of({"env": "Pendulum-v1", "target_network_update_freq": 50000, "tau": 0.005}, run="APEX_DDPG")


def test_workers_beyond_two_per_cpu_are_packed_into_actors_keeping_their_spread():
    fits = cfg_of({"env": "CartPole-v1", "num_workers": 4, "num_envs_per_worker": 8}, cpus=2)
    assert (fits.actors.num_actors, fits.actors.envs_per_actor, fits.actors.epsilon_per) == (4, 8, "actor")
    packed = cfg_of({"env": "Pendulum-v1", "num_workers": 16}, run="APEX_DDPG", cpus=2)
    assert (packed.actors.num_actors, packed.actors.envs_per_actor, packed.actors.epsilon_per) == (1, 16, "env")


def test_min_size_for_sampling_counts_per_shard():
    cfg = cfg_of({"env": "CartPole-v1", "optimizer": {"num_replay_buffer_shards": 2},
                  "replay_buffer_config": {"capacity": 20000, "min_size_for_sampling": 1000}})
    assert cfg.replay.learning_starts == 2000


def test_run_sets_the_algorithm_rllib_named():
    ddpg, td3 = (cfg_of({"env": "Pendulum-v1"}, run=r) for r in ("APEX_DDPG", "TD3"))
    assert (ddpg.agent, ddpg.dpg.twin_critics, ddpg.dpg.policy_delay, ddpg.dpg.target_noise) == ("dpg", False, 1, 0.0)
    assert (td3.dpg.twin_critics, td3.dpg.policy_delay, td3.dpg.target_noise) == (True, 2, 0.2)
    assert cfg_of({"env": "CartPole-v1"}, run="APEX").agent == "dqn"


def test_a_trainer_dict_with_ddpg_keys_is_ddpg_and_apexrl_keys_win_over_rllib_ones():
    cfg = C.from_dict({"env": "Pendulum-v1", "tau": 1.0, "target_network_update_freq": 50000, "lr": 1e-3})
    assert cfg.agent == "dpg" and cfg.dpg.twin_critics is False
    mixed = C.from_dict({"env": "CartPole-v1", "num_workers": 2, "actors": {"envs_per_actor": 5}})
    assert (mixed.actors.num_actors, mixed.actors.envs_per_actor) == (2, 5)
    assert C.Config().replace(**{"train_batch_size": 128, "target_network_update_freq": 1280}).learner \
        .target_update_period == 10


EXPERIMENTS = textwrap.dedent("""\
    # two experiments in RLlib's tuned-example format
    first:
        env: CartPole-v0
        run: APEX
        stop:
            episode_reward_mean: 150.0
            timesteps_total: 250000
            training_iteration: 100
            time_total_s: 300
        config:
            framework: tf
            num_workers: 1
            min_time_s_per_iteration: 2
    second:
        env: Pendulum-v1
        run: APEX_DDPG
        stop:
            evaluation/episode_reward_mean: -160
        config:
            exploration_config:
                ou_base_scale: 1.0
""")


def test_an_experiment_file_gives_each_experiment_with_its_stop_criteria(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(EXPERIMENTS)
    runs = load_all(path)
    assert [n for n, _ in runs] == ["first", "second"]
    first, second = runs[0][1], runs[1][1]
    assert first.stop == C.StopConfig(max_env_steps=250000, max_time_s=200.0, train_return=150.0)  # 100 x 2 s < 300
    assert (first.env.id, first.actors.num_actors) == ("CartPole-v0", 1)
    assert second.stop.target_return == -160 and second.agent == "dpg" and second.dpg.noise == "ou"
    assert [n for n, _ in load_all(path, experiment="second")] == ["second"]
    assert load_all(path, ["num_workers=2", "learner.lr=0.01"], experiment="first")[0][1].actors.num_actors == 2
    with pytest.raises(C.ConfigError, match="holds 2 experiments"):
        C.load(path)
    with pytest.raises(C.ConfigError, match="no experiment 'third'"):
        load_all(path, experiment="third")


@pytest.mark.parametrize("change,message", [
    ({"stop": {"episode_len_mean": 10}}, "stop criteria episode_len_mean are not supported"),
    ({"run": "PPO"}, "run 'PPO' is not supported"),
    ({"resources_per_trial": {}}, "key(s) resources_per_trial not supported"),
    ({"num_samples": 3}, "num_samples"),
])
def test_what_an_experiment_cannot_mean_here_is_refused(tmp_path, change, message):
    exp = {"env": "CartPole-v1", "run": "APEX", "stop": {"timesteps_total": 10}, **change}
    with pytest.raises(C.ConfigError) as e:
        rllib.experiments({"x": exp})
    assert message in str(e.value)


def test_the_docs_show_the_mapping_table_the_code_applies():
    from pathlib import Path

    doc = (Path(__file__).parents[1] / "docs" / "coming-from-rllib.md").read_text()
    assert rllib.table() in doc


def test_rllibs_pong_rainbow_file_runs_as_rainbow_here():
    from apexrl.config import from_dict
    from apexrl.config.rllib import experiments
    from apexrl.envs.atari import is_atari

    config = {"num_atoms": 51, "noisy": True, "gamma": 0.99, "lr": 1e-4, "hiddens": [512], "learning_starts": 10000,
              "buffer_size": 50000, "rollout_fragment_length": 4, "train_batch_size": 32,
              "exploration_config": {"epsilon_timesteps": 2, "final_epsilon": 0.0},
              "target_network_update_freq": 500, "prioritized_replay": True, "prioritized_replay_alpha": 0.5,
              "final_prioritized_replay_beta": 1.0, "prioritized_replay_beta_annealing_timesteps": 400000,
              "n_step": 3, "gpu": True, "model": {"grayscale": True, "zero_mean": False, "dim": 42}}
    (name, data), = experiments({"pong-deterministic-rainbow": {"env": "PongDeterministic-v4", "run": "DQN",
                                                               "stop": {"episode_reward_mean": 20}, "config": config}})
    cfg = from_dict(data)
    n = cfg.network
    assert (n.distribution, n.num_atoms, n.v_min, n.v_max, n.noisy, n.head) == ("categorical", 51, -10.0, 10.0, True, 512)
    assert cfg.actors.eps_base == 0.0 and cfg.actors.eps_anneal_steps == 2, "epsilon 1 -> 0 in 2 steps: noise explores"
    assert (cfg.replay.alpha, cfg.replay.beta_final, cfg.replay.capacity) == (0.5, 1.0, 50000)
    assert cfg.env.screen_size == 42 and is_atari(cfg.env), "gym's Deterministic-v4 ids are Atari games"
