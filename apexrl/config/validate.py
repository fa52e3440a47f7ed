"""Range and consistency checks of a built Config, before anything starts; each error names the key,
the bad value and what is allowed."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any

from apexrl.config.policies import normalize as normalize_policies
from apexrl.config.schema import AGENTS, ConfigError

if TYPE_CHECKING:
    from apexrl.config.schema import Config

_CHOICES: dict[str, tuple[str, ...]] = {
    "agent": AGENTS,
    "network.kind": ("auto", "mlp", "nature_cnn", "minatar"),
    "network.activation": ("relu", "tanh", "linear"),
    "network.distribution": ("expectation", "categorical", "quantile"),
    "env.vector": ("auto", "gymnasium", "ale"),
    "env.non_finite": ("stop", "drop"),
    "env.action_mask": ("auto", "observation", "info", "none"),
    "actors.epsilon_per": ("env", "actor"),
    "actors.placement": ("pack", "spread"),
    "actors.precision": ("float32", "bfloat16", "auto"),
    "learner.optimizer": ("adam", "rmsprop"),
    "dpg.noise": ("gaussian", "ou"),
    "learner.loss": ("huber", "mse"),
    "r2d2.cell": ("lstm", "gru"),
    "logging.console": ("auto", "live", "plain", "off"),
}


def _check(cond: bool, key: str, value: Any, allowed: str) -> None:
    if not cond:
        raise ConfigError(f"config key '{key}' = {value!r} is invalid; allowed: {allowed}")


def validate(cfg: Config) -> Config:
    """Range and consistency checks; raise ConfigError naming key, value and what is allowed."""
    for key, choices in _CHOICES.items():
        v: Any = cfg
        for part in key.split("."):
            v = getattr(v, part)
        if v not in choices:
            close = difflib.get_close_matches(str(v), choices, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"config key '{key}' = {v!r} is invalid{hint}; allowed: {', '.join(choices)}")
    e, a, r, le = cfg.env, cfg.actors, cfg.replay, cfg.learner
    _check(bool(e.id), "env.id", e.id, "a gymnasium environment id such as CartPole-v1, a register_env name or a class path")
    _check(e.creator is None or callable(e.creator), "env.creator", e.creator,
           "an env class or a callable taking env_config and returning an env")
    _check(e.max_episode_steps is None or e.max_episode_steps >= 1, "env.max_episode_steps",
           e.max_episode_steps, "an integer >= 1 or null")
    _check(e.frame_stack >= 1, "env.frame_stack", e.frame_stack, "an integer >= 1")
    _check(e.noop_max >= 0, "env.noop_max", e.noop_max, "an integer >= 0")
    _check(e.frame_skip >= 1, "env.frame_skip", e.frame_skip, "an integer >= 1")
    _check(e.screen_size >= 8, "env.screen_size", e.screen_size, "an integer >= 8")
    _check(e.vector_threads >= 1, "env.vector_threads", e.vector_threads, "an integer >= 1")
    _check(all(h >= 1 for h in cfg.network.torso), "network.torso", list(cfg.network.torso),
           "a list of positive integers (layer widths)")
    _check(cfg.network.head >= 1, "network.head", cfg.network.head, "an integer >= 1")
    _check_head(cfg)
    _check(a.num_actors is None or a.num_actors >= 1, "actors.num_actors", a.num_actors,
           "an integer >= 1, or null for one per CPU core")
    _check(a.envs_per_actor >= 1, "actors.envs_per_actor", a.envs_per_actor, "an integer >= 1")
    _check(0.0 <= a.eps_base <= 1.0, "actors.eps_base", a.eps_base, "a number in [0, 1]")
    _check(a.eps_alpha >= 0.0, "actors.eps_alpha", a.eps_alpha, "a number >= 0")
    _check(a.eps_anneal_steps >= 0, "actors.eps_anneal_steps", a.eps_anneal_steps, "an integer >= 0 (0 = no anneal)")
    _check(0.0 <= a.eps_start <= 1.0, "actors.eps_start", a.eps_start, "a number in [0, 1]")
    _check(a.send_every >= 1, "actors.send_every", a.send_every, "an integer >= 1 (transitions per send)")
    _check(a.weight_sync_period >= 1, "actors.weight_sync_period", a.weight_sync_period, "an integer >= 1")
    _check(a.max_inflight_sends >= 1, "actors.max_inflight_sends", a.max_inflight_sends, "an integer >= 1")
    _check(a.num_cpus >= 0, "actors.num_cpus", a.num_cpus, "a number >= 0")
    _check(a.device in ("auto", "cpu") or a.device.startswith("cuda"), "actors.device", a.device,
           "cpu, cuda, cuda:N or auto")
    _check(a.device == "cpu" or cfg.agent != "dpg", "actors.device", a.device,
           "cpu with agent dpg (only DQN actors run their network on a GPU)")
    _check(a.num_gpus >= 0, "actors.num_gpus", a.num_gpus, "a number >= 0 (Ray GPUs per actor, may be a fraction)")
    _check(r.capacity >= 1, "replay.capacity", r.capacity, "an integer >= 1")
    _check(0.0 <= r.alpha <= 1.0, "replay.alpha", r.alpha, "a number in [0, 1]")
    _check(0.0 <= r.beta <= 1.0, "replay.beta", r.beta, "a number in [0, 1]")
    _check(r.beta_final is None or 0.0 <= r.beta_final <= 1.0, "replay.beta_final", r.beta_final,
           "a number in [0, 1] or null")
    _check(r.beta_anneal_updates >= 0, "replay.beta_anneal_updates", r.beta_anneal_updates, "an integer >= 0")
    _check(r.num_shards >= 1, "replay.num_shards", r.num_shards, "an integer >= 1")
    _check(r.capacity // r.num_shards >= 1, "replay.num_shards", r.num_shards,
           f"at most replay.capacity ({r.capacity}) shards")
    _check(r.learning_starts >= 0, "replay.learning_starts", r.learning_starts, "an integer >= 0")
    _check(r.priority_eps > 0, "replay.priority_eps", r.priority_eps, "a number > 0")
    _check(r.samples_per_insert is None or r.samples_per_insert > 0, "replay.samples_per_insert",
           r.samples_per_insert, "a number > 0 or null")
    _check(r.spi_error_buffer is None or r.spi_error_buffer >= 0, "replay.spi_error_buffer",
           r.spi_error_buffer, "a number of samples >= 0 or null")
    _check(r.spi_max_lead is None or r.spi_max_lead >= 0, "replay.spi_max_lead", r.spi_max_lead,
           "a number of samples >= 0 or null")
    if r.spi_error_buffer is not None and r.spi_max_lead is not None:
        _check((r.spi_error_buffer + r.spi_max_lead) / r.num_shards >= le.batch_size, "replay.spi_max_lead",
               r.spi_max_lead, f"with replay.spi_error_buffer={r.spi_error_buffer}, a lead that makes their sum "
               f"per shard at least learner.batch_size ({le.batch_size}), or the learner and the actors "
               "can wait for each other forever")
    _check(le.lr > 0, "learner.lr", le.lr, "a number > 0, e.g. 1e-3")
    _check(le.batch_size >= 1, "learner.batch_size", le.batch_size, "an integer >= 1")
    _check(r.capacity >= le.batch_size, "replay.capacity", r.capacity,
           f"an integer >= learner.batch_size ({le.batch_size})")
    _check(r.learning_starts <= r.capacity, "replay.learning_starts", r.learning_starts,
           f"at most replay.capacity ({r.capacity})")
    _check(le.optimizer_eps > 0, "learner.optimizer_eps", le.optimizer_eps, "a number > 0")
    _check(0.0 <= le.gamma <= 1.0, "learner.gamma", le.gamma, "a number in [0, 1]")
    _check(le.n_step >= 1, "learner.n_step", le.n_step, "an integer >= 1")
    _check(le.grad_clip > 0, "learner.grad_clip", le.grad_clip, "a number > 0")
    _check(le.target_update_period >= 1, "learner.target_update_period", le.target_update_period,
           "an integer >= 1")
    _check(le.publish_period >= 1, "learner.publish_period", le.publish_period, "an integer >= 1")
    _check(le.prefetch >= 1, "learner.prefetch", le.prefetch, "an integer >= 1")
    _check(le.batches_per_request is None or le.batches_per_request >= 1, "learner.batches_per_request",
           le.batches_per_request, "an integer >= 1 or null")
    _check(le.device in ("auto", "cpu") or le.device.startswith("cuda"),
           "learner.device", le.device, "cpu, cuda, cuda:N or auto")
    _check(le.max_consecutive_skips >= 1, "learner.max_consecutive_skips", le.max_consecutive_skips,
           "an integer >= 1")
    _check(le.num_gpus >= 0, "learner.num_gpus", le.num_gpus, "a number >= 0")
    _check(le.num_cpus >= 0, "learner.num_cpus", le.num_cpus, "a number >= 0")
    d = cfg.dpg
    _check(d.actor_lr > 0, "dpg.actor_lr", d.actor_lr, "a number > 0, e.g. 1e-3")
    _check(0.0 <= d.tau <= 1.0, "dpg.tau", d.tau, "a number in [0, 1] (0 = hard target copies)")
    _check(d.policy_delay >= 1, "dpg.policy_delay", d.policy_delay, "an integer >= 1")
    _check(d.target_noise >= 0, "dpg.target_noise", d.target_noise, "a number >= 0 (0 = off)")
    _check(d.target_noise_clip >= 0, "dpg.target_noise_clip", d.target_noise_clip, "a number >= 0")
    _check(d.noise_max >= 0, "dpg.noise_max", d.noise_max, "a number >= 0 (action-noise std, [-1, 1] scale)")
    _check(0 <= d.noise_min <= d.noise_max, "dpg.noise_min", d.noise_min,
           f"a number in [0, dpg.noise_max = {d.noise_max}]")
    _check(0.0 < d.ou_theta <= 1.0, "dpg.ou_theta", d.ou_theta, "a number in (0, 1] (1 = no correlation)")
    if cfg.agent == "dpg":
        _check(cfg.network.kind in ("auto", "mlp"), "network.kind", cfg.network.kind,
               "auto or mlp with agent 'dpg' (its actor and critic are MLPs over flattened observations)")
    if cfg.agent == "r2d2":
        _check_r2d2(cfg)
    ev = cfg.evaluation
    _check(ev.interval_s >= 0, "evaluation.interval_s", ev.interval_s, "a number of seconds >= 0 (0 = off)")
    _check(ev.episodes >= 1, "evaluation.episodes", ev.episodes, "an integer >= 1")
    _check(ev.where in ("auto", "driver", "worker"), "evaluation.where", ev.where, "auto, driver or worker")
    _check(0.0 <= ev.epsilon <= 1.0 or (cfg.agent == "dpg" and ev.epsilon >= 0), "evaluation.epsilon", ev.epsilon,
           "a number in [0, 1] (dpg: a noise std >= 0)")
    _check(cfg.env.api in ("auto", "gymnasium", "aec", "parallel", "rllib"), "env.api", cfg.env.api,
           "auto, gymnasium, aec, parallel or rllib")
    cfg = normalize_policies(cfg)
    sp = cfg.multiagent.self_play
    _check(0.0 <= sp.p_latest <= 1.0, "multiagent.self_play.p_latest", sp.p_latest, "a share in [0, 1]")
    _check(0.0 <= sp.p_random <= 1.0 - sp.p_latest + 1e-9, "multiagent.self_play.p_random", sp.p_random,
           f"a share in [0, 1 - p_latest = {1 - sp.p_latest:g}] (the rest of the games play past snapshots)")
    _check(sp.snapshot_every >= 1, "multiagent.self_play.snapshot_every", sp.snapshot_every, "updates >= 1")
    _check(sp.pool_size >= 1, "multiagent.self_play.pool_size", sp.pool_size, "an integer >= 1")
    _check(bool(cfg.multiagent.opponent), "multiagent.opponent", cfg.multiagent.opponent,
           "auto, random, self, a checkpoint or run dir, or a function module.fn")
    _check(cfg.logging.report_interval_s > 0, "logging.report_interval_s", cfg.logging.report_interval_s,
           "a number of seconds > 0")
    _check(cfg.checkpoint.every_reports >= 0, "checkpoint.every_reports", cfg.checkpoint.every_reports,
           "an integer >= 0 (0 = only at the end)")
    _check(cfg.checkpoint.keep >= 1, "checkpoint.keep", cfg.checkpoint.keep, "an integer >= 1")
    s = cfg.stop
    _check(s.max_env_steps is None or s.max_env_steps >= 1, "stop.max_env_steps", s.max_env_steps,
           "an integer >= 1 or null")
    for key in ("loss_rates", "win_rates"):
        _check(all(0.0 <= r <= 1.0 for r in getattr(s, key)), f"stop.{key}", list(getattr(s, key)),
               "rates in [0, 1]: one for every seat, or one per seat")
    _check(s.max_time_s is None or s.max_time_s > 0, "stop.max_time_s", s.max_time_s, "seconds > 0 or null")
    _check(s.confirm_episodes is None or s.confirm_episodes >= 0, "stop.confirm_episodes", s.confirm_episodes,
           "an integer >= 0 (0 = no confirmation) or null (twice evaluation.episodes)")
    if cfg.name is not None:
        _check(bool(cfg.name) and "/" not in cfg.name and cfg.name not in (".", ".."), "name", cfg.name,
               "a non-empty name without '/'")
    return cfg


def _check_head(cfg: Config) -> None:
    n = cfg.network
    if n.distribution != "expectation":
        _check(n.num_atoms >= 2, "network.num_atoms", n.num_atoms, f"an integer >= 2 with network.distribution="
               f"{n.distribution}")
        _check(cfg.agent == "dqn", "network.distribution", n.distribution,
               f"expectation with agent '{cfg.agent}' (distributional heads are for agent dqn)")
    if n.distribution == "categorical":
        _check(n.v_min < n.v_max, "network.v_max", n.v_max, f"a number > network.v_min ({n.v_min})")
    _check(n.sigma0 > 0, "network.sigma0", n.sigma0, "a number > 0 (the paper's 0.5)")
    _check(not n.noisy or cfg.agent == "dqn", "network.noisy", n.noisy,
           f"false with agent '{cfg.agent}' (noisy layers are for agent dqn)")


def _check_r2d2(cfg: Config) -> None:
    q = cfg.r2d2
    _check(q.cell_size >= 1, "r2d2.cell_size", q.cell_size, "an integer >= 1")
    _check(q.seq_len >= 1, "r2d2.seq_len", q.seq_len, "an integer >= 1 (steps per sequence that train)")
    _check(q.burn_in >= 0, "r2d2.burn_in", q.burn_in, "an integer >= 0")
    total = q.burn_in + q.seq_len
    _check(q.overlap is None or 0 <= q.overlap < total, "r2d2.overlap", q.overlap,
           f"an integer in [0, burn_in + seq_len - 1 = {total - 1}] or null (= burn_in)")
    _check(q.h_epsilon > 0, "r2d2.h_epsilon", q.h_epsilon, "a number > 0, e.g. 1e-3")
    _check(0.0 <= q.priority_eta <= 1.0, "r2d2.priority_eta", q.priority_eta, "a number in [0, 1]")
    period = q.period
    _check(cfg.replay.capacity // period >= cfg.learner.batch_size * cfg.replay.num_shards, "replay.capacity",
           cfg.replay.capacity, f"at least learner.batch_size x num_shards sequences of {period} new steps each "
           f"(>= {cfg.learner.batch_size * cfg.replay.num_shards * period} transitions)")
