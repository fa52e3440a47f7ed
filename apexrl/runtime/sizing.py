"""How many actors and logical CPUs a run asks for: config arithmetic, importable before torch or Ray (the
CLI sizes a private Ray with it while the rest of apexrl is still being imported)."""

from __future__ import annotations

import math

from apexrl.config import Config


def auto_num_actors(cfg: Config, cluster_cpus: float) -> int:
    """Actors fill the CPUs the learner does not take (at least one)."""
    if cfg.actors.num_actors is not None:
        return cfg.actors.num_actors
    per = max(cfg.actors.num_cpus, 1e-3)
    return max(1, int((cluster_cpus - cfg.learner.num_cpus) // per))


def logical_cpus(cfg: Config, host_cpus: int) -> int:
    """CPUs a private Ray should advertise: as many as the run asks for (the OS shares the cores)."""
    return max(host_cpus, int(math.ceil(auto_num_actors(cfg, host_cpus) * cfg.actors.num_cpus
                                        + cfg.learner.num_cpus)))
