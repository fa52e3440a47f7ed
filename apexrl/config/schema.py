"""The run configuration's schema: one frozen dataclass tree; nothing here imports the rest of apexrl.

Every field has a comment with its unit and, where the value is not the paper's, why this value. The
dataclass defaults are the CartPole preset ``apexrl train`` runs: one source of defaults. Parsing
(``apexrl.config.parse``) and validation (``apexrl.config.validate``) happen before anything starts (no Ray, no run
dir), and each error names the key, the bad value and what is allowed, so the CLI prints one line, exit 2.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PRESETS_DIR = Path(__file__).parent.parent / "configs"
AGENTS = ("dqn", "dpg", "r2d2")  # config.agent's choices; apexrl.agents.BUILDERS builds each
log = logging.getLogger(__name__)


class ConfigError(ValueError):
    """A config problem the user can fix; the message is a complete sentence naming key and fix."""


@dataclass(frozen=True)
class EnvConfig:
    id: str = "CartPole-v1"  # a gymnasium id (ALE/Pong-v5, module:Id), a name given to ray.tune's register_env,
    #                          or a dotted class path (my_pkg.envs.MyEnv); in Python also a class or creator
    kwargs: Mapping[str, Any] = field(default_factory=dict)  # gymnasium.make's keyword arguments; a class or
    #                                                          creator gets them as its one env_config argument
    api: str = "auto"  # what id gives: gymnasium (one agent) | aec (PettingZoo, turn-based) | parallel (PettingZoo,
    #                    all agents at once) | rllib (RLlib's MultiAgentEnv) | auto (found out from the env built)
    creator: Any = field(default=None, metadata={"object": True})  # the class or callable handed over in Python
    #                   (not in config.yaml: a resume rebuilds it from id when id names an importable class)
    action_mask: str = "auto"  # where legal actions come from: observation (a Dict entry 'action_mask') | info
    #                            (info['action_mask']) | none | auto (the Dict entry, else info if the env's reset
    #                            info has one: one extra reset when an env is built)
    ignore_observation: tuple[str, ...] = ()  # observation entries (paths like 'mission' or 'goal.text') kept out
    #                                           of the network's input; non-numeric entries are left out anyway,
    #                                           with a warning unless listed here
    max_episode_steps: int | None = None  # steps; None keeps the env's own limit
    atari: bool | None = None  # DQN Atari preprocessing; None = on for ALE/ ids
    frame_stack: int = 4  # frames (Atari)
    noop_max: int = 30  # no-op steps at reset (Atari)
    frame_skip: int = 4  # frames per agent step (Atari)
    screen_size: int = 84  # pixels (Atari)
    terminal_on_life_loss: bool = True  # training only (Atari)
    clip_rewards: bool = True  # training only (Atari): sign(r)
    max_episode_frames: int = 108_000  # emulator frames, 30 minutes (Atari)
    vector: str = "auto"  # how actors step their envs: gymnasium (Python wrappers, any env) | ale (ale-py's C++
    #                       AtariVectorEnv, same protocol, GIL released while stepping; an actor of 32 envs did
    #                       1,766 vs 1,661 env steps/s on 2 cores, within noise) | auto (ale where it applies)
    vector_threads: int = 1  # C++ threads per actor for the ale path; 1 leaves other cores to other roles
    non_finite: str = "stop"  # a NaN/inf reward or observation: stop (the run ends after a final checkpoint,
    #                           one line naming env, actor, slot and step) | drop (its transitions are not
    #                           sent, and counted in the report: for envs known to glitch rarely)


@dataclass(frozen=True)
class NetworkConfig:
    kind: str = "auto"  # auto | mlp | nature_cnn | minatar  (auto: for uint8 images the Nature CNN, or MinAtar's
    #                     one-conv torso below 36x36 pixels; else an MLP)
    torso: tuple[int, ...] = (256, 256)  # units per MLP torso layer; two 256-wide layers learn CartPole reliably
    activation: str = "relu"  # relu | tanh | linear: after each torso layer (dqn, r2d2); RLlib's fcnet_activation
    head: int = 64  # hidden units of each head stream (dueling value and advantage); 64 keeps an update
    #                 cheap (one 256x256 matmul per pass dominates) without costing CartPole solves
    dueling: bool = True  # dueling head (Wang et al., 2016)
    distribution: str = "expectation"  # expectation | categorical | quantile (agent dqn): the head learns Q
    #                                    itself, C51's distribution over fixed returns, or QR-DQN's quantiles
    num_atoms: int = 51  # atoms (categorical) or quantiles (quantile); C51's 51
    v_min: float = -10.0  # the categorical support's ends: returns beyond them are clipped to them, so they
    v_max: float = 10.0  #   must cover the env's discounted returns (C51's +-10 suits clipped Atari rewards)
    noisy: bool = False  # factorised Gaussian noisy layers in the head (Fortunato et al., 2018): exploration
    #                      the network learns; the actors' epsilons are then 0 unless actors.epsilon_with_noise
    sigma0: float = 0.5  # initial noise scale of a noisy layer, sigma0 / sqrt(fan_in) per weight (the paper's)


@dataclass(frozen=True)
class ActorsConfig:
    num_actors: int | None = None  # processes; None = one per CPU left after the learner's (at least 1)
    envs_per_actor: int = 16  # environments stepped together: one batched forward pass serves them all
    eps_base: float = 0.4  # eps_i = eps_base ** (1 + eps_alpha * i / (N - 1))  (Ape-X)
    eps_alpha: float = 7.0
    epsilon_per: str = "env"  # env | actor: which unit gets its own epsilon (env: a spread even with 2 actors)
    eps_anneal_steps: int = 0  # env steps (all actors) over which each slot's epsilon falls linearly from
    #                            eps_start to its own; 0 = fixed from the start, as in Ape-X
    eps_start: float = 1.0  # the epsilon every slot starts from when eps_anneal_steps > 0
    send_every: int = 1024  # transitions per send to replay; a Ray call costs the shard ~1-2 ms whatever its size
    weight_sync_period: int = 400  # env steps per actor between weight pulls (Ape-X: 400)
    max_inflight_sends: int = 8  # unacknowledged sends before the actor waits for replay
    num_cpus: float = 1.0  # Ray CPUs per actor
    placement: str = "pack"  # pack | spread: Ray scheduling of actors and shards over nodes
    device: str = "cpu"  # cpu | cuda | cuda:N | auto: where actors run their forward passes (DQN); on a GPU
    #                      machine, cuda leaves the actors' cores to the emulators. On the CPU (and with auto),
    #                      the built-in MLP acts in numpy: an actor then never loads torch (~150 MB, ~1 s less)
    num_gpus: float = 0.0  # Ray GPUs per actor; a fraction lets many actors share the learner's GPU
    epsilon_with_noise: bool = False  # with network.noisy, keep Ape-X's epsilons as well (RLlib's APEX does);
    #                                   off, the noise alone explores, as in Rainbow
    precision: str = "float32"  # float32 | bfloat16 | auto: the actors' forward passes (DQN); bfloat16 is ~1.3x
    #                             faster for a conv net on CPUs with AVX512-BF16 or AMX, Q-values (so priorities)
    #                             good to ~1%; auto = bfloat16 where the actor's CPU has it natively, else float32


@dataclass(frozen=True)
class ReplayConfig:
    capacity: int = 100_000  # transitions over all shards (FIFO eviction)
    alpha: float = 0.6  # priority exponent: P(i) ~ p_i ** alpha (Ape-X)
    beta: float = 0.4  # importance-sampling exponent (fixed, as in Ape-X)
    beta_final: float | None = None  # anneal beta linearly to this value...
    beta_anneal_updates: int = 0  # ...over this many learner updates (0 = fixed beta)
    num_shards: int = 1  # ReplayShard Ray actors; capacity is split evenly
    learning_starts: int = 2_000  # transitions before the learner starts; rate-limited actors wait there for it
    priority_eps: float = 1e-6  # added to |TD error|
    samples_per_insert: float | None = 8.0  # learner samples per inserted transition (rate limiter): keeps
    #                                         the update/data ratio fixed whatever the host's speed; None = free
    spi_error_buffer: float | None = None  # samples the learner may fall behind that ratio; None = auto
    spi_max_lead: float | None = None  # samples it may run ahead; None = one request (batch x batches_per_request)


@dataclass(frozen=True)
class LearnerConfig:
    lr: float = 2e-3  # optimizer learning rate
    batch_size: int = 64  # transitions per update; small batches give more updates per CPU second
    optimizer: str = "adam"  # adam | rmsprop (centered, as in Ape-X)
    optimizer_eps: float = 1e-8  # Adam eps / RMSProp eps
    gamma: float = 0.99  # discount per env step
    n_step: int = 3  # steps in the bootstrapped return (Ape-X: 3)
    grad_clip: float = 10.0  # max global gradient norm
    loss: str = "huber"  # huber | mse
    target_update_period: int = 500  # learner updates between target-network copies
    publish_period: int = 50  # learner updates between weight publications (a ray.put each)
    prefetch: int = 4  # sample requests kept in flight, so an update never waits for a round trip
    batches_per_request: int | None = None  # batches per learner<->shard round trip; None = ~512 transitions (max 8)
    device: str = "cpu"  # cpu | cuda | cuda:N | auto
    max_consecutive_skips: int = 100  # non-finite updates in a row before the run stops (last good ckpt kept)
    num_gpus: float = 0.0  # Ray GPUs for the learner actor
    num_cpus: float = 1.0  # Ray CPUs for the learner actor


@dataclass(frozen=True)
class DPGConfig:
    """Ape-X DPG (``agent: dpg``): the critic trains with ``learner.lr``/``learner.optimizer``, the rest here."""

    actor_lr: float = 1e-3  # deterministic policy's learning rate (Adam)
    tau: float = 0.005  # Polyak averaging of both target networks per update; 0 = hard copies every
    #                     learner.target_update_period updates (the Ape-X paper's choice)
    twin_critics: bool = True  # TD3's clipped double Q: the target takes the smaller of two critics
    policy_delay: int = 2  # critic updates per policy update (TD3: 2; DDPG: 1)
    target_noise: float = 0.2  # std of the clipped Gaussian added to the target action (TD3 smoothing; 0 = off)
    target_noise_clip: float = 0.5  # bound of that noise, in the [-1, 1] action scale
    noise_max: float = 0.5  # Gaussian action-noise std of the most exploring env slot ([-1, 1] scale)
    noise_min: float = 0.05  # ...and of the least: slots in between are spread geometrically, as Ape-X
    #                          spreads epsilon, so some actors explore widely and some act nearly greedily
    noise: str = "gaussian"  # gaussian (independent per step) | ou (Ornstein-Uhlenbeck: correlated over steps,
    #                          so an action keeps its direction long enough to reach far states, e.g. the goal
    #                          of MountainCarContinuous); noise_max/noise_min are its stationary stds either way
    ou_theta: float = 0.15  # OU pull toward 0 per step; the noise forgets itself over ~1/theta steps (DDPG: 0.15)


@dataclass(frozen=True)
class R2D2Config:
    """Recurrent Ape-X (``agent: r2d2``; Kapturowski et al., 2019). Replay holds sequences of
    ``burn_in + seq_len`` steps (plus the observation after them); ``learner.batch_size`` counts sequences."""

    cell: str = "lstm"  # lstm | gru: the recurrent core between the torso and the dueling head
    cell_size: int = 64  # units of the core (RLlib's lstm_cell_size); 64 remembers CartPole's velocities
    seq_len: int = 20  # steps per sequence that train (RLlib's max_seq_len; paper: 40 of 80)
    burn_in: int = 10  # steps before them that only rebuild the recurrent state, without gradients (paper: 40)
    overlap: int | None = None  # steps consecutive sequences share; None = burn_in, so every step trains in
    #                             exactly one sequence and serves as the next one's burn-in (the paper's 40 of 80)
    zero_init_states: bool = False  # start each replayed sequence from zeros instead of the state the actor
    #                                 stored (R2D2's "stored state" strategy, better with burn-in)
    use_h_function: bool = False  # value rescaling h(x) = sign(x)(sqrt(|x|+1)-1) + eps*x on targets; for
    #                               unclipped rewards of very different scales (Atari without clipping)
    h_epsilon: float = 1e-3  # the eps of h (paper: 1e-3)
    priority_eta: float = 0.9  # a sequence's priority: eta * max|TD| + (1 - eta) * mean|TD| (paper: 0.9)

    @property
    def shared_steps(self) -> int:
        """``overlap`` with its default resolved."""
        return self.burn_in if self.overlap is None else self.overlap

    @property
    def period(self) -> int:
        """Steps between the starts of a slot's consecutive sequences: the new steps each one brings."""
        return self.burn_in + self.seq_len - self.shared_steps


@dataclass(frozen=True)
class EvaluationConfig:
    interval_s: float = 1.0  # seconds between greedy evaluations (0 = off); CartPole's costs ~60 ms
    episodes: int = 10  # episodes per evaluation
    epsilon: float = 0.0  # exploration during evaluation (dqn: epsilon; dpg: action-noise std)
    # Where evaluations run: "driver" (a thread of the driver: no process to start, best on a laptop),
    # "worker" (a Ray actor of its own: the driver stays free on a cluster), "auto" (worker with --address).
    where: str = "auto"


@dataclass(frozen=True)
class SelfPlayConfig:
    """Training games against a league (one shared policy): who the other seats are when a game starts."""

    p_latest: float = 1.0  # share of training games where every seat plays the current policy (plain self-play)
    p_random: float = 0.0  # ...where the other seats play uniform random legal moves; the rest: a past snapshot
    snapshot_every: int = 2_000  # learner updates between an actor's snapshots of the weights it pulls
    pool_size: int = 10  # snapshots an actor keeps (the oldest goes); drawn uniformly


@dataclass(frozen=True)
class MultiAgentConfig:
    """Several agents in one env (``env.api`` aec, parallel or rllib): which policy plays each agent."""

    policy_id: str = "default_policy"  # the shared policy's name (RLlib's default, or the one policy its multiagent
    #                                   section names): what ApexTrainer's policy_id arguments may say
    policies: Any = field(default_factory=dict)  # several policies, each with its own network, replay
    #     and learner: {id: {agent: dqn | dpg, config: {learner.lr: 1e-3, ...}}} ({} or null: the run's own
    #     settings). Empty: one shared policy when every agent has the same spaces, else one per distinct space
    policy_mapping: Any = None  # agent id -> policy: a table {agent id or fnmatch pattern: policy} (first match),
    #     or a function 'pkg.mod.fn' called as RLlib calls policy_mapping_fn (in Python also the function); asked
    #     once per agent at start-up, and config.yaml keeps the table it gave
    policies_to_train: tuple[str, ...] | None = None  # null: every policy; the others act and are never updated
    self_play: SelfPlayConfig = field(default_factory=SelfPlayConfig)  # a league of past selves and random play
    opponent: str = "auto"  # who plays the other seats in evaluations: random (uniform over legal actions, each
    #                         seat in turn: games with action masks) | self (every agent plays with the policy:
    #                         cooperative tasks) | auto (random where agents have action masks, else self) | a
    #                         checkpoint file or run dir (its best.pt, greedy) | module.fn(agent, obs, info) -> action


@dataclass(frozen=True)
class LoggingConfig:
    report_interval_s: float = 2.0  # seconds between reports (console, metrics.jsonl, TensorBoard)
    tensorboard: bool = True
    console: str = "auto"  # auto | live | plain | off


@dataclass(frozen=True)
class CheckpointConfig:
    every_reports: int = 15  # reports between checkpoints (0 = only at the end)
    keep: int = 3  # newest checkpoints kept on disk
    replay: bool = False  # also save replay contents and priorities


@dataclass(frozen=True)
class StopConfig:
    max_env_steps: int | None = None  # env steps over all actors
    max_time_s: float | None = None  # wall seconds of this invocation (a resumed run gets them anew)
    target_return: float | None = None  # stop when the evaluation mean reaches this
    loss_rates: tuple[float, ...] = ()  # games against an opponent (multiagent.opponent): stop when an evaluation
    #                                     loses at most this often in every seat; one rate for all seats, or one
    #                                     per seat in the env's possible_agents order (tic-tac-toe: [0.01, 0.03])
    win_rates: tuple[float, ...] = ()  # ...or when it wins at least this often in every seat (Connect Four: [0.95])
    confirm_episodes: int | None = None  # an evaluation that meets target_return / loss_rates / win_rates is played
    #                                      again for this many more episodes with the same weights, and the run
    #                                      stops only if all of them together still meet it (a 10-episode mean of
    #                                      488 once left weights that played 447): null = twice
    #                                      evaluation.episodes, 0 = stop on the first evaluation that meets it
    train_return: float | None = None  # stop when training episodes reach this mean: the last 100 (at least 10)
    #                                    played by the least-exploring third of the env slots, as RLlib's Ape-X
    #                                    reported episode_reward_mean (its lowest-epsilon third of workers)


@dataclass(frozen=True)
class Config:
    """The defaults are the CartPole preset that ``apexrl train`` runs; presets hold only what differs."""

    seed: int = 0
    name: str | None = None  # run name; None = {env}__s{seed}__{time}
    agent: str = "dqn"  # the algorithm (apexrl.agents): dqn (discrete actions) | dpg (continuous actions) |
    #                    r2d2 (discrete actions, recurrent: partially observed tasks)
    env: EnvConfig = field(default_factory=EnvConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    actors: ActorsConfig = field(default_factory=ActorsConfig)
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    dpg: DPGConfig = field(default_factory=DPGConfig)
    r2d2: R2D2Config = field(default_factory=R2D2Config)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    multiagent: MultiAgentConfig = field(default_factory=MultiAgentConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    stop: StopConfig = field(default_factory=StopConfig)

    def replace(self, **dotted: Any) -> Config:
        """Return a validated copy with ``{"learner.lr": 1e-4}``-style overrides applied (RLlib keys too)."""
        from apexrl.config import rllib  # parsing sits above the schema
        from apexrl.config.parse import from_dict, set_dotted

        data = to_dict(self, objects=True)
        theirs = {k: v for k, v in dotted.items() if rllib.is_rllib_key(k) and k not in rllib.APEXRL_TOP}
        if theirs:
            data = rllib.merge(data, rllib.translate({**theirs, "agent": self.agent}, identity=False, base=data))
        for key, value in dotted.items():
            if key in theirs:
                continue
            if key == "network.hidden_sizes":  # the deprecated key replaces both new ones
                data["network"].pop("torso"), data["network"].pop("head")
            set_dotted(data, key, value)
        return from_dict(data)


def to_dict(cfg: Any, objects: bool = False) -> dict[str, Any]:
    """Plain nested dict (tuples as lists, mappings as dicts) for YAML and checkpoints; ``objects`` keeps the
    Python objects a config may carry (an env creator), which YAML and checkpoints leave out."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        if f.metadata.get("object") and not objects:
            continue
        if dataclasses.is_dataclass(v):
            v = to_dict(v, objects)
        elif isinstance(v, tuple):
            v = list(v)
        elif isinstance(v, Mapping):
            v = dict(v)
        out[f.name] = v
    return out


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"learner": {"lr": 1e-3}}`` -> ``{"learner.lr": 1e-3}``; lists and env kwargs as JSON text, so
    every value is a scalar (hyperparameter tables, grouping runs by config)."""
    import json

    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping) and k != "kwargs":
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = json.dumps(v, sort_keys=True) if isinstance(v, (Mapping, list)) else v
    return out


def dump_yaml(cfg: Config) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)
