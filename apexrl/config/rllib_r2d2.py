"""RLlib's R2D2 keys (``run: R2D2``, the recurrent model and sequence-replay keys), mapped by meaning onto
apexrl's ``r2d2`` agent; rows in the form of :mod:`apexrl.config.rllib_keys`."""

from __future__ import annotations

from typing import Any

from apexrl.config.rllib_base import Ctx, Key, inert, refuse, same


def _use_lstm(v: Any, c: Ctx) -> dict[str, Any]:
    if not v and c.run == "R2D2":
        raise refuse("model.use_lstm", v, "R2D2 is recurrent: set it to true")
    return {"agent": "r2d2", "r2d2.cell": "lstm"} if v else {}


def r2d2_batch(v: Any, c: Ctx) -> dict[str, Any]:
    """R2D2 counts timesteps per update; apexrl's r2d2 batches whole sequences of burn-in + max_seq_len."""
    steps = int(c.get("model.max_seq_len", 20)) + int(c.get("replay_buffer_config.replay_burn_in",
                                                           c.get("replay_burn_in", 0)))
    return {"learner.batch_size": max(1, int(v) // max(1, steps))}


def train_batch_size(v: Any, c: Ctx) -> dict[str, Any]:
    return r2d2_batch(v, c) if c.run == "R2D2" else {"learner.batch_size": v}


def replay_sequence_length(v: Any, c: Ctx) -> dict[str, Any]:
    if c.run == "R2D2":
        c.notes.append("replay_buffer_config.replay_sequence_length (R2D2's sequences are replay_burn_in + max_seq_len)")
        return {}
    if int(v) != 1:
        raise refuse("replay_buffer_config.replay_sequence_length", v, "apexrl replays single n-step transitions "
                     "(sequences with run: R2D2)")
    c.notes.append("replay_buffer_config.replay_sequence_length (one transition per item)")
    return {}


R2D2_KEYS: list[Key] = [
    Key("model.use_lstm", "agent, r2d2.cell", "true: the recurrent agent r2d2 with an LSTM core", _use_lstm),
    same("model.lstm_cell_size", "r2d2.cell_size", "units of the LSTM"),
    same("model.max_seq_len", "r2d2.seq_len", "trained steps per replayed sequence"),
    same("replay_buffer_config.replay_burn_in", "r2d2.burn_in", "steps before them that rebuild the state "
         "without gradients"),
    same("replay_burn_in", "r2d2.burn_in", "RLlib's old top-level name"),
    same("replay_buffer_config.zero_init_states", "r2d2.zero_init_states", "replayed sequences start from zeros, "
         "not the stored state", bool),
    same("zero_init_states", "r2d2.zero_init_states", "RLlib's old top-level name", bool),
    same("use_h_function", "r2d2.use_h_function", "value rescaling of the targets", bool),
    same("h_function_epsilon", "r2d2.h_epsilon"),
    inert("replay_buffer_config.storage_unit", "apexrl stores transitions (sequences for R2D2) whatever this says"),
    inert("model.lstm_use_prev_action", "false: the LSTM sees observations", ok=lambda v: not v,
          refusal="the previous action as LSTM input is not implemented"),
    inert("model.lstm_use_prev_reward", "false: the LSTM sees observations", ok=lambda v: not v,
          refusal="the previous reward as LSTM input is not implemented"),
]
