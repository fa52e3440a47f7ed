"""Sequences for recurrent agents by hand: cutting with overlap, padding at episode starts and ends,
the stored state, and a writer restored mid-stream going on exactly."""

import numpy as np

from apexrl.config.schema import R2D2Config
from apexrl.replay.sequences import SequenceWriter


def drive(writer, ends, steps, E=1, state=None):
    """Step E envs; slot e's obs at its episode's step t is [100 e + t + 1] (0 is padding), action t, reward
    t + 0.5; ``ends``: {(e, i): "term" | "trunc"} at the writer's i-th step. Returns the sequences in order."""
    out, t = [], np.zeros(E, int)
    for i in range(steps):
        obs = (100 * np.arange(E) + t + 1).astype(np.float32)[:, None]
        term = np.array([ends.get((e, i)) == "term" for e in range(E)])
        trunc = np.array([ends.get((e, i)) == "trunc" for e in range(E)])
        if state is not None:
            state[:] = obs * 10  # the policy's state before acting on obs
        got = writer.step(obs, t.copy(), t + 0.5, obs + 1, term, trunc)
        if got is not None:
            out += [{k: v[i] for k, v in got.items()} for i in range(len(got["valid"]))]
        t = np.where(term | trunc, 0, t + 1)
    return out


def test_a_seven_step_episode_with_length_4_and_overlap_2_trains_every_step_once():
    state = np.zeros((1, 1), np.float32)
    w = SequenceWriter(1, burn_in=2, seq_len=2, overlap=2, state_size=1, state_source=lambda: state)
    seqs = drive(w, {(0, 6): "term"}, 7, state=state)
    # [P P s0 s1] [s0 s1 s2 s3] [s2 s3 s4 s5] [s4 s5 s6 P]; obs of step t is t + 1
    assert [s["obs"][:4, 0].tolist() for s in seqs] == [[0, 0, 1, 2], [1, 2, 3, 4], [3, 4, 5, 6], [5, 6, 7, 8]]
    assert [s["valid"].tolist() for s in seqs] == [[0, 0, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 0]]
    assert [s["first"].tolist() for s in seqs] == [[0, 0, 1, 0], [1, 0, 0, 0], [0] * 4, [0] * 4]
    assert [s["obs"][4, 0] for s in seqs] == [3, 5, 7, 0]  # the observation after the last stored step
    assert seqs[3]["obs"][3, 0] == 8  # after the episode's last step: its final observation
    assert [s["terminal"].tolist() for s in seqs][-1] == [0, 0, 1, 0]
    assert seqs[1]["action"].tolist() == [0, 1, 2, 3] and seqs[1]["reward"].tolist() == [0.5, 1.5, 2.5, 3.5]
    assert [s["state"][0] for s in seqs] == [0, 10, 30, 50]  # zero before the episode; else before step 0
    trained = [s["obs"][2:4, 0][s["valid"][2:] == 1].tolist() for s in seqs]
    assert sum(trained, []) == [1, 2, 3, 4, 5, 6, 7]
    assert R2D2Config(burn_in=2, seq_len=2, overlap=2).period == 2  # new steps per sequence, as cut here


def test_a_truncated_episode_keeps_its_final_observation_without_terminal_and_the_next_starts_padded():
    w = SequenceWriter(1, burn_in=1, seq_len=3, overlap=1)
    seqs = drive(w, {(0, 1): "trunc"}, 4)
    assert seqs[0]["obs"][:, 0].tolist() == [0, 1, 2, 3, 0] and seqs[0]["terminal"].tolist() == [0, 0, 0, 0]
    assert seqs[0]["valid"].tolist() == [0, 1, 1, 0]
    assert len(seqs) == 1  # the next episode's two steps wait for more
    more = drive(w, {}, 2)
    assert more[0]["obs"][:, 0].tolist()[:4] == [0, 1, 2, 1] and more[0]["first"].tolist() == [0, 1, 0, 0]


def test_slots_cut_independently_and_only_completed_ones_are_sent():
    w = SequenceWriter(3, burn_in=0, seq_len=3, overlap=0)
    seqs = drive(w, {(1, 0): "term", (1, 1): "term", (1, 2): "term", (2, 1): "term"}, 3, E=3)
    by_first = sorted((int(s["obs"][0, 0]), s["valid"].tolist()) for s in seqs)
    # slot 0: one full sequence at its third step; slot 1: three 1-step episodes; slot 2: a 2-step episode,
    # then one step pending
    assert by_first == [(1, [1, 1, 1]), (101, [1, 0, 0]), (101, [1, 0, 0]), (101, [1, 0, 0]), (201, [1, 1, 0])]


def test_overlap_below_burn_in_sends_no_sequence_without_a_trained_step():
    w = SequenceWriter(1, burn_in=2, seq_len=1, overlap=0)
    seqs = drive(w, {(0, 1): "term"}, 2)
    # [P P s0] then s1 alone in the burn-in region of the next: it can train nowhere, so nothing is sent
    assert len(seqs) == 1 and seqs[0]["obs"][:3, 0].tolist() == [0, 0, 1]


def test_a_writer_restored_mid_stream_emits_what_the_original_would_have():
    a = SequenceWriter(2, burn_in=2, seq_len=3, overlap=2)
    drive(a, {(0, 4): "term"}, 6, E=2)
    b = SequenceWriter(2, burn_in=2, seq_len=3, overlap=2)
    b.load_state_dict(a.state_dict())
    ends = {(0, 3): "term", (1, 9): "trunc"}
    rest_a, rest_b = drive(a, ends, 12, E=2), drive(b, ends, 12, E=2)
    assert len(rest_a) == len(rest_b) > 0
    for x, y in zip(rest_a, rest_b):
        assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)


def test_steps_of_some_slots_only_fill_those_slots_sequences_with_their_own_states():
    """A turn-based game: slot 0 moves at steps 0 and 2, slot 1 at step 1; each slot's sequence holds its own
    moves in order and the state its policy had before each of them."""
    state = np.array([[10.0], [20.0]], np.float32)  # full-size: one row per slot, read at the slots that moved
    w = SequenceWriter(2, burn_in=0, seq_len=2, overlap=0, state_size=1, state_source=lambda: state)
    f = np.float32
    assert w.step(np.array([[1.0]], f), np.array([0]), np.array([0.5]), np.array([[2.0]], f), np.array([False]),
                  np.array([False]), slots=np.array([0])) is None
    state[0] = 11.0
    assert w.step(np.array([[101.0]], f), np.array([1]), np.array([1.5]), np.array([[102.0]], f),
                  np.array([True]), np.array([False]), slots=np.array([1]))["obs"][:, :, 0].tolist() == [[101, 102, 0]]
    out = w.step(np.array([[2.0]], f), np.array([0]), np.array([2.5]), np.array([[3.0]], f), np.array([False]),
                 np.array([False]), slots=np.array([0]))
    assert out["obs"][:, :, 0].tolist() == [[1, 2, 3]] and out["reward"].tolist() == [[0.5, 2.5]]
    assert out["state"].tolist() == [[10.0]]  # the state before the sequence's first step, slot 0's
