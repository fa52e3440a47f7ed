"""The board as a Ray actor: no CPU of its own, in a light worker (neither torch nor gymnasium)."""

from __future__ import annotations

import ray

from apexrl.runtime.board import Board
from apexrl.runtime.ray_worker import LIGHT

BoardWorker = ray.remote(num_cpus=0, **LIGHT)(Board)
