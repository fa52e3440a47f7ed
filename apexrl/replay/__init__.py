"""Prioritized replay for Ape-X: sum tree, sampler, array storage and frame de-duplication."""

from apexrl.replay.frame_replay import FramePrioritizedReplay
from apexrl.replay.frames import FrameStackEncoder
from apexrl.replay.prioritized import PrioritizedReplay
from apexrl.replay.sampler import PrioritizedSampler
from apexrl.replay.sum_tree import SumTree

__all__ = ["FramePrioritizedReplay", "FrameStackEncoder", "PrioritizedReplay", "PrioritizedSampler", "SumTree"]
