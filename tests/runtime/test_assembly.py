"""The one assembly: shard arguments every runner shares, and a topology fitted to the cluster it gets."""

from __future__ import annotations

import pytest

from apexrl.config import Config, ConfigError
from apexrl.runtime.assembly import assemble, fit_to_cluster


def test_shards_split_capacity_learning_starts_and_the_rate_limiters_band():
    cfg = Config().replace(**{"replay.num_shards": 2, "replay.capacity": 1000, "replay.learning_starts": 300,
                              "seed": 5})
    system = assemble(cfg, num_actors=1)
    a, b = system.shard_kwargs(0), system.shard_kwargs(1)
    assert (a["capacity"], a["min_size"], a["seed"], b["seed"]) == (500, 150, 505, 506)
    # learner: batch 64 x 8 batches per request; actors: 2 sends of 1,024 at 8 samples per insert
    assert a["max_lead"] == 64 * 8 and a["error_buffer"] == 2 * 8 * 1024 / 2
    assert a["frames"] is False and a["samples_per_insert"] == 8.0


def test_actors_beyond_the_clusters_cpus_share_them():
    cfg = Config().replace(**{"actors.num_actors": 8})
    assert fit_to_cluster(cfg, cluster_cpus=16, cluster_gpus=0, num_actors=8) is cfg  # they fit: unchanged
    fitted = fit_to_cluster(cfg, cluster_cpus=2, cluster_gpus=0, num_actors=8)  # 1 CPU left after the learner's
    assert fitted.actors.num_cpus == pytest.approx(0.12) and fitted.learner.num_cpus == 1.0


def test_a_one_cpu_cluster_splits_it_between_learner_and_actor():
    fitted = fit_to_cluster(Config(), cluster_cpus=1, cluster_gpus=0, num_actors=1)
    assert (fitted.learner.num_cpus, fitted.actors.num_cpus) == (0.5, 0.5)
    fitted = fit_to_cluster(Config(), cluster_cpus=1.5, cluster_gpus=0, num_actors=4)
    assert (fitted.learner.num_cpus, fitted.actors.num_cpus) == (0.75, 0.18)  # 4 x 0.18 <= 0.75


def test_a_learner_gpu_the_cluster_lacks_is_a_config_error():
    with pytest.raises(ConfigError, match=r"'learner.num_gpus' \(num_gpus\) = 1 but the Ray cluster has 0 GPUs"):
        fit_to_cluster(Config().replace(**{"learner.num_gpus": 1}), cluster_cpus=4, cluster_gpus=0, num_actors=1)
