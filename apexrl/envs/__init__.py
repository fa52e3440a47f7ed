"""Environment factories: gymnasium ids -> (optionally Atari-preprocessed) envs, checked up front."""

from apexrl.envs.atari import frame_stacked, is_atari
from apexrl.envs.factory import EnvSpecError, check_env, create_env, env_spaces, make_env

__all__ = ["EnvSpecError", "check_env", "create_env", "env_spaces", "frame_stacked", "is_atari", "make_env"]
