"""An env handed over the ways RLlib and SB3 users do: class, creator with env_config, register_env name,
dotted class path, gymnasium id; each failure is one line."""

import gymnasium as gym
import pytest
import yaml
from gymnasium.envs.classic_control import CartPoleEnv

from apexrl.config import ConfigError, dump_yaml, from_dict
from apexrl.envs import EnvSpecError, create_env
from apexrl.envs.factory import check_and_resolve, check_env
from apexrl.envs.sources import EnvContext


class Sized(CartPoleEnv):
    """CartPole whose episode limit comes from env_config, as RLlib passes it."""

    def __init__(self, env_config):
        super().__init__()
        assert isinstance(env_config, EnvContext) and env_config.worker_index == 0
        self.limit = env_config.get("limit", 500)


def test_a_class_is_called_with_env_config_and_recorded_by_its_import_path():
    cfg = from_dict({"env": Sized, "env_config": {"limit": 7}})
    assert cfg.env.id == "test_env_sources.Sized" and cfg.env.kwargs == {"limit": 7}
    assert "creator" not in yaml.safe_load(dump_yaml(cfg))["env"], "objects stay out of config.yaml"
    assert create_env(cfg.env).unwrapped.limit == 7
    assert cfg.replace(**{"learner.lr": 1e-3}).env.creator is Sized, "replace keeps the creator"


def test_a_creator_function_and_a_lambda():
    def creator(env_config):
        return gym.make("CartPole-v1", max_episode_steps=env_config["steps"])

    assert create_env(creator, env_config={"steps": 9}).spec.max_episode_steps == 9
    cfg = from_dict({"env": lambda c: CartPoleEnv()})
    assert cfg.env.id == "<test_a_creator_function_and_a_lambda.<locals>.<lambda>>"
    check_env(cfg.env)
    with pytest.raises(EnvSpecError, match="cannot rebuild.*pass it again"):
        check_env(from_dict({"env": {"id": cfg.env.id}}).env)


def test_a_register_env_name_resolves_and_is_kept():
    from ray.tune.registry import register_env

    register_env("my_sized_cartpole", lambda c: Sized(c))
    cfg = from_dict({"env": "my_sized_cartpole", "env_config": {"limit": 3}})
    resolved, obs_space, act_space = check_and_resolve(cfg.env)
    assert obs_space.shape == (4,) and act_space.n == 2
    assert resolved.creator is not None, "the registered creator travels in the config"


def test_a_dotted_class_path_as_in_rllib_files():
    cfg = from_dict({"env": {"id": "apexrl.envs.maze.MaskedMaze"}})
    assert check_env(cfg.env)[0].codec.mask_source == "observation"


def test_env_config_in_set_overrides():
    from apexrl.config import load

    cfg = load(None, ["env.id=apexrl.envs.maze.MaskedMaze", "env_config.illegal_log=/tmp/x"])
    assert cfg.env.kwargs == {"illegal_log": "/tmp/x"}


@pytest.mark.parametrize("given, message", [
    ({"id": "no_such_pkg.envs.Env"}, "unknown env 'no_such_pkg.envs.Env'.*class path"),
    ({"id": "apexrl.envs.maze.NoSuchEnv"}, "cannot import it: AttributeError"),
    ({"id": "CartPol-v1"}, "did you mean CartPole-v1"),
])
def test_failures_are_one_line(given, message):
    with pytest.raises(EnvSpecError, match=message) as e:
        check_env(from_dict({"env": given}).env)
    assert "\n" not in str(e.value)


def test_a_creator_that_raises_is_one_line():
    def broken(env_config):
        raise KeyError("map_size")

    with pytest.raises(EnvSpecError, match="its creator raised KeyError: 'map_size'") as e:
        check_env(from_dict({"env": broken}).env)
    assert "\n" not in str(e.value)


def test_a_creator_that_returns_no_env_is_one_line():
    with pytest.raises(EnvSpecError, match="returned int, not a gymnasium.Env"):
        check_env(from_dict({"env": lambda c: 3}).env)


def test_an_env_that_is_not_callable_is_a_config_error():
    with pytest.raises(ConfigError, match="config key 'env' = 3"):
        from_dict({"env": 3})


@pytest.mark.parametrize("env_id, name", [("apexrl.envs.maze:MaskedMaze-v0", "MaskedMaze-v0"),
                                          ("my_pkg.envs.Grid", "Grid"), ("<lambda>", "lambda"),
                                          ("ALE/Pong-v5", "ALE-Pong-v5")])
def test_run_dirs_are_named_by_the_env_class_not_its_module_path(env_id, name):
    from apexrl.runtime.driver import run_name

    assert run_name(from_dict({"env": {"id": env_id}})).startswith(f"{name}__s0__")
