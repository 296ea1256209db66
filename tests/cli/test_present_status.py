"""The text of `k26ctl status`, drawn by cli/present/status.py from the library's StatusReport."""

from __future__ import annotations

from k26ctl.cli.present.status import status_text
from k26ctl.deploy.history import DeployRecord
from k26ctl.deploy.readiness import ProbeResult
from k26ctl.deploy.status import StatusReport
from k26ctl.patches.host import PatchState


def _record(**changes: object) -> DeployRecord:
    fields: dict[str, object] = dict(
        time="2026-12-01T10:00:00Z", operator="ops@box", kind="deploy", profile="ddtree-b7.yaml",
        fingerprint="f", unit_path="/etc/systemd/system/sglang.service", unit_sha="0123456789abcdef",
        unit_copy=None, previous_unit_sha=None, previous_unit_copy=None, unit_backup=None, patches=[],
        previous_patches=[], speculative={}, changed=True, restarted=True, running_unit_sha=None,
        running_patches=None, load_seconds=412.25, smoke=None, verdict="ok",
    )  # fmt: skip
    fields.update(changes)
    return DeployRecord(**fields)  # type: ignore[arg-type]


def _report(**changes: object) -> StatusReport:
    fields: dict[str, object] = dict(
        profile="ddtree-b7.yaml", host="gpu1", unit="sglang.service",
        unit_path="/etc/systemd/system/sglang.service",
        props={"ActiveState": "active", "SubState": "running", "MainPID": "4242", "NRestarts": "1"},
        unit_sha="aa", profile_unit_sha="aa", patches=[], probe=ProbeResult(True, "200"),
    )  # fmt: skip
    fields.update(changes)
    return StatusReport(**fields)  # type: ignore[arg-type]


def test_a_running_service_that_matches_its_profile() -> None:
    assert status_text(_report()) == (
        "sglang.service on gpu1: active/running, pid 4242, restarts 1\n"
        "unit /etc/systemd/system/sglang.service: matches the profile\n"
        "ready: yes"
    )


def test_drift_patches_and_history() -> None:
    report = _report(
        unit_sha="bb",
        props={"ActiveState": "failed", "SubState": "failed", "MainPID": "0", "NeedDaemonReload": "yes"},
        probe=ProbeResult(False, "connection refused"),
        patches=[PatchState("triton-ddtree-verify-width", "pending", "", "/opt/x.py")],
        history=[_record(), _record(kind="rollback", restarted=False, load_seconds=None, verdict="failed")],
    )
    assert status_text(report).splitlines() == [
        "sglang.service on gpu1: failed/failed, pid 0, restarts 0",
        "unit /etc/systemd/system/sglang.service: differs from the profile (daemon-reload pending)",
        "ready: no (connection refused)",
        "patch triton-ddtree-verify-width: pending",
        "history (newest last):",
        "  2026-12-01T10:00:00Z deploy   ddtree-b7.yaml               ok         unit 0123456789ab restarted"
        " load 412.2s by ops@box",
        "  2026-12-01T10:00:00Z rollback ddtree-b7.yaml               failed     unit 0123456789ab"
        " by ops@box",
    ]


def test_a_missing_unit_and_unknown_patches() -> None:
    text = status_text(_report(unit_sha=None, probe=None, patch_error="sudo wants a password"))
    assert text.splitlines()[1:] == [
        "unit /etc/systemd/system/sglang.service: missing",
        "ready: no (-)",
        "patches: unknown (sudo wants a password)",
    ]


def test_unreadable_history_lines_are_listed_after_the_readable_ones() -> None:
    from k26ctl.deploy.history import read_records, serialize

    good = serialize([_record()]).rstrip("\n")
    text = "\n".join([good, '{"time": "t", "load_seconds": "fast"}', good, "[1]"]) + "\n"
    kept = read_records(text, "gpu1:/var/lib/k26ctl/sglang/history.jsonl")
    assert len(kept.items) == 2
    shown = status_text(_report(history=kept.items, history_problems=[p.one_line() for p in kept.problems]))
    assert shown.splitlines()[-2:] == [
        "  history line skipped: gpu1:/var/lib/k26ctl/sglang/history.jsonl:2: load_seconds: "
        "Input should be a valid number, unable to parse string as a number",
        "  history line skipped: gpu1:/var/lib/k26ctl/sglang/history.jsonl:4: a JSON list, not an object",
    ]
    assert shown.count(" deploy   ddtree-b7.yaml") == 2
