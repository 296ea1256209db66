"""History lines: round trip, tolerance of hand edits and newer keys, rollback target."""

from __future__ import annotations

import json

from k26ctl.deploy.history import DeployRecord, last_load_seconds, parse_history, serialize
from k26ctl.deploy.restore import rollback_target


def rec(**kw: object) -> DeployRecord:
    return DeployRecord.from_json({"time": "2026-11-30T08:00:00Z", **kw})


def test_round_trip() -> None:
    r = rec(profile="ddtree-b16", unit_sha="ab" * 32, patches=["p"], load_seconds=3.2, verdict="ok")
    back = parse_history(serialize([r]))
    assert back == [r]


def test_bad_lines_and_unknown_keys_are_tolerated() -> None:
    text = "not json\n" + json.dumps({"time": "t", "verdict": "ok", "from_the_future": 1}) + "\n\n[1]\n"
    records = parse_history(text)
    assert len(records) == 1 and records[0].verdict == "ok"


def test_last_load_seconds() -> None:
    records = [rec(load_seconds=3.0), rec(load_seconds=None), rec(load_seconds=4.5), rec()]
    assert last_load_seconds(records) == 4.5
    assert last_load_seconds([]) is None


def test_rollback_target_is_the_last_change() -> None:
    records = [rec(changed=True, unit_sha="a"), rec(changed=True, unit_sha="b", previous_unit_sha="a"), rec()]
    found = rollback_target(records)
    assert found is not None and found[0] == 1 and found[1].previous_unit_sha == "a"
    assert rollback_target([rec(), rec()]) is None
