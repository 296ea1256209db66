"""The searched space: `--param KEY=SPEC` parsed into ordered candidate values, and point identities.

SPEC is `A..B` (every integer from A to B), `A..B:STEP`, `V1,V2,...` (each read as YAML flow, like
--set), a single value, or a YAML flow list `[V1, V2]` when values hold commas themselves
(`patches=[[], [triton-ddtree-verify-width]]`). Values keep the order given: the search treats it as
the axis along which throughput is unimodal and coherence changes at most once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from k26ctl.errors import UsageError
from k26ctl.search.assignment import Assignment, assignment_id, parse_value

RANGE = re.compile(r"^\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*(?::\s*(\d+)\s*)?$")
MAX_VALUES = 4096


@dataclass(frozen=True)
class Param:
    key: str
    values: tuple[Any, ...]

    def index_of(self, value: Any) -> int | None:
        wanted = _ident(value)
        for i, candidate in enumerate(self.values):
            if _ident(candidate) == wanted:
                return i
        return None

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "values": list(self.values)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Param:
        return cls(str(data["key"]), tuple(data["values"]))


def _ident(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def parse_values(spec: str, key: str) -> list[Any]:
    match = RANGE.match(spec)
    if match:
        lo, hi, step_text = int(match[1]), int(match[2]), match[3]
        step = int(step_text) if step_text else 1
        if step < 1:
            raise UsageError(f"--param {key}={spec}: the step must be at least 1", "e.g. 4..24:4")
        if (abs(hi - lo) // step) + 1 > MAX_VALUES:
            raise UsageError(f"--param {key}={spec}: too many values", f"at most {MAX_VALUES}")
        direction = 1 if hi >= lo else -1
        return list(range(lo, hi + direction, direction * step))
    text = spec.strip()
    if text.startswith("["):
        from k26ctl import yamlsafe

        try:
            listed = yamlsafe.load(text, f"--param {key}")
        except yaml.YAMLError:
            listed = None
        if not isinstance(listed, list):
            raise UsageError(f"--param {key}={spec}: not a YAML flow list", "e.g. patches=[[], [NAME]]")
        return listed
    return [parse_value(part) for part in text.split(",") if part.strip()]


def parse_param(text: str) -> Param:
    key, sep, spec = text.partition("=")
    key = key.strip()
    if not sep or not key or not spec.strip():
        raise UsageError(f"--param {text!r}: expected KEY=SPEC", "e.g. --param spec.ddtree.budget=4..24")
    values = parse_values(spec, key)
    if not values:
        raise UsageError(f"--param {text!r}: no values", "e.g. 4..24, 4..24:4 or 4,8,12")
    if len({_ident(v) for v in values}) != len(values):
        raise UsageError(f"--param {key}: a value is listed twice", "give each value once")
    return Param(key, tuple(values))


def check_params(params: Sequence[Param]) -> None:
    if not params:
        raise UsageError("give at least one --param KEY=SPEC", "e.g. --param spec.ddtree.budget=4..24")
    keys = [p.key for p in params]
    if len(set(keys)) != len(keys):
        raise UsageError("a --param key is given twice", "give each key once, with all its values")


def point_id(assignment: Mapping[str, Any]) -> str:
    """The canonical identity of a configuration: the cache key that stops a point being paid twice."""
    return assignment_id(assignment)


def grid(params: Sequence[Param]) -> list[Assignment]:
    """Every combination, the first parameter varying slowest."""
    points: list[Assignment] = [{}]
    for param in params:
        points = [{**point, param.key: value} for point in points for value in param.values]
    return points
