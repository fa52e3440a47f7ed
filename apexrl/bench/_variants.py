"""Config variants on a preset, as ``bench sweep`` and ``bench update`` take them on the command line."""

from __future__ import annotations

import argparse

PRESET_LABEL = "(preset)"


def add_variant_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", default="cartpole")
    p.add_argument("--variant", action="append", default=None, metavar="'KEY=VALUE KEY=VALUE'",
                   help="space-separated overrides on the preset; repeat for more variants ('' = the preset)")


def variant_list(a: argparse.Namespace) -> list[str]:
    """The ``--variant`` values in order; the preset alone when none was given."""
    return a.variant if a.variant is not None else [""]


def label(variant: str) -> str:
    return variant or PRESET_LABEL
