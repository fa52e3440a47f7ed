"""The whole run configuration: one frozen dataclass tree, YAML presets, ``--set`` overrides, RLlib's keys and
experiment files, validation.

Layers, each importing only those before it: ``schema`` (the dataclasses; their defaults are the CartPole
preset ``apexrl train`` runs), ``validate`` (ranges and consistency), ``parse`` (YAML, overrides, aliases,
typed coercion), ``rllib`` (RLlib's Ape-X keys and tuned-example files, mapped by meaning). Everything
happens before anything starts (no Ray, no run dir), and each error names the key, the bad value and what
is allowed, so the CLI prints one line, exit 2. Nothing here imports agents or the runtime.
"""

from apexrl.config.parse import ALIASES, from_dict, load, load_all, load_yaml, parse_override, resolve_path
from apexrl.config.schema import (
    AGENTS,
    PRESETS_DIR,
    ActorsConfig,
    CheckpointConfig,
    Config,
    ConfigError,
    DPGConfig,
    EnvConfig,
    EvaluationConfig,
    LearnerConfig,
    LoggingConfig,
    MultiAgentConfig,
    NetworkConfig,
    ReplayConfig,
    StopConfig,
    dump_yaml,
    flatten,
    to_dict,
)
from apexrl.config.validate import validate

__all__ = ["AGENTS", "ALIASES", "ActorsConfig", "CheckpointConfig", "Config", "ConfigError", "DPGConfig", "EnvConfig",
           "EvaluationConfig", "LearnerConfig", "LoggingConfig", "MultiAgentConfig", "NetworkConfig", "PRESETS_DIR", "ReplayConfig",
           "StopConfig", "dump_yaml", "flatten", "from_dict", "load", "load_all", "load_yaml", "parse_override", "resolve_path",
           "to_dict", "validate"]
