"""Where benchmark results go: one dated JSON file per run under benchmarks/results/."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def write_result(name: str, data: dict[str, Any], out: str | os.PathLike[str] | None = None) -> Path:
    """Write ``data`` (plus date and host CPU count) to ``out`` or results/<name>-<date-time>.json; print it."""
    path = Path(out) if out else RESULTS / f"{name}-{datetime.now():%Y%m%d-%H%M%S}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"date": datetime.now().isoformat(timespec="seconds"), "host_cpus": os.cpu_count(), **data}
    path.write_text(json.dumps(record, indent=1, default=str))
    print(f"wrote {path}")
    return path
