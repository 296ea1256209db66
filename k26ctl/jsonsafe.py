"""JSON from untrusted sources (server answers, JSON Lines files, logs) with limits.

`json.loads` alone raises RecursionError on deep nesting and ValueError past 4300-digit integers,
and turns `1e999` into infinity. `loads` turns each of these into one `JSONRefused` (a ValueError)
with a short reason, so a caller reports it as bad input instead of a traceback.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 64  # real answers and records nest a handful of levels
MAX_NUMBER_CHARS = 64


class JSONRefused(ValueError):
    """Not JSON, or JSON beyond the limits (depth, number size, non-finite numbers)."""


def _parse_int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise JSONRefused(f"number with {len(text)} digits (limit {MAX_NUMBER_CHARS})")
    return int(text)


def _parse_float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise JSONRefused(f"number with {len(text)} characters (limit {MAX_NUMBER_CHARS})")
    value = float(text)
    if not math.isfinite(value):
        raise JSONRefused(f"number {text[:20]} is out of range")
    return value


def _parse_constant(name: str) -> float:
    raise JSONRefused(f"{name} is not JSON")


def depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of a parsed document, counting stops just past `limit`."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, level)
            if deepest > limit:
                return deepest
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, level + 1) for child in children)
    return deepest


def loads(data: bytes | str, *, max_depth: int = MAX_DEPTH) -> Any:
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONRefused(f"not UTF-8 (byte {exc.start})") from None
    try:
        value = json.loads(
            data, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant
        )
    except RecursionError:
        raise JSONRefused(f"nested deeper than {max_depth} levels") from None
    except json.JSONDecodeError as exc:
        raise JSONRefused(f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except JSONRefused:
        raise
    except ValueError as exc:
        raise JSONRefused(str(exc)) from None
    # each level opens a bracket: a document with no more brackets than the limit is not walked
    if data.count("{") + data.count("[") > max_depth and depth(value, max_depth) > max_depth:
        raise JSONRefused(f"nested deeper than {max_depth} levels")
    return value
