"""An actor's own loop, in-process: it steps until its budget is spent, stands still when paused with its
counters on the board, and ends cleanly when stopped."""

import threading
import time

from test_actor import Actor, ListSink, cfg

from apexrl.runtime.actor_loop import ActorLoop, Delta
from apexrl.runtime.board import Board


class BoardLine:
    """The actor's line to an in-process board: a push is answered at once, read at the next ``reply``."""

    def __init__(self, board, index):
        self.board, self.index, self._reply, self.pushes = board, index, None, 0

    def register(self, want):
        self._reply = self.board.register(self.index, want)

    def push(self, delta, want):
        if self._reply is None:
            self.pushes += 1
            self._reply = self.board.push(self.index, delta, want)

    def busy(self):
        return self._reply is not None

    def reply(self, wait=False):
        out, self._reply = self._reply, None
        return out


def _loop(budget=None, envs=3, period=0.05):
    board = Board(num_actors=1, envs_per_actor=envs, budget=budget)
    sink = ListSink()
    actor = Actor(cfg(**{"actors.envs_per_actor": envs}), 0, 1, sink)
    return ActorLoop(actor, BoardLine(board, 0), period, acknowledge=sink.flush), board, actor, sink


def _in_thread(loop):
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("why", loop.run()), daemon=True)
    t.start()
    return t, out


def test_an_env_step_budget_is_met_and_not_overshot_by_more_than_one_vector_step():
    loop, board, actor, _ = _loop(budget=1000, envs=3)
    assert loop.run() == "budget"
    assert actor.env_steps == 1002 == board.env_steps  # 334 vector steps of 3 envs
    assert board.spent()


def test_a_paused_actor_stands_still_with_its_sends_flushed_and_its_counters_on_the_board():
    loop, board, actor, sink = _loop()
    t, out = _in_thread(loop)
    time.sleep(0.3)
    assert loop.pause(timeout=10)
    steps, flushed = actor.env_steps, sink.flushed
    assert steps > 0 and flushed >= 1
    assert board.env_steps == steps  # what a checkpoint taken now would count
    time.sleep(0.2)
    assert actor.env_steps == steps
    loop.resume()
    time.sleep(0.2)
    assert actor.env_steps > steps
    loop.stop()
    t.join(10)
    assert out["why"] == "stopped" and board.env_steps == actor.env_steps


def test_a_pause_asked_for_before_the_loop_starts_is_kept():
    loop, board, actor, _ = _loop()
    loop._go.clear()  # what pause() does first; the loop has not registered yet
    t, _ = _in_thread(loop)
    assert loop._paused.wait(10)
    assert actor.env_steps == 0
    loop.stop()
    t.join(10)


def test_exploration_anneals_by_the_global_count_the_board_sends_back():
    loop, board, actor, _ = _loop(budget=None)
    board.env_steps = 123_456  # other actors' steps
    seen = []
    actor.policy.observe_global_steps = seen.append
    t, _ = _in_thread(loop)
    time.sleep(0.3)
    loop.stop()
    t.join(10)
    assert seen[0] == 123_456 and seen[-1] > 123_456


def test_the_loop_pushes_on_a_clock_not_per_step():
    loop, board, actor, _ = _loop(period=0.1)
    t, _ = _in_thread(loop)
    time.sleep(1.0)
    loop.stop()
    t.join(10)
    assert 5 <= loop.control.pushes <= 14  # ~10 in a second, whatever the thousands of steps


def test_a_delta_sums_steps_and_keeps_the_newest_totals():
    d = Delta()
    d.add({"env_steps": 4, "time_s": 0.5, "episode_returns": [1.0], "transitions_sent": 10, "started_at": 7.0})
    d.add({"env_steps": 6, "time_s": 0.5, "episode_returns": [2.0], "transitions_sent": 16, "started_at": 8.0})
    assert d.take() == {"env_steps": 10, "time_s": 1.0, "episode_returns": [1.0, 2.0], "transitions_sent": 16,
                        "started_at": 7.0}
    assert not d


def test_each_push_carries_the_wall_time_since_the_last_so_rates_count_time_outside_the_env():
    loop, board, actor, _ = _loop(period=0.1)
    deltas = []
    push = loop.control.push
    loop.control.push = lambda delta, want: (deltas.append(delta), push(delta, want))
    t, _ = _in_thread(loop)
    time.sleep(0.6)
    loop.stop()
    t.join(10)
    assert all(d["wall_s"] >= d.get("time_s", 0) for d in deltas)
    assert 0.5 <= sum(d["wall_s"] for d in deltas) <= 1.5  # the pushes' spans tile the loop's life
