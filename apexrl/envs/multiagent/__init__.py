"""Multi-agent envs (PettingZoo AEC and Parallel, RLlib's MultiAgentEnv) as games of one shared policy."""

from apexrl.envs.multiagent.games import AECGame, DictStepGame, Game, GameError, ParallelGame, Turn, as_game
from apexrl.envs.multiagent.make import MULTI_AGENT_APIS, MultiAgentSpecError, is_multiagent, make_game

__all__ = ["MULTI_AGENT_APIS", "AECGame", "DictStepGame", "Game", "GameError", "MultiAgentSpecError", "ParallelGame",
           "Turn", "as_game", "is_multiagent", "make_game"]
