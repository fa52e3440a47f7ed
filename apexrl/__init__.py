"""apexrl: Ape-X (Horgan et al., 2018) on PyTorch and Ray."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "train"]


def train(*args, **kwargs):  # noqa: ANN002, ANN003 - thin lazy re-export
    """Train with a Config; see :func:`apexrl.runtime.driver.train`."""
    from apexrl.runtime.driver import train as _train

    return _train(*args, **kwargs)
