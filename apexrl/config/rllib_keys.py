"""RLlib's Ape-X keys (APEX, APEX_DDPG and the DQN/DDPG/TD3 keys they inherit), mapped by meaning.

One row per RLlib key: what it sets here, how its value is converted, or why it is accepted without effect
or refused. ``apexrl.config.rllib`` applies the rows; ``docs/coming-from-rllib.md`` shows them
(``apexrl.config.rllib.table()`` writes the table it holds), and a test checks every row. RLlib's nested sections
(``replay_buffer_config``, ``optimizer``, ``exploration_config``, ``model``, ``evaluation_config``) appear
dotted. Keys a file leaves out take apexrl's defaults, except the algorithm identity its ``run`` names.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from apexrl.config.rllib_base import ITERATION_S, Ctx, Key, inert, refuse, same
from apexrl.config.rllib_heads import HEAD_KEYS
from apexrl.config.rllib_multiagent import multiagent_section, new_multi_agent
from apexrl.config.rllib_r2d2 import R2D2_KEYS, replay_sequence_length, train_batch_size

__all__ = ["BY_NAME", "ITERATION_S", "KEYS", "OU_TYPES", "SECTIONS", "Ctx", "dpg_noise", "dqn_exploration", "refuse"]

PRIORITIZED = {"MultiAgentPrioritizedReplayBuffer", "PrioritizedReplayBuffer", "PrioritizedEpisodeReplayBuffer",
               "MultiAgentPrioritizedEpisodeReplayBuffer"}
UNIFORM = {"MultiAgentReplayBuffer", "ReplayBuffer", "EpisodeReplayBuffer", "MultiAgentEpisodeReplayBuffer"}
OU_TYPES = {"PerWorkerOrnsteinUhlenbeckNoise", "OrnsteinUhlenbeckNoise"}
GAUSSIAN_TYPES = {"PerWorkerGaussianNoise", "GaussianNoise"}
# RLlib's defaults for its exploration sections, used when a file names the section but not every key.
OU_DEFAULTS = {"ou_base_scale": 0.1, "ou_theta": 0.15, "ou_sigma": 0.2}
DDPG_HIDDENS = [400, 300]


def _workers(v: Any, c: Ctx) -> dict[str, Any]:
    """RLlib's workers are exploration units: each its own epsilon (or noise scale) and env copies. Each is
    an actor process while there are at most 2 per CPU (actors wait on the rate limiter and on Ray calls, so
    that much oversubscription costs little); beyond that they are packed into one actor per spare CPU, one
    env slot per worker's env, with the same spread of exploration over the slots."""
    workers, k = max(1, int(v or 0)), max(1, int(c.get("num_envs_per_worker", 1)))
    spare = max(1, c.host_cpus - 1)
    if workers <= 2 * c.host_cpus:
        return {"actors.num_actors": workers, "actors.envs_per_actor": k, "actors.epsilon_per": "actor"}
    actors = spare
    c.notes.append(f"num_workers ({workers} workers' exploration spread over {workers * k} env slots in "
                   f"{actors} actor process(es): this host has {c.host_cpus} CPU(s))")
    return {"actors.num_actors": actors, "actors.envs_per_actor": -(-workers // actors) * k,
            "actors.epsilon_per": "env"}


def _envs_per_worker(v: Any, c: Ctx) -> dict[str, Any]:
    if "num_workers" in c.flat:
        return {}  # applied with num_workers
    return {"actors.envs_per_actor": max(1, int(v))}


def _beta_anneal(v: Any, c: Ctx) -> dict[str, Any]:
    spi = float(c.get("training_intensity", None) or 8.0)
    return {"replay.beta_anneal_updates": max(0, round(int(v) * spi / c.batch_size()))}


def _target_freq(v: Any, c: Ctx) -> dict[str, Any]:
    """RLlib counts trained samples between target updates (updates x train_batch_size)."""
    period = max(1, round(int(v) / c.batch_size())) if v else 1
    if c.dpg:
        tau = float(c.get("tau", 0.002))
        if tau >= 1.0:
            return {"learner.target_update_period": period, "dpg.tau": 0.0}
        if v and int(v) > c.batch_size():
            raise refuse("target_network_update_freq", v, f"with tau {tau} < 1 (soft updates every "
                         f"{v} samples); apexrl's soft updates happen every update: set it to 0, or tau to 1.0")
        return {}
    return {"learner.target_update_period": period}


def _tau(v: Any, c: Ctx) -> dict[str, Any]:
    return {} if float(v) >= 1.0 else {"dpg.tau": float(v)}  # 1.0: hard copies, set by target_network_update_freq


def _hiddens(v: Any, c: Ctx) -> dict[str, Any]:
    if c.dpg:
        c.notes.append("hiddens (DQN's head; this run is DDPG)")
        return {}
    if not isinstance(v, list) or len(v) != 1:
        raise refuse("hiddens", v, "apexrl's dueling streams have one hidden layer: give one width, e.g. [256]")
    return {"network.head": int(v[0])}


def _fcnet(v: Any, c: Ctx) -> dict[str, Any]:
    if c.dpg:
        c.notes.append("model.fcnet_hiddens (DDPG's networks use actor_hiddens/critic_hiddens)")
        return {}
    return {"network.torso": list(v)}


def _ddpg_hiddens(v: Any, c: Ctx) -> dict[str, Any]:
    actor, critic = c.get("actor_hiddens", DDPG_HIDDENS), c.get("critic_hiddens", DDPG_HIDDENS)
    if list(actor) != list(critic):
        raise refuse("actor_hiddens", actor, f"apexrl's actor and critic share one layer list "
                     f"(network.torso); critic_hiddens is {critic}: make them equal")
    return {"network.torso": list(v)}


def _fcnet_activation(v: Any, c: Ctx) -> dict[str, Any]:
    if v not in ("relu", "tanh", "linear"):
        raise refuse("model.fcnet_activation", v, "use relu, tanh or linear")
    if c.dpg:
        if v != "relu":
            raise refuse("model.fcnet_activation", v, "DDPG's networks here use ReLU")
        return {}
    return {"network.activation": v}


def _relu(key: str) -> Key:
    return inert(key, "apexrl's MLPs use ReLU", ok=lambda v: v == "relu", refusal="apexrl's MLPs use ReLU only")


def _grad_clip(v: Any, c: Ctx) -> dict[str, Any]:
    return {"learner.grad_clip": 1e12 if v is None else float(v)}  # None: no clipping


def _replay_type(v: Any, c: Ctx) -> dict[str, Any]:
    if v in PRIORITIZED:
        return {}
    if v in UNIFORM:
        return {"replay.alpha": 0.0}  # uniform sampling is prioritized replay with alpha 0
    raise refuse("replay_buffer_config.type", v, f"use one of {sorted(PRIORITIZED | UNIFORM)}")


def _learning_starts(key: str) -> Key:
    def apply(v: Any, c: Ctx) -> dict[str, Any]:
        shards = int(c.get("optimizer.num_replay_buffer_shards", 1))
        per_shard = int(c.get("replay_buffer_config.min_size_for_sampling", 0)) * shards
        steps = [int(x) for x in (c.get("num_steps_sampled_before_learning_starts"),
                                  c.get("replay_buffer_config.learning_starts")) if x is not None]
        return {"replay.learning_starts": max([per_shard, *steps])}
    return Key(key, "replay.learning_starts", "transitions before learning starts; min_size_for_sampling is per "
               "shard (x num_replay_buffer_shards); the largest of the three wins", apply)


def dqn_exploration(c: Ctx) -> dict[str, Any]:
    """PerWorkerEpsilonGreedy (APEX's default): Ape-X's fixed spread. EpsilonGreedy (plain DQN's default):
    every slot's epsilon falls linearly from initial_epsilon to final_epsilon over epsilon_timesteps env
    steps of the whole run (RLlib counted the driver's sampled steps)."""
    kind = c.get("exploration_config.type", "EpsilonGreedy" if c.run in ("DQN", "R2D2") else "PerWorkerEpsilonGreedy")
    if kind == "PerWorkerEpsilonGreedy":
        for k in ("initial_epsilon", "final_epsilon", "epsilon_timesteps"):
            if f"exploration_config.{k}" in c.flat:
                c.notes.append(f"exploration_config.{k} (PerWorkerEpsilonGreedy's epsilons are fixed per worker)")
        return {}
    if kind != "EpsilonGreedy":
        raise refuse("exploration_config.type", kind, "use PerWorkerEpsilonGreedy (Ape-X) or EpsilonGreedy")
    return {"actors.eps_start": float(c.get("exploration_config.initial_epsilon", 1.0)),
            "actors.eps_base": float(c.get("exploration_config.final_epsilon", 0.05)),
            "actors.eps_alpha": 0.0,
            "actors.eps_anneal_steps": int(c.get("exploration_config.epsilon_timesteps", 100_000))}


def dpg_noise(c: Ctx) -> dict[str, Any]:
    """RLlib's per-worker noise: worker i of N gets scale 0.4 ** (1 + 7 i / (N - 1)) of the base noise; here
    noise_max and noise_min are its largest and smallest stationary std in apexrl's [-1, 1] action scale."""
    kind = c.get("exploration_config.type", "PerWorkerOrnsteinUhlenbeckNoise")
    if kind in OU_TYPES:
        base, theta, sigma = (float(c.get(f"exploration_config.{k}", d)) for k, d in OU_DEFAULTS.items())
        # RLlib adds base * x * (high - low), x its OU state; in the [-1, 1] scale that is 2 * base * x, whose
        # stationary std is sigma / sqrt(1 - (1 - theta)^2).
        std = 2.0 * base * sigma / math.sqrt(1.0 - (1.0 - theta) ** 2)
        out: dict[str, Any] = {"dpg.noise": "ou", "dpg.ou_theta": theta}
    elif kind in GAUSSIAN_TYPES:
        std = float(c.get("exploration_config.stddev", 0.1))  # taken as of the [-1, 1] scale
        out = {"dpg.noise": "gaussian"}
    else:
        raise refuse("exploration_config.type", kind, f"use one of {sorted(OU_TYPES | GAUSSIAN_TYPES)}")
    if kind.startswith("PerWorker"):
        out.update({"dpg.noise_max": 0.4 * std, "dpg.noise_min": 0.4 ** 8 * std})
    else:
        out.update({"dpg.noise_max": std, "dpg.noise_min": std})
    return out


def _ou_key(name: str) -> Key:
    return Key(f"exploration_config.{name}", "dpg.noise, dpg.ou_theta, dpg.noise_max, dpg.noise_min",
               "DDPG's OU noise (see exploration_config.type)", _section)


def _section(v: Any, c: Ctx) -> dict[str, Any]:
    return {}  # the exploration section is read as a whole, once, by apexrl.config.rllib.translate


def _epsilon_key(name: str, sets: str) -> Key:
    return Key(f"exploration_config.{name}", sets, "EpsilonGreedy's schedule (see exploration_config.type); "
               "no effect with PerWorkerEpsilonGreedy, whose epsilons are fixed per worker", _section)


def _eval_interval(v: Any, c: Ctx) -> dict[str, Any]:
    """Iterations between evaluations; an iteration is min_time_s_per_iteration seconds (5 if unset)."""
    return {"evaluation.interval_s": 0.0 if not v else float(v) * c.iteration_s()}


def _eval_unit(v: Any, c: Ctx) -> dict[str, Any]:
    if v != "episodes":
        raise refuse("evaluation_duration_unit", v, "apexrl evaluates whole episodes: use 'episodes'")
    return {}


def _eval_explore(v: Any, c: Ctx) -> dict[str, Any]:
    if v:
        raise refuse("evaluation_config.explore", v, "evaluations here are greedy (evaluation.epsilon sets noise)")
    return {"evaluation.epsilon": 0.0}


def _smooth(v: Any, c: Ctx) -> dict[str, Any]:
    return {"dpg.target_noise": float(c.get("target_noise", 0.2)) if v else 0.0}


def _gpus(key: str, section: str) -> Key:
    def apply(v: Any, c: Ctx) -> dict[str, Any]:
        g = float(v or 0)
        return {f"{section}.num_gpus": g, **({f"{section}.device": "auto"} if g > 0 else {})}
    return Key(key, f"{section}.num_gpus, {section}.device", "GPUs; > 0 also runs it on the GPU (device auto)", apply)


def _placement(v: Any, c: Ctx) -> dict[str, Any]:
    p = str(v).upper()
    if p not in ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"):
        raise refuse("placement_strategy", v, "use PACK or SPREAD")
    return {"actors.placement": "spread" if "SPREAD" in p else "pack"}


# RLlib's example envs that its tuned files name, and apexrl's envs with the same observations and dynamics.
EXAMPLE_ENVS = {f"ray.rllib.examples.{m}.stateless_cartpole.StatelessCartPole": "apexrl.envs.stateless:CartPoleNoVel-v1"
                for m in ("env", "envs.classes")}


def _env(v: Any, c: Ctx) -> dict[str, Any]:
    if isinstance(v, str) and v in EXAMPLE_ENVS:
        logging.getLogger("apexrl.config").warning("RLlib's example env %s runs as apexrl's %s (the same "
                                                   "observations and dynamics)", v, EXAMPLE_ENVS[v])
        return {"env.id": EXAMPLE_ENVS[v]}
    return {"env.id": v}


KEYS: list[Key] = [
    Key("env", "env.id", "a gymnasium id, a register_env name or a dotted class path (in Python also the class "
        "or creator); old gym ids (CartPole-v0, PongNoFrameskip-v4) still run, Atari ones with the DQN Atari "
        "preprocessing; RLlib's StatelessCartPole example runs as apexrl's CartPoleNoVel-v1", _env, rename=True),
    same("env_config", "env.kwargs", "a class's or creator's env_config; keyword arguments of gymnasium.make for "
         "gymnasium ids", dict),
    same("seed", "seed"),
    inert("framework", "apexrl runs PyTorch whatever this says"),
    Key("num_workers", "actors.num_actors, actors.envs_per_actor, actors.epsilon_per", _workers.__doc__ or "",
        _workers),
    Key("num_rollout_workers", "as num_workers", "as num_workers", _workers),
    Key("num_env_runners", "as num_workers", "as num_workers", _workers),
    Key("num_envs_per_worker", "actors.envs_per_actor", "env copies per worker (with num_workers)",
        _envs_per_worker),
    Key("num_envs_per_env_runner", "actors.envs_per_actor", "as num_envs_per_worker", _envs_per_worker),
    Key("rollout_fragment_length", "actors.send_every", "steps per env per batch sent: x num_envs_per_worker "
        "transitions per send", lambda v, c: {"actors.send_every": max(1, int(v) * int(c.get("num_envs_per_worker",
                                                                                            1)))}),
    same("lr", "learner.lr", "learning rate (DQN; DDPG's critic uses critic_lr)"),
    Key("train_batch_size", "learner.batch_size", "transitions per update; R2D2: timesteps per update, / (replay_burn_in "
        "+ max_seq_len) sequences", train_batch_size),
    same("gamma", "learner.gamma"),
    same("n_step", "learner.n_step"),
    Key("target_network_update_freq", "learner.target_update_period (dpg.tau)", _target_freq.__doc__ or "",
        _target_freq),
    Key("tau", "dpg.tau", "< 1: Polyak averaging every update; 1.0: hard copies every target_network_update_freq",
        _tau),
    inert("double_q", "true: apexrl's DQN is double DQN", ok=bool, refusal="apexrl's DQN is always double DQN"),
    same("dueling", "network.dueling", convert=bool),
    Key("hiddens", "network.head", "the dueling streams' hidden layer: one width", _hiddens),
    Key("model.fcnet_hiddens", "network.torso", "DQN's torso layers", _fcnet),
    Key("model.fcnet_activation", "network.activation", "relu, tanh or linear after each torso layer (DQN, R2D2)",
        _fcnet_activation),
    Key("actor_hiddens", "network.torso", "DDPG's layers; apexrl's actor and critic share them", _ddpg_hiddens),
    Key("critic_hiddens", "network.torso", "as actor_hiddens", _ddpg_hiddens),
    _relu("actor_hidden_activation"),
    _relu("critic_hidden_activation"),
    same("actor_lr", "dpg.actor_lr"),
    same("critic_lr", "learner.lr", "the critic's learning rate"),
    same("twin_q", "dpg.twin_critics", convert=bool),
    same("policy_delay", "dpg.policy_delay"),
    Key("smooth_target_policy", "dpg.target_noise", "off: target noise 0; on: target_noise", _smooth),
    Key("target_noise", "dpg.target_noise", "std of the target-action noise (with smooth_target_policy)",
        lambda v, c: {"dpg.target_noise": float(v)} if c.get("smooth_target_policy", c.run == "TD3") else {}),
    same("target_noise_clip", "dpg.target_noise_clip"),
    inert("l2_reg", "apexrl adds no L2 penalty; RLlib's default 1e-6 is negligible"),
    inert("use_state_preprocessor", "false: no preprocessor", ok=lambda v: not v, refusal="no state preprocessor here"),
    same("use_huber", "learner.loss", "Huber or squared TD loss", lambda v: "huber" if v else "mse"),
    inert("huber_threshold", "Huber's threshold is 1", ok=lambda v: float(v) == 1.0,
          refusal="apexrl's Huber loss has threshold 1"),
    Key("clip_rewards", "env.clip_rewards", "sign(r) for Atari training; non-Atari rewards are never clipped",
        lambda v, c: {} if v is None else {"env.clip_rewards": bool(v)}),
    same("adam_epsilon", "learner.optimizer_eps"),
    Key("grad_clip", "learner.grad_clip", "max global gradient norm; null: none", _grad_clip),
    _gpus("num_gpus", "learner"),
    _gpus("num_gpus_per_worker", "actors"),
    same("num_cpus_per_worker", "actors.num_cpus"),
    inert("num_cpus_for_driver", "the driver loop is light"),
    Key("replay_buffer_config.type", "replay.alpha", "prioritized types as they are; uniform ones: alpha 0",
        _replay_type),
    same("replay_buffer_config.capacity", "replay.capacity", "transitions over all shards"),
    same("buffer_size", "replay.capacity", "RLlib's old name for the capacity"),
    same("replay_buffer_config.prioritized_replay_alpha", "replay.alpha"),
    same("replay_buffer_config.prioritized_replay_beta", "replay.beta"),
    same("replay_buffer_config.prioritized_replay_eps", "replay.priority_eps"),
    same("prioritized_replay_alpha", "replay.alpha", "RLlib's old top-level name"),
    same("prioritized_replay_beta", "replay.beta", "RLlib's old top-level name"),
    same("prioritized_replay_eps", "replay.priority_eps", "RLlib's old top-level name"),
    same("final_prioritized_replay_beta", "replay.beta_final", "beta at the end of its anneal", float),
    Key("prioritized_replay_beta_annealing_timesteps", "replay.beta_anneal_updates", "env steps, converted to "
        "learner updates at the run's replay ratio (training_intensity, else replay.samples_per_insert's 8)",
        _beta_anneal),
    Key("prioritized_replay", "replay.alpha", "RLlib's old switch: off = alpha 0",
        lambda v, c: {} if v in (True, None, -1) else {"replay.alpha": 0.0}),
    _gpus("gpu", "learner"),
    Key("model.dim", "env.screen_size", "Atari frames' side in pixels", lambda v, c: {"env.screen_size": int(v)}),
    inert("model.grayscale", "Atari frames are grayscale", ok=bool, refusal="Atari frames here are grayscale"),
    inert("model.zero_mean", "frames are scaled to [0, 1]", ok=lambda v: not v,
          refusal="frames are scaled to [0, 1], not centred"),
    _learning_starts("replay_buffer_config.learning_starts"),
    _learning_starts("replay_buffer_config.min_size_for_sampling"),
    _learning_starts("num_steps_sampled_before_learning_starts"),
    same("learning_starts", "replay.learning_starts", "RLlib's old top-level name"),
    inert("replay_buffer_config.worker_side_prioritization", "actors always compute initial priorities (Ape-X)"),
    inert("worker_side_prioritization", "actors always compute initial priorities (Ape-X)"),
    inert("replay_buffer_config.replay_buffer_shards_colocated_with_driver", "shards are placed by Ray"),
    inert("replay_buffer_config.no_local_replay_buffer", "replay is always sharded Ray actors"),
    Key("replay_buffer_config.replay_sequence_length", "", "1 (one transition per item); R2D2: no effect, its "
        "sequences are replay_burn_in + max_seq_len", replay_sequence_length),
    *R2D2_KEYS,
    Key("replay_buffer_config.prioritized_replay", "replay.alpha", "RLlib's deprecated switch: off = alpha 0",
        lambda v, c: {} if v in (True, None, -1) else {"replay.alpha": 0.0}),
    same("optimizer.num_replay_buffer_shards", "replay.num_shards"),
    same("optimizer.max_weight_sync_delay", "actors.weight_sync_period", "env steps between weight pulls"),
    inert("optimizer.debug", "debug statistics of replay"),
    Key("training_intensity", "replay.samples_per_insert", "RLlib's replay ratio: sampled per inserted "
        "transition", lambda v, c: {} if v is None else {"replay.samples_per_insert": float(v)}),
    Key("exploration_config.type", "dpg.noise... (DDPG) / actors.eps_* (DQN)",
        "PerWorkerEpsilonGreedy (APEX's default: Ape-X's fixed spread) or EpsilonGreedy (DQN's default: every "
        "slot's epsilon falls linearly from initial_epsilon to final_epsilon over epsilon_timesteps env steps of "
        "the whole run); (PerWorker)OrnsteinUhlenbeckNoise or (PerWorker)GaussianNoise (DDPG)", _section),
    _ou_key("ou_base_scale"),
    _ou_key("ou_theta"),
    _ou_key("ou_sigma"),
    _ou_key("stddev"),
    inert("exploration_config.random_timesteps", "actors act at random for their share of "
          "replay.learning_starts"),
    inert("exploration_config.initial_scale", "Ape-X's per-worker scales are fixed"),
    inert("exploration_config.final_scale", "Ape-X's per-worker scales are fixed"),
    inert("exploration_config.scale_timesteps", "Ape-X's per-worker scales are fixed"),
    _epsilon_key("initial_epsilon", "actors.eps_start"),
    _epsilon_key("final_epsilon", "actors.eps_base (eps_alpha 0)"),
    _epsilon_key("epsilon_timesteps", "actors.eps_anneal_steps"),
    inert("explore", "true: actors explore; evaluations are greedy", ok=bool,
          refusal="Ape-X's actors always explore; greedy play is `apexrl eval`"),
    Key("evaluation_interval", "evaluation.interval_s", _eval_interval.__doc__ or "", _eval_interval),
    same("evaluation_duration", "evaluation.episodes", "episodes per evaluation"),
    Key("evaluation_duration_unit", "", "episodes only", _eval_unit),
    Key("evaluation_config.explore", "evaluation.epsilon", "False: greedy evaluations", _eval_explore),
    inert("evaluation_num_workers", "evaluations run on the driver, beside the actors"),
    inert("evaluation_num_env_runners", "evaluations run on the driver, beside the actors"),
    same("min_time_s_per_iteration", "logging.report_interval_s", "an iteration's seconds: apexrl train "
         "reports once per iteration; ApexTrainer.train() runs at least this long", float),
    inert("min_sample_timesteps_per_iteration", "ApexTrainer.train() runs at least this many env steps"),
    inert("compress_observations", "Atari frames are stored once, not per stack (smaller than LZ4 stacks)"),
    *HEAD_KEYS,
    Key("multiagent", "multiagent.policies, multiagent.policy_mapping, multiagent.policies_to_train",
        "policies (ids, PolicySpec or (cls, obs_space, act_space, config): apexrl's own agent per policy, the "
        "spaces checked, the config overriding the run's), policy_mapping_fn, policies_to_train (a list)",
        multiagent_section),
    Key("multi_agent", "as multiagent", "as multiagent (the newer method's name)", multiagent_section),
    Key("policies", "as multiagent", "as multiagent's (AlgorithmConfig.multi_agent's to_dict form)",
        new_multi_agent("policies")),
    Key("policy_mapping_fn", "as multiagent", "as multiagent's", new_multi_agent("policy_mapping_fn")),
    Key("policies_to_train", "as multiagent", "as multiagent's", new_multi_agent("policies_to_train")),
    inert("lr_schedule", "null is a constant learning rate", ok=lambda v: v is None, refusal="learning-rate schedules are not implemented"),
    inert("ignore_worker_failures", "failed actors are always restarted"),
    inert("recreate_failed_workers", "failed actors are always restarted"),
    inert("restart_failed_env_runners", "failed actors are always restarted"),
    Key("placement_strategy", "actors.placement", "PACK or SPREAD over nodes", _placement),
    inert("log_level", "apexrl logs with logging; the console shows progress"),
    inert("metrics_num_episodes_for_smoothing", "100 is what apexrl's training means use",
          ok=lambda v: int(v) == 100, refusal="apexrl's training means are over the last 100 episodes"),
]
BY_NAME: dict[str, Key] = {k.rllib: k for k in KEYS}
SECTIONS = {"optimizer", "replay_buffer_config", "exploration_config", "model", "evaluation_config"}
