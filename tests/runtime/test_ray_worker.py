"""A private run's processes register Ray's add-on serializers (pyarrow, pydantic, starlette) only for the
modules they already use, and never import those modules to register them."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.compat

CHECK = """
import sys
from ray.util import serialization_addons
from apexrl.runtime.ray_worker import lean_serializers

class Context:
    def __init__(self):
        self.types = []
    def _register_cloudpickle_serializer(self, cls, custom_serializer=None, custom_deserializer=None):
        self.types.append(cls.__module__.split(".")[0])
    def _register_cloudpickle_reducer(self, cls, reducer):
        self.types.append(cls.__module__.split(".")[0])

original = serialization_addons.apply
undo = lean_serializers()
bare = Context()
serialization_addons.apply(bare)
print("BARE", sorted(set(bare.types)), [m for m in ("pyarrow", "pydantic", "starlette") if m in sys.modules])
import pyarrow
used = Context()
serialization_addons.apply(used)
print("PYARROW", sorted(set(used.types)), "pydantic" in sys.modules)
undo()
print("UNDONE", serialization_addons.apply is original)
"""


def test_add_on_serializers_only_for_modules_in_use():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120)
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert lines == {"BARE": "[] []", "PYARROW": "['pyarrow'] False", "UNDONE": "True"}, out.stdout + out.stderr
