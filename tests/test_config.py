"""Config: a frozen tree from YAML, --set overrides and RLlib aliases; bad input names key, value, fix."""

import dataclasses

import pytest

from apexrl import config as C


def test_defaults_are_the_cartpole_preset():
    cfg = C.load("cartpole")
    assert cfg.env.id == "CartPole-v1"
    assert cfg.learner.n_step == 3 and cfg.replay.alpha == 0.6 and cfg.replay.beta == 0.4
    assert cfg.actors.eps_base == 0.4 and cfg.actors.eps_alpha == 7.0


def test_config_is_frozen():
    cfg = C.Config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.learner.lr = 1.0  # type: ignore[misc]


def test_set_overrides_parse_values_as_yaml():
    cfg = C.load("cartpole", ["learner.lr=3e-4", "network.torso=[64, 64]", "stop.max_time_s=5",
                              "actors.num_actors=2", "env.kwargs={max_episode_steps: 100}"])
    assert cfg.learner.lr == pytest.approx(3e-4)
    assert cfg.network.torso == (64, 64)
    assert cfg.stop.max_time_s == 5.0
    assert cfg.actors.num_actors == 2
    assert cfg.env.kwargs == {"max_episode_steps": 100}


def test_yaml_exponent_without_dot_is_a_number(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("learner:\n  lr: 1e-4\n")
    assert C.load(p).learner.lr == pytest.approx(1e-4)


def test_off_is_a_word_not_a_boolean_where_the_key_allows_it(tmp_path):
    # YAML 1.1 reads a bare `off` as false: `--console off` and `console: off` must still mean "off".
    assert C.load("cartpole", ["logging.console=off"]).logging.console == "off"
    p = tmp_path / "c.yaml"
    p.write_text("logging:\n  console: off\n")
    assert C.load(p).logging.console == "off"
    with pytest.raises(C.ConfigError, match="network.kind"):
        C.load("cartpole", ["network.kind=off"])


def test_seed_article_rllib_dict_is_accepted():
    article = {"env": "CartPole-v1", "num_workers": 8, "num_gpus": 1, "framework": "torch", "lr": 1e-4,
               "train_batch_size": 500, "rollout_fragment_length": 50}
    cfg = C.from_dict(article)
    assert cfg.actors.num_actors * cfg.actors.envs_per_actor == 8  # 8 exploring workers, packed on small hosts
    assert cfg.learner.num_gpus == 1.0
    assert cfg.learner.lr == pytest.approx(1e-4)
    assert cfg.learner.batch_size == 500
    assert cfg.actors.send_every == 50
    assert cfg.env.id == "CartPole-v1"


def test_round_trip_through_yaml(tmp_path):
    cfg = C.load("cartpole", ["learner.lr=0.005", "replay.num_shards=2"])
    p = tmp_path / "out.yaml"
    p.write_text(C.dump_yaml(cfg))
    assert C.load(p) == cfg


@pytest.mark.parametrize("override, fragments", [
    (["learner.lr=-1"], ["learner.lr", "-1", "> 0"]),
    (["replay.alpha=1.5"], ["replay.alpha", "1.5", "[0, 1]"]),
    (["replay.capacity=10"], ["replay.capacity", "10", "learner.batch_size"]),
    (["learner.n_step=0"], ["learner.n_step", "0", ">= 1"]),
    (["actors.num_actors=0"], ["actors.num_actors", "0", ">= 1"]),
    (["learner.optimizer=sgd"], ["learner.optimizer", "sgd", "adam"]),
    (["learner.batch_size=abc"], ["learner.batch_size", "abc", "integer"]),
    (["learner.lrr=1e-3"], ["learner.lrr", "did you mean 'learner.lr'"]),
    (["replay.capacty=5"], ["replay.capacty", "replay.capacity"]),
    (["network.dueling=maybe"], ["network.dueling", "true or false"]),
    (["nosuchsection.x=1"], ["nosuchsection"]),
    (["replay.spi_max_lead=-1"], ["replay.spi_max_lead", "-1", ">= 0"]),
    (["replay.spi_error_buffer=0", "replay.spi_max_lead=10"], ["replay.spi_max_lead", "10", "learner.batch_size",
                                                               "wait for each other forever"]),
    (["learner.batch_size"], ["key=value"]),
])
def test_invalid_values_name_key_value_and_allowed(override, fragments):
    with pytest.raises(C.ConfigError) as e:
        C.load("cartpole", override)
    for frag in fragments:
        assert frag in str(e.value)


def test_missing_file_and_bad_yaml_are_config_errors(tmp_path):
    with pytest.raises(C.ConfigError, match="not found"):
        C.load(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("learner: [unclosed\n")
    with pytest.raises(C.ConfigError, match="not valid YAML at line"):
        C.load(bad)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("42\n")
    with pytest.raises(C.ConfigError, match="mapping"):
        C.load(scalar)


def test_any_framework_is_accepted_with_a_line_saying_apexrl_runs_pytorch(caplog):
    assert C.from_dict({"framework": "tf2"}) == C.Config()
    assert "framework (apexrl runs PyTorch" in caplog.text


def test_choosing_an_agent_brings_its_defaults_under_whatever_the_config_sets():
    from apexrl.config import flatten, from_dict, load, to_dict
    from apexrl.config.agent_defaults import agent_defaults_in_effect

    dqn = load(None, [])
    dpg = load(None, ["agent=dpg", "env.id=Pendulum-v1"])
    assert (dpg.learner.batch_size, dpg.learner.lr, dpg.replay.samples_per_insert) == (256, 1e-3, 64.0)
    assert (dqn.learner.batch_size, dqn.replay.samples_per_insert) == (64, 8.0)  # DQN's stay the dataclasses'
    mine = load(None, ["agent=dpg", "env.id=Pendulum-v1", "learner.batch_size=100"])
    assert mine.learner.batch_size == 100 and mine.replay.samples_per_insert == 64.0  # what is written wins
    assert load("pendulum", []).network.torso == (64, 64)  # a preset's own values too
    r2d2 = from_dict({"agent": "r2d2", "env": {"id": "CartPole-v1"}})  # a dict as the Python API gets it
    assert (r2d2.learner.batch_size, r2d2.network.torso) == (32, (64,))
    assert agent_defaults_in_effect("dpg", flatten(to_dict(mine))) == {"learner.lr": 1e-3, "replay.learning_starts": 10_000,
                                                                      "replay.samples_per_insert": 64.0}
    assert agent_defaults_in_effect("dqn", flatten(to_dict(dqn))) == {}


def test_r2d2_named_alone_on_cartpole_without_velocities_is_its_preset_key_for_key():
    from apexrl.config import flatten, load, to_dict

    preset = flatten(to_dict(load("cartpole-novel", [])))
    alone = flatten(to_dict(load(None, ["agent=r2d2", "env.id=apexrl.envs.stateless:CartPoleNoVel-v1",
                                        "stop.target_return=475"])))
    assert {k: (v, alone.get(k)) for k, v in preset.items() if v != alone.get(k)} == {}
