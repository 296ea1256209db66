"""Profiles as flat dotted keys: what differs between two of them, and a profile with some keys changed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from k26ctl.bisect.plan import Assignment, Change
from k26ctl.errors import ConfigError
from k26ctl.profile import LoadedProfile, Profile, apply_overrides, profile_from_data

# Keys that name or describe a profile without changing the deployment.
IGNORED_KEYS = ("name", "description")


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


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def differing_keys(good: Profile, bad: Profile) -> list[Change]:
    """Every dotted key whose value differs (model defaults included), sorted by key.

    A key present on one side only (inside a free-form map such as service.environment) is None on
    the other side, which removes it when applied.
    """
    flat_good = flatten(good.model_dump(mode="json"))
    flat_bad = flatten(bad.model_dump(mode="json"))
    changes = []
    for key in sorted(set(flat_good) | set(flat_bad)):
        if key in IGNORED_KEYS:
            continue
        a, b = flat_good.get(key), flat_bad.get(key)
        if not _same(a, b):
            changes.append(Change(key, a, b))
    hosts = [c.key for c in changes if c.key.startswith("host.")]
    if hosts:
        raise ConfigError(
            f"the good and the bad profile point at different hosts ({', '.join(hosts)})",
            "a search runs on one host: give both the same host (or --set host....=... for both)",
        )
    return changes


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
