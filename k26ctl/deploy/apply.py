"""Carrying a plan out on the host: patches, the unit (atomic, with a backup), daemon-reload, enable,
restart. Each function is one host operation the pipeline records as a step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from k26ctl.deploy.plan import PatchChange
from k26ctl.deploy.readiness import UnitState
from k26ctl.deploy.wait import read_unit_state
from k26ctl.patches.host import apply_patches, revert_patches
from k26ctl.profile import Profile
from k26ctl.remote.base import Host, WriteResult


def converge_patches(host: Host, profile: Profile, changes: list[PatchChange]) -> list[Any]:
    """Revert what is no longer wanted first, then apply what is; returns the engine's results."""
    results: list[Any] = []
    to_revert = [c.name for c in changes if c.action == "revert"]
    to_apply = [c.name for c in changes if c.action == "apply"]
    if to_revert:
        results.extend(revert_patches(host, profile, to_revert))
    if to_apply:
        results.extend(apply_patches(host, profile, to_apply))
    return results


def write_unit(host: Host, path: str, text: str) -> WriteResult:
    return host.write_file_atomic(path, text.encode(), mode=0o644, sudo=True, backup=True)


def remove_unit(host: Host, systemd: Any, unit: str, path: str) -> None:
    """Used by a rollback to a host that had no unit before the first deploy."""
    host.run(["systemctl", "disable", "--now", unit], sudo=True)
    host.run(["rm", "-f", "--", path], sudo=True, check=True)
    systemd.daemon_reload()


def enable_unit(host: Host, unit: str) -> None:
    host.run(["systemctl", "enable", unit], sudo=True, check=True)


@dataclass(frozen=True)
class Restarted:
    cursor: str | None  # journal cursor taken before the restart
    baseline: UnitState  # the unit right after the restart (new MainPID, restart counter)
    armed: bool  # nothing else can log for the unit after the cursor (it was inactive or failed)


def restart_service(
    host: Host, systemd: Any, unit: str, before: UnitState, cursor: str | None = None
) -> Restarted:
    """Restart; `cursor` may have been taken earlier (any time after the lock and before this)."""
    if cursor is None:
        cursor = systemd.cursor_now()
    # Deliberate restarts count against StartLimitBurst like crashes do; a deploy is not a crash loop,
    # so the counter (and a failed state) is cleared first. Waiting for systemctl to say "start request
    # repeated too quickly" is not enough: SGLang ends by its own SIGKILL after a SIGTERM drain, the
    # stop leaves Result=signal, and systemctl then blames "a fatal signal" for the refused start.
    systemd.reset_failed()
    systemd.restart()
    # An old process (running, stopping, or crash-looping in auto-restart) may still log after the
    # cursor: its lines are ignored until systemd says the new one started.
    quiet = before.active_state in ("inactive", "failed")
    return Restarted(cursor, read_unit_state(systemd), quiet)
