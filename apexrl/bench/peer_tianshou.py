"""The Tianshou peer of ``apexrl bench games``: PettingZoo's own Tianshou tutorial for tic-tac-toe
(Farama-Foundation/PettingZoo, tutorials/Tianshou/2_training_agents.py, with tianshou==0.5.0 as its
requirements.txt pins), its settings as published: a DQN learner in the second seat against a random first
player; Net of four 128-unit layers, Adam lr 1e-4, gamma 0.9, 3-step returns, target copy every 320 updates,
VectorReplayBuffer(20,000) over 10 DummyVectorEnv train envs, 640 random steps before training, epsilon 0.1
while training, batch 64, 50 env steps per collect, 0.1 updates per env step, 1,000 env steps per epoch.

What differs, and why: the tutorial stops at a test mean of 0.6 over 10 episodes and after 50 epochs; here it
trains until the benchmark's criterion (its greedy learner loses <= the second seat's rate in 1,000 games
against random, the same evaluation code apexrl is measured with) or the wall budget. The evaluation's own
time is taken off the peer's clock (apexrl's evaluations run beside its training and count).

Runs in its own venv (benchmarks/make_tianshou_venv.sh) with this checkout on PYTHONPATH; prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import time

LAUNCH = time.time()


def main(seed: int, budget_s: float, loss_rate: float, eval_every_s: float, episodes: int) -> dict:
    import numpy as np
    import torch
    from pettingzoo import make
    from tianshou.data import Collector, VectorReplayBuffer
    from tianshou.env import DummyVectorEnv
    from tianshou.env.pettingzoo_env import PettingZooEnv
    from tianshou.policy import DQNPolicy, MultiAgentPolicyManager, RandomPolicy
    from tianshou.trainer import offpolicy_trainer
    from tianshou.utils.net.common import Net

    from apexrl.config import from_dict
    from apexrl.envs.multiagent.make import agent_views, make_game
    from apexrl.envs.multiagent.play import evaluate_game

    torch.set_num_threads(1)

    def get_env():
        return PettingZooEnv(make("aec", "classic/tictactoe-v3"))

    train_envs = DummyVectorEnv([get_env for _ in range(10)])
    test_envs = DummyVectorEnv([get_env for _ in range(10)])
    np.random.seed(seed)
    torch.manual_seed(seed)
    train_envs.seed(seed)
    test_envs.seed(seed)
    env = get_env()
    net = Net(state_shape=env.observation_space["observation"].shape, action_shape=env.action_space.n,
              hidden_sizes=[128, 128, 128, 128], device="cpu")
    optim = torch.optim.Adam(net.parameters(), lr=1e-4)
    learner = DQNPolicy(model=net, optim=optim, discount_factor=0.9, estimation_step=3, target_update_freq=320)
    agents = env.agents
    policy = MultiAgentPolicyManager([RandomPolicy(), learner], env)
    train_collector = Collector(policy, train_envs, VectorReplayBuffer(20_000, len(train_envs)),
                                exploration_noise=True)
    test_collector = Collector(policy, test_envs, exploration_noise=True)
    train_collector.collect(n_step=64 * 10)

    cfg = from_dict({"env": {"id": "pettingzoo.classic.tictactoe_v3"}, "multiagent": {"opponent": "random"}})
    cfg = cfg.replace(**{"env.api": "aec"})
    probe = make_game(cfg.env)
    codec = agent_views(probe, cfg.env, probe.reset(seed=0).to_act)[agents[1]].codec

    class Greedy:
        """The learner's greedy, masked choice on apexrl's packed rows (what its DQNPolicy does at eps 0)."""

        def act(self, rows, keys=None, slots=None):
            board = codec.unpack(rows)["observation"].astype(np.float32)
            with torch.no_grad():
                q = net(board)[0].numpy()
            q[~codec.legal(rows)] = -np.inf
            return q.argmax(axis=1)

    state = {"next": time.time() + eval_every_s, "eval_s": 0.0, "reached_at": None, "evals": [], "stop": False}

    def check(epoch: int, env_step: int) -> None:
        learner.set_eps(0.1)  # the tutorial's train_fn
        now = time.time()
        if now - LAUNCH - state["eval_s"] > budget_s:
            state["stop"] = True
        if now < state["next"] or state["stop"]:
            return
        res = evaluate_game(lambda rows: Greedy(), cfg, episodes, seed=seed * 7 + len(state["evals"]))
        done = time.time()
        state["eval_s"] += done - now
        loss = res["eval_seats"][agents[1]]["loss"]
        clock = now - LAUNCH - state["eval_s"] + (done - now)
        state["evals"].append((round(clock, 2), env_step, res["eval_seats"][agents[1]]))
        if loss <= loss_rate:
            state["reached_at"] = clock
            state["stop"] = True
        state["next"] = time.time() + eval_every_s

    offpolicy_trainer(
        policy=policy, train_collector=train_collector, test_collector=test_collector, max_epoch=10**6,
        step_per_epoch=1000, step_per_collect=50, episode_per_test=10, batch_size=64, train_fn=check,
        test_fn=lambda epoch, env_step: learner.set_eps(0.05), stop_fn=lambda mean: state["stop"],
        update_per_step=0.1, test_in_train=False, reward_metric=lambda rews: rews[:, 1], verbose=False,
        show_progress=False)
    return {"reached": state["reached_at"] is not None, "time_to_target_s": state["reached_at"],
            "evals": state["evals"], "eval_time_s": round(state["eval_s"], 2), "seat": agents[1]}


if __name__ == "__main__":
    seed, budget, rate, every, episodes = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), \
        float(sys.argv[4]), int(sys.argv[5])
    print(json.dumps(main(seed, budget, rate, every, episodes)))
