"""The plan from facts: unit diff, patches, daemon-reload, restart reasons, smoke decision."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from k26ctl.deploy.history import DeployRecord
from k26ctl.deploy.plan import (
    Plan,
    compute_plan,
    patch_changes,
    sha256_text,
    smoke_decision,
    unified_diff,
)
from k26ctl.deploy.readiness import UnitState

OLD = "[Service]\nExecStart=/usr/bin/python -m sglang.launch_server --speculative-ddtree-budget 7\n"
NEW = "[Service]\nExecStart=/usr/bin/python -m sglang.launch_server --speculative-ddtree-budget 16\n"
RUNNING = UnitState("active", "running", 0, 100)
SPEC = {"spec": {"algorithm": "DDTREE", "ddtree": {"budget": 16}}, "patches": []}


def record(**kw: Any) -> DeployRecord:
    base: dict[str, Any] = {
        "time": "2026-11-30T08:00:00Z",
        "speculative": SPEC,
        "verdict": "ok",
        "running_unit_sha": sha256_text(NEW),
        "running_patches": [],
    }
    base.update(kw)
    return DeployRecord.from_json(base)


def plan(**kw: Any) -> Plan:
    args: dict[str, Any] = {
        "unit_path": "/etc/systemd/system/sglang.service",
        "desired_unit": NEW,
        "current_unit": NEW,
        "needs_daemon_reload": False,
        "unit_state": RUNNING,
        "unit_file_state": "enabled",
        "patch_changes": [],
        "applied_patches": [],
        "last": record(),
        "force": False,
        "smoke": (False, "unchanged"),
    }
    args.update(kw)
    return compute_plan(**args)


def test_identical_host_means_nothing_to_do() -> None:
    p = plan()
    assert not p.has_changes and not p.restart and p.change_lines() == [] and p.diff_text() == ""


def test_changed_unit_writes_reloads_restarts_with_a_diff() -> None:
    p = plan(current_unit=OLD)
    assert p.unit.changed and p.daemon_reload and p.restart
    assert "the unit changed" in p.restart_reasons
    diff = p.diff_text()
    assert "-ExecStart=/usr/bin/python -m sglang.launch_server --speculative-ddtree-budget 7" in diff
    assert "+ExecStart=/usr/bin/python -m sglang.launch_server --speculative-ddtree-budget 16" in diff
    assert p.change_lines()[0] == "unit update /etc/systemd/system/sglang.service"


def test_first_deploy_creates_and_enables() -> None:
    p = plan(current_unit=None, unit_state=UnitState("inactive", "dead"), unit_file_state="", last=None)
    assert p.unit.changed and not p.unit.exists and p.enable and p.restart
    assert p.unit.diff.startswith("--- /dev/null")
    assert any("not running" in r for r in p.restart_reasons)


def test_pending_daemon_reload_alone_restarts() -> None:
    p = plan(needs_daemon_reload=True)
    assert p.daemon_reload and p.restart and not p.unit.changed


def test_stopped_service_is_started() -> None:
    p = plan(unit_state=UnitState("failed", "failed", 3, 0))
    assert p.restart and not p.daemon_reload


def test_force_restarts_an_unchanged_host() -> None:
    p = plan(force=True)
    assert p.restart and p.restart_reasons == ["--force"]


def test_pending_restart_from_an_interrupted_deploy_is_not_lost() -> None:
    # The unit on disk was written by a deploy that never restarted the service.
    p = plan(last=record(running_unit_sha=sha256_text(OLD)))
    assert p.restart and not p.unit.changed


def test_patch_set_changed_since_the_service_started() -> None:
    p = plan(applied_patches=["triton-ddtree-verify-width"], last=record(running_patches=[]))
    assert p.restart


@dataclass
class Action:
    name: str
    action: str
    state: str
    message: str = ""
    diff: str = ""


def test_patch_actions_become_plan_entries() -> None:
    changes, applied = patch_changes(
        [
            Action("a", "apply", "pending", "wanted", "--- a\n+++ b\n"),
            Action("b", "none", "applied"),
            Action("c", "revert", "applied", "not listed"),
            Action("d", "none", "not-needed"),
        ]
    )
    assert [(c.name, c.action) for c in changes] == [("a", "apply"), ("c", "revert")]
    assert applied == ["b", "c"]
    p = plan(patch_changes=changes)
    assert p.restart and "the SGLang tree changes" in p.restart_reasons
    assert p.change_lines()[:2] == ["patch apply a: wanted", "patch revert c: not listed"]
    assert "+++ b" in p.diff_text()


def test_smoke_decision() -> None:
    assert smoke_decision(True, on_spec_change=False, speculative=SPEC, last=record())[0]
    assert not smoke_decision(False, on_spec_change=True, speculative=SPEC, last=None)[0]
    assert smoke_decision(None, on_spec_change=True, speculative=SPEC, last=None)[0]
    assert not smoke_decision(None, on_spec_change=True, speculative=SPEC, last=record())[0]
    changed = {**SPEC, "spec": {"algorithm": "DDTREE", "ddtree": {"budget": 7}}}
    run, why = smoke_decision(None, on_spec_change=True, speculative=changed, last=record())
    assert run and "changed" in why
    run, why = smoke_decision(None, on_spec_change=True, speculative=SPEC, last=record(verdict="failed"))
    assert run and "failed" in why
    assert not smoke_decision(None, on_spec_change=False, speculative=changed, last=record())[0]


def test_unified_diff_marks_missing_final_newline() -> None:
    diff = unified_diff("a\n", "a\nb", "/x")
    assert "+b\n\\ No newline at end of file\n" in diff


def test_plan_json_is_serializable() -> None:
    import json

    doc = plan(current_unit=OLD).to_json()
    assert json.loads(json.dumps(doc))["unit"]["changed"] is True
