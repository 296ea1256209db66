"""Reading values out of a JSON document that may not have the shape it should (an edited or hostile
file): a wrong type reads as empty, never as a crash."""

from __future__ import annotations

import json
from typing import Any


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def shown(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={shown(v)}" for k, v in value.items()) or "(none)"
    if value is None:
        return "-"
    return value if isinstance(value, str) else json.dumps(value)
