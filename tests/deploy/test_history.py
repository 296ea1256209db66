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


def test_prior_accept_is_the_same_configurations_last_passing_smoke() -> None:
    from k26ctl.deploy.history import prior_accept

    spec: dict[str, object] = {"spec": {"algorithm": "DDTREE", "block_size": 8}, "patches": []}
    other: dict[str, object] = {"spec": {"algorithm": "DDTREE", "block_size": 16}, "patches": []}

    def smoked(accept: float | None, passed: bool, speculative: dict[str, object], when: str) -> DeployRecord:
        smoke = {"ran": True, "passed": passed, "summary": "", "accept_length": accept}
        return rec(profile="p", speculative=speculative, smoke=smoke, time=when)

    records = [
        smoked(3.4, True, spec, "t1"),
        smoked(3.1, True, other, "t2"),  # another configuration
        smoked(1.2, False, spec, "t3"),  # a failed run is no reference
        smoked(None, True, spec, "t4"),  # nor one that measured nothing
    ]
    prior = prior_accept(records, "p", spec)
    assert prior is not None and prior.accept_length == 3.4 and prior.when == "t1"
    assert "deploy history" in prior.source
    assert prior_accept(records, "q", spec) is None
