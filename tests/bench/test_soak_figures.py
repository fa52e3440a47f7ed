"""What the soak benchmark counts as lost and as bounded, on hand-made records."""

from apexrl.bench import soak


def test_learner_updates_that_go_back_are_counted_as_lost():
    records = [{"learner_updates": 100}, {"learner_updates": 160}, {"learner_updates": 120},  # back 40
               {"learner_updates": 150}]
    assert soak.losses(records) == {"learner_updates_lost": 40}


def test_a_shard_kill_loses_its_share_of_the_steps_since_the_last_snapshot():
    kills = [{"role": "shard", "env_steps_before": 10_000}, {"role": "actor", "env_steps_before": 12_000},
             {"role": "shard", "env_steps_before": 30_000}]
    assert soak.replay_lost_estimate(kills, [0, 8_000, 25_000], num_shards=2) == (2_000 + 5_000) // 2


def test_memory_is_bounded_when_the_second_half_peak_stays_near_the_first():
    assert soak.bounded([(0, 300), (10, 400), (60, 500), (100, 540)], total_s=100) is True
    assert soak.bounded([(0, 300), (10, 400), (60, 800), (100, 900)], total_s=100) is False
    assert soak.bounded([(0, 300)], total_s=100) is None
