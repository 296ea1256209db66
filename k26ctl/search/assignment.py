"""A configuration to deploy as dotted profile keys, and the profile with those keys set.

Shared by every search (bisect-config, sweep): an `Assignment` names the keys that differ from the
base profile; `assignment_id` is its identity in a session's history.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml
from pydantic import BaseModel

from k26ctl.profile import LoadedProfile, Profile, apply_overrides, profile_from_data

# A configuration to test: dotted profile keys and the values to give them on top of the base profile.
Assignment = dict[str, Any]


def assignment_id(assignment: Mapping[str, Any]) -> str:
    """A stable text identity for an assignment (the key of the verdict history)."""
    return json.dumps(dict(sorted(assignment.items())), sort_keys=True, separators=(",", ":"), default=str)


def describe(assignment: Mapping[str, Any]) -> str:
    if not assignment:
        return "(base profile, no change)"
    return " ".join(f"{key}={json.dumps(value, default=str)}" for key, value in sorted(assignment.items()))


def parse_value(text: str) -> Any:
    """A value as the user wrote it, read as YAML flow (like --set): '7' -> 7, 'x' -> 'x'."""
    text = text.strip()
    try:
        return yaml.safe_load(text) if text else ""
    except yaml.YAMLError:
        return text


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings become dotted keys; lists and scalars are leaves."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{dotted}."))
        else:
            flat[dotted] = value
    return flat


def _is_model_field(path: list[str]) -> bool:
    model: type[BaseModel] | None = Profile
    for part in path:
        if model is None or part not in model.model_fields:
            return False
        annotation = model.model_fields[part].annotation
        model = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    return True


def _remove(data: dict[str, Any], path: list[str]) -> None:
    node: Any = data
    for part in path[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(path[-1], None)


def with_assignment(base: LoadedProfile, assignment: Assignment) -> LoadedProfile:
    """`base` with the given dotted keys set, validated as a whole profile."""
    if not assignment:
        return base
    data = json.loads(json.dumps(base.data, default=str))
    overrides = []
    for key, value in sorted(assignment.items()):
        path = key.split(".")
        if value is None and not _is_model_field(path):
            _remove(data, path)
        else:
            overrides.append(f"{key}={json.dumps(value)}")
    merged = apply_overrides(data, overrides)
    where = f"{base.path} with {', '.join(overrides) or 'keys removed'}"
    profile = profile_from_data(merged, where)
    if profile.name is None:
        profile = profile.model_copy(update={"name": base.profile.name})
    return LoadedProfile(
        profile=profile,
        path=base.path,
        chain=base.chain,
        overrides=[*base.overrides, *overrides],
        data=merged,
    )
