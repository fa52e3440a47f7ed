"""The Python shapes users bring from RLlib and the Ape-X article: ``ApeX`` (an agent in your own loop) and
``ApexTrainer`` (``apexrl.api.trainer``, the distributed system as an iterative trainer; loaded on use)."""

from apexrl.api.agent import ApeX

__all__ = ["ApeX"]
