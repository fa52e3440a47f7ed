"""The Python shapes users bring from RLlib and the Ape-X article: ``ApeX`` (an agent in your own loop)."""

from apexrl.api.agent import ApeX

__all__ = ["ApeX"]
