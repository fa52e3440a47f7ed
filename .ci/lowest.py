"""Pins for pip (-c) that hold each of apexrl's direct requirements at the lowest version it declares, so
CI tests the floor of every range, not only what pip picks today: the lowest minor release, its newest
patch (``>=13`` becomes ``==13.0.*``, ``>=1.24`` becomes ``==1.24.*``)."""

import re
import sys
import tomllib
from pathlib import Path

project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
for req in project["dependencies"]:
    m = re.match(r"([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*>=\s*([0-9.]+)", req)
    if not m:
        sys.exit(f"no lower bound in {req!r}")
    name, version = m.group(1), m.group(3)
    parts = (version.split(".") + ["0"])[:2] if version.count(".") < 2 else None
    print(f"{name}=={'.'.join(parts)}.*" if parts else f"{name}=={version}")
