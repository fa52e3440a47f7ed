"""JSON that every parser accepts: ``null`` for NaN and infinities, which ``json.dumps`` would write as
the bare tokens ``NaN`` and ``Infinity`` (not JSON: jq, browsers and most languages reject the file)."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np


def clean(obj: Any) -> Any:
    """``obj`` with numpy scalars and arrays as plain values and every non-finite float as None."""
    if isinstance(obj, dict):
        return {str(k): clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return clean(obj.tolist())
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    return obj


def dumps(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`clean` ``(obj)``; anything else unknown is written as its ``str``."""
    return json.dumps(clean(obj), allow_nan=False, default=str, **kwargs)
