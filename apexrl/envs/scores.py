"""Human-normalized Atari scores: HNS = (score - random) / (human - random).

0 is a uniformly random policy, 1 (100%) a professional human game tester. Ape-X reports the median HNS
over the 57 games (434% with no-op starts; Horgan et al., 2018, Table 1).

Reference scores (undiscounted episode returns with 1..30 no-op starts, episodes capped at 108,000
frames): random and human scores of Mnih et al. (2015, Nature, Extended Data Table 2) as updated for
the 57-game suite by van Hasselt et al. (2016, Double DQN) and Wang et al. (2016, Dueling networks,
Table 2/Appendix), the table Ape-X, Rainbow and Agent57 normalize with. The same numbers are
tabulated in DeepMind's DQN Zoo (``dqn_zoo/atari_data.py``), against which this table was checked.
"""

from __future__ import annotations

import math
import re

# game: (random, human)
ATARI_SCORES: dict[str, tuple[float, float]] = {
    "alien": (227.8, 7127.7),
    "amidar": (5.8, 1719.5),
    "assault": (222.4, 742.0),
    "asterix": (210.0, 8503.3),
    "asteroids": (719.1, 47388.7),
    "atlantis": (12850.0, 29028.1),
    "bank_heist": (14.2, 753.1),
    "battle_zone": (2360.0, 37187.5),
    "beam_rider": (363.9, 16926.5),
    "berzerk": (123.7, 2630.4),
    "bowling": (23.1, 160.7),
    "boxing": (0.1, 12.1),
    "breakout": (1.7, 30.5),
    "centipede": (2090.9, 12017.0),
    "chopper_command": (811.0, 7387.8),
    "crazy_climber": (10780.5, 35829.4),
    "defender": (2874.5, 18688.9),
    "demon_attack": (152.1, 1971.0),
    "double_dunk": (-18.6, -16.4),
    "enduro": (0.0, 860.5),
    "fishing_derby": (-91.7, -38.7),
    "freeway": (0.0, 29.6),
    "frostbite": (65.2, 4334.7),
    "gopher": (257.6, 2412.5),
    "gravitar": (173.0, 3351.4),
    "hero": (1027.0, 30826.4),
    "ice_hockey": (-11.2, 0.9),
    "jamesbond": (29.0, 302.8),
    "kangaroo": (52.0, 3035.0),
    "krull": (1598.0, 2665.5),
    "kung_fu_master": (258.5, 22736.3),
    "montezuma_revenge": (0.0, 4753.3),
    "ms_pacman": (307.3, 6951.6),
    "name_this_game": (2292.3, 8049.0),
    "phoenix": (761.4, 7242.6),
    "pitfall": (-229.4, 6463.7),
    "pong": (-20.7, 14.6),
    "private_eye": (24.9, 69571.3),
    "qbert": (163.9, 13455.0),
    "riverraid": (1338.5, 17118.0),
    "road_runner": (11.5, 7845.0),
    "robotank": (2.2, 11.9),
    "seaquest": (68.4, 42054.7),
    "skiing": (-17098.1, -4336.9),
    "solaris": (1236.3, 12326.7),
    "space_invaders": (148.0, 1668.7),
    "star_gunner": (664.0, 10250.0),
    "surround": (-10.0, 6.5),
    "tennis": (-23.8, -8.3),
    "time_pilot": (3568.0, 5229.2),
    "tutankham": (11.4, 167.6),
    "up_n_down": (533.4, 11693.2),
    "venture": (0.0, 1187.5),
    "video_pinball": (16256.9, 17667.9),  # random beats human under some other protocols
    "wizard_of_wor": (563.5, 4756.5),
    "yars_revenge": (3092.9, 54576.9),
    "zaxxon": (32.5, 9173.3),
}

_ID = re.compile(r"^(?:ALE/)?(?P<name>[A-Za-z]+?)(?:NoFrameskip|Deterministic)?(?:-v\d+)?$")


def snake_name(env_id: str) -> str | None:
    """``ALE/MontezumaRevenge-v5`` / ``MontezumaRevengeNoFrameskip-v4`` -> ``montezuma_revenge`` (ale-py's
    ROM name); None when the id is not shaped like an ALE game id."""
    m = _ID.match(env_id)
    return None if m is None else re.sub(r"(?<!^)(?=[A-Z])", "_", m.group("name")).lower()


def game_name(env_id: str) -> str | None:
    """:func:`snake_name` of one of the 57 games with reference scores; else None."""
    name = snake_name(env_id)
    return name if name in ATARI_SCORES else None


def human_normalized_score(env_id_or_game: str, score: float) -> float | None:
    """(score - random) / (human - random) for a known game, else None."""
    game = env_id_or_game if env_id_or_game in ATARI_SCORES else game_name(env_id_or_game)
    if game is None:
        return None
    random, human = ATARI_SCORES[game]
    return (score - random) / (human - random)


def median_hns(scores: dict[str, float]) -> float:
    """Median human-normalized score over ``{env id or game: score}`` (games not in the table skipped)."""
    values = [h for g, s in scores.items() if (h := human_normalized_score(g, s)) is not None]
    if not values:
        return math.nan
    values.sort()
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else 0.5 * (values[mid - 1] + values[mid])
