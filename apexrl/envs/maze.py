"""A small env with a Dict observation (an image, a vector, an action mask), shipped to show and test the
structured path: ``env.id: apexrl.envs.maze:MaskedMaze-v0``.

A 7x7 maze with fixed walls; the agent and the goal start on random free cells. The image (7x7x3 uint8 of
0/1 cells, channels last as MiniGrid's) shows walls and the agent but not the goal; the vector gives the goal's
coordinates and the time left, so the network needs both. Moving into a wall or off the grid is illegal,
and the ``action_mask`` entry says so. The env counts every illegal action it is asked to take (reward
-1 and the episode ends), and appends a line to ``env_config["illegal_log"]`` when one is given, so a
test can prove across processes that none was ever taken.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

LAYOUT = (
    ".......",
    ".##.##.",
    ".#...#.",
    "...#...",
    ".#...#.",
    ".##.##.",
    ".......",
)
MOVES = np.array([(-1, 0), (1, 0), (0, -1), (0, 1)])  # up, down, left, right
MAX_STEPS = 50


class MaskedMaze(gym.Env):  # type: ignore[type-arg]
    metadata = {"render_modes": ["rgb_array"], "render_fps": 8}

    def __init__(self, env_config: dict[str, Any] | None = None, render_mode: str | None = None, **kwargs: Any):
        config = {**(env_config or {}), **kwargs}
        self.render_mode = render_mode or config.get("render_mode")
        self.illegal_log = config.get("illegal_log")
        self.walls = np.array([[c == "#" for c in row] for row in LAYOUT])
        self.free = np.argwhere(~self.walls)
        n = len(LAYOUT)
        self.observation_space = gym.spaces.Dict({
            "image": gym.spaces.Box(0, 1, (n, n, 3), np.uint8),
            "vector": gym.spaces.Box(0.0, 1.0, (3,), np.float32),
            "action_mask": gym.spaces.Box(0, 1, (4,), np.int8),
        })
        self.action_space = gym.spaces.Discrete(4)
        self.illegal_actions = 0
        self.pos = self.goal = np.zeros(2, dtype=np.int64)
        self.t = 0

    def _legal(self) -> np.ndarray:
        nxt = self.pos + MOVES
        n = len(LAYOUT)
        inside = ((nxt >= 0) & (nxt < n)).all(axis=1)
        ok = inside.copy()
        ok[inside] = ~self.walls[nxt[inside, 0], nxt[inside, 1]]
        return ok.astype(np.int8)

    def _obs(self) -> dict[str, np.ndarray]:
        img = np.zeros((*self.walls.shape, 3), dtype=np.uint8)
        img[..., 0] = self.walls
        img[self.pos[0], self.pos[1], 1] = 1
        n = len(LAYOUT) - 1
        vec = np.array([self.goal[0] / n, self.goal[1] / n, 1 - self.t / MAX_STEPS], dtype=np.float32)
        return {"image": img, "vector": vec, "action_mask": self._legal()}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):  # type: ignore[override]
        super().reset(seed=seed)
        i, j = self.np_random.choice(len(self.free), size=2, replace=False)
        self.pos, self.goal, self.t = self.free[i].copy(), self.free[j].copy(), 0
        return self._obs(), {}

    def step(self, action: Any):  # type: ignore[override]
        a = int(action)
        self.t += 1
        if not self._legal()[a]:
            self.illegal_actions += 1
            if self.illegal_log:
                with open(self.illegal_log, "a") as f:
                    f.write(f"{self.pos.tolist()} {a}\n")
            return self._obs(), -1.0, True, False, {"illegal": True}
        self.pos = self.pos + MOVES[a]
        if (self.pos == self.goal).all():
            return self._obs(), 1.0, True, False, {}
        return self._obs(), -0.01, False, self.t >= MAX_STEPS, {}

    def render(self) -> np.ndarray:
        img = self._obs()["image"].copy()
        img[self.goal[0], self.goal[1], 2] = 1
        return np.kron(img * 255, np.ones((16, 16, 1), dtype=np.uint8))


gym.register("MaskedMaze-v0", entry_point=MaskedMaze)
