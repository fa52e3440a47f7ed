"""Environment factories: gymnasium ids -> (optionally Atari-preprocessed) envs, checked up front."""

from apexrl.envs.factory import EnvSpecError, check_env, env_spaces, is_atari, make_env

__all__ = ["EnvSpecError", "check_env", "env_spaces", "is_atari", "make_env"]
