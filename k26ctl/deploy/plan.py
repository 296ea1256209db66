"""The plan: what a deploy would change on the host, computed from facts without any I/O.

`--check` prints it and stops; `--diff` shows its unified diffs; apply carries it out. Keeping it pure
means check mode tells the truth: the same function decides what a dry run reports and what a real
run does.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from k26ctl.deploy.history import DeployRecord
from k26ctl.deploy.readiness import UnitState


def sha256_text(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


_NO_EOL = "\\ No newline at end of file"


def unified_diff(old: str | None, new: str | None, path: str) -> str:
    """A unified diff between the host's text and the profile's text ('' when equal)."""
    old_lines = (old or "").splitlines(keepends=True)
    new_lines = (new or "").splitlines(keepends=True)
    diff = difflib.unified_diff(
        old_lines,
        new_lines,
        fromfile=f"{path} (on host)" if old is not None else "/dev/null",
        tofile=f"{path} (from profile)" if new is not None else "/dev/null",
    )
    return "".join(line if line.endswith("\n") else f"{line}\n{_NO_EOL}\n" for line in diff)


@dataclass(frozen=True)
class PatchChange:
    name: str
    action: str  # "apply" | "revert"
    reason: str
    diff: str = ""


@dataclass(frozen=True)
class UnitChange:
    path: str
    current_sha: str | None
    desired_sha: str
    diff: str

    @property
    def exists(self) -> bool:
        return self.current_sha is not None

    @property
    def changed(self) -> bool:
        return self.current_sha != self.desired_sha


@dataclass
class Plan:
    unit: UnitChange
    patches: list[PatchChange] = field(default_factory=list)
    daemon_reload: bool = False
    daemon_reload_reason: str = ""
    enable: bool = False
    restart: bool = False
    restart_reasons: list[str] = field(default_factory=list)
    smoke: bool = False
    smoke_reason: str = ""

    @property
    def has_changes(self) -> bool:
        """Anything that changes the host or the running service."""
        return self.unit.changed or bool(self.patches) or self.daemon_reload or self.enable or self.restart

    def change_lines(self) -> list[str]:
        """One line per change, in the order apply carries them out."""
        lines = [f"patch {p.action} {p.name}: {p.reason}" for p in self.patches]
        if self.unit.changed:
            verb = "update" if self.unit.exists else "create"
            lines.append(f"unit {verb} {self.unit.path}")
        if self.daemon_reload:
            lines.append(f"daemon-reload ({self.daemon_reload_reason})")
        if self.enable:
            lines.append("enable the unit (start at boot)")
        if self.restart:
            lines.append(f"restart ({'; '.join(self.restart_reasons)})")
        return lines

    def diff_text(self) -> str:
        parts = [self.unit.diff] if self.unit.diff else []
        parts.extend(p.diff for p in self.patches if p.diff)
        return "".join(part if part.endswith("\n") else part + "\n" for part in parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "unit": {
                "path": self.unit.path,
                "current_sha": self.unit.current_sha,
                "desired_sha": self.unit.desired_sha,
                "changed": self.unit.changed,
            },
            "patches": [{"name": p.name, "action": p.action, "reason": p.reason} for p in self.patches],
            "daemon_reload": self.daemon_reload,
            "enable": self.enable,
            "restart": self.restart,
            "restart_reasons": self.restart_reasons,
            "smoke": self.smoke,
            "smoke_reason": self.smoke_reason,
            "changes": self.change_lines(),
        }


def patch_changes(actions: Sequence[Any]) -> tuple[list[PatchChange], list[str]]:
    """The patch engine's converge actions (k26ctl.patches.host.PatchAction) as plan entries, and
    the patches applied on the host now."""
    changes = [
        PatchChange(a.name, a.action, a.message, a.diff) for a in actions if a.action in ("apply", "revert")
    ]
    applied = sorted(a.name for a in actions if a.state == "applied")
    return changes, applied


def smoke_decision(
    option: bool | None,
    *,
    on_spec_change: bool,
    speculative: Mapping[str, Any],
    last: DeployRecord | None,
) -> tuple[bool, str]:
    """Smoke when asked, or when the speculative settings differ from the last deploy's, or when the
    last deploy did not end well (its settings were never proven)."""
    if option is True:
        return True, "--smoke"
    if option is False:
        return False, "--no-smoke"
    if not on_spec_change:
        return False, "smoke.on_spec_change is off"
    if last is None:
        return True, "first deploy recorded on this host"
    if dict(last.speculative) != dict(speculative):
        return True, "speculative settings changed since the last deploy"
    if last.verdict != "ok":
        return True, f"the last deploy's verdict was {last.verdict}"
    return False, "speculative settings unchanged since the last good deploy"


def compute_plan(
    *,
    unit_path: str,
    desired_unit: str,
    current_unit: str | None,
    needs_daemon_reload: bool,
    unit_state: UnitState,
    unit_file_state: str,
    patch_changes: Sequence[PatchChange],
    applied_patches: Sequence[str],
    last: DeployRecord | None,
    force: bool,
    smoke: tuple[bool, str],
) -> Plan:
    current_sha = sha256_text(current_unit) if current_unit is not None else None
    unit = UnitChange(
        path=unit_path,
        current_sha=current_sha,
        desired_sha=sha256_text(desired_unit),
        diff=unified_diff(current_unit, desired_unit, unit_path) if current_unit != desired_unit else "",
    )
    plan = Plan(unit=unit, patches=list(patch_changes))
    plan.smoke, plan.smoke_reason = smoke
    if unit.changed:
        plan.daemon_reload, plan.daemon_reload_reason = True, "the unit file changes"
    elif needs_daemon_reload:
        plan.daemon_reload, plan.daemon_reload_reason = True, "systemd has not loaded the unit on disk"
    plan.enable = unit_file_state not in ("enabled", "enabled-runtime", "static", "indirect", "alias")

    reasons = plan.restart_reasons
    if unit.changed:
        reasons.append("the unit changed")
    elif needs_daemon_reload:
        reasons.append("the loaded unit differs from the one on disk")
    if plan.patches:
        reasons.append("the SGLang tree changes")
    if not unit_state.running:
        reasons.append(f"the service is not running ({unit_state.active_state or 'unknown'})")
    elif not unit.changed and last is not None and last.running_unit_sha not in (None, current_sha):
        reasons.append("the running service was started from another unit than the one on disk")
    elif (
        not plan.patches
        and last is not None
        and last.running_patches is not None
        and sorted(last.running_patches) != sorted(applied_patches)
    ):
        reasons.append("the SGLang tree changed since the running service started")
    if force and not reasons:
        reasons.append("--force")
    plan.restart = bool(reasons)
    return plan
