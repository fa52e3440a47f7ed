"""Where benchmark results go: one JSON file per run under ./bench-results/ (git-ignored), stamped with
the commit, date, host and command that produced it."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import apexrl
from apexrl import strict_json

ROOT = Path(apexrl.__file__).resolve().parent.parent  # on children's PYTHONPATH: a source checkout works uninstalled
RESULTS = Path("bench-results")


def commit() -> str:
    """The checkout's commit (with '+dirty' for uncommitted changes), else the installed version."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=5)
        if head.returncode == 0:
            dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                                   capture_output=True, text=True, timeout=5).stdout.strip()
            return head.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return f"apexrl {apexrl.__version__}"


# The code a benchmark ran is the code when it started: commits made while a long run goes on must not
# relabel it. ``commit_at_end`` is added when the checkout changed meanwhile.
_AT_START = (commit(), datetime.now().isoformat(timespec="seconds"))


def stamp() -> dict[str, Any]:
    end = commit()
    return {"commit": _AT_START[0], **({"commit_at_end": end} if end != _AT_START[0] else {}),
            "started": _AT_START[1], "date": datetime.now().isoformat(timespec="seconds"),
            "host": {"name": platform.node(), "cpus": os.cpu_count(), "platform": platform.platform()},
            "command": " ".join(["apexrl" if sys.argv[0].endswith("apexrl") else sys.argv[0], *sys.argv[1:]])}


def write_result(name: str, data: dict[str, Any], out: str | os.PathLike[str] | None = None) -> Path:
    """Write the stamp plus ``data`` to ``out`` or bench-results/<name>-<date-time>.json; print the path."""
    path = Path(out) if out else RESULTS / f"{name}-{datetime.now():%Y%m%d-%H%M%S}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(strict_json.dumps({**stamp(), **data}, indent=1))
    print(f"wrote {path}")
    return path
