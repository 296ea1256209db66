"""The ordered candidate values of a numeric/ordered search, from --values or an integer range."""

from __future__ import annotations

import json
from typing import Any

from k26ctl.errors import UsageError
from k26ctl.search.assignment import parse_value

MAX_RANGE = 1_000_000


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def _index(values: list[Any], wanted: Any, flag: str) -> int:
    for i, value in enumerate(values):
        if _same(value, wanted):
            return i
    raise UsageError(f"{flag} {wanted!r} is not one of --values", "give --values that include both ends")


def build_candidates(good: str | None, bad: str | None, values: str | None) -> list[Any]:
    """Candidates ordered from the good end to the bad end.

    With --values the list order is the search order (the first bad one is searched along it);
    --good/--bad then pick the ends inside the list (default: its first and last). Without --values
    both ends must be integers and every integer between them is a candidate.
    """
    if values is not None:
        listed = [parse_value(part) for part in values.split(",") if part.strip()]
        if len({json.dumps(v, sort_keys=True, default=str) for v in listed}) != len(listed):
            raise UsageError("--values lists a value twice", "give each candidate once")
        lo = _index(listed, parse_value(good), "--good") if good is not None else 0
        hi = _index(listed, parse_value(bad), "--bad") if bad is not None else len(listed) - 1
        chosen = listed[lo : hi + 1] if lo <= hi else listed[hi : lo + 1][::-1]
    else:
        if good is None or bad is None:
            raise UsageError("give --good and --bad (or --values)", "e.g. --good 7 --bad 16")
        g, b = parse_value(good), parse_value(bad)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (g, b)):
            raise UsageError(
                f"--good {good!r} / --bad {bad!r}: only integer ends make a range",
                "list the candidates in order with --values v1,v2,...",
            )
        if abs(b - g) > MAX_RANGE:
            raise UsageError(f"the range {g}..{b} is too large", f"at most {MAX_RANGE} candidates")
        step = 1 if b >= g else -1
        chosen = list(range(g, b + step, step))
    if len(chosen) < 2:
        raise UsageError("the good and the bad end are the same value", "give two different values")
    return chosen
