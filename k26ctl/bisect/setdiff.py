"""Profiles as flat dotted keys: what differs between two of them (a set search's changes)."""

from __future__ import annotations

import json
from typing import Any

from k26ctl.bisect.plan import Change
from k26ctl.errors import ConfigError
from k26ctl.profile import Profile
from k26ctl.search.assignment import flatten

# Keys that name or describe a profile without changing the deployment.
IGNORED_KEYS = ("name", "description")


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
