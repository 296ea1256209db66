"""`status` and `logs`: what runs on the host now, whether it matches the profile, and its journal."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from k26ctl.deploy.facts import SHOW_PROPS, read_unit
from k26ctl.deploy.history import DeployRecord, read_history
from k26ctl.deploy.plan import sha256_text
from k26ctl.deploy.readiness import ProbeResult, UnitState
from k26ctl.deploy.session import Connect, open_service
from k26ctl.deploy.wait import check_ready_once
from k26ctl.errors import K26Error
from k26ctl.patches.host import PatchState, patch_status
from k26ctl.patches.model import load_patches
from k26ctl.profile import LoadedProfile
from k26ctl.render import render_unit
from k26ctl.statefile import Records


@dataclass
class StatusReport:
    profile: str
    host: str
    unit: str
    unit_path: str
    props: dict[str, str]
    unit_sha: str | None
    profile_unit_sha: str
    patches: list[PatchState]
    probe: ProbeResult | None
    history: list[DeployRecord] = field(default_factory=list)
    patch_error: str | None = None
    history_problems: list[str] = field(default_factory=list)  # lines of the history that do not read

    @property
    def unit_state(self) -> UnitState:
        return UnitState.from_show(self.props)

    @property
    def unit_matches_profile(self) -> bool:
        return self.unit_sha == self.profile_unit_sha

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "host": self.host,
            "unit": self.unit,
            "unit_path": self.unit_path,
            "service": self.props,
            "unit_sha": self.unit_sha,
            "profile_unit_sha": self.profile_unit_sha,
            "unit_matches_profile": self.unit_matches_profile,
            "ready": self.probe.ok if self.probe else None,
            "probe": self.probe.detail if self.probe else None,
            "patches": [p.to_json() for p in self.patches],
            "patch_error": self.patch_error,
            "history": [r.to_json() for r in self.history],
            "history_problems": self.history_problems,
        }


def host_status(
    loaded: LoadedProfile,
    *,
    accept_new_host_key: bool = False,
    history: int = 5,
    connect: Connect | None = None,
) -> StatusReport:
    profile = loaded.profile
    with open_service(profile, accept_new_host_key=accept_new_host_key, lock=False, connect=connect) as run:
        host, systemd, unit, path = run.host, run.systemd, run.unit, run.unit_path
        props = systemd.show(*SHOW_PROPS)
        text = read_unit(host, path)
        patches: list[PatchState] = []
        patch_error = None
        try:
            patches = patch_status(host, profile, sorted(set(load_patches()) | set(profile.patches)))
        except K26Error as exc:
            patch_error = exc.message
        probe = None
        if UnitState.from_show(props).running:
            try:
                probe = check_ready_once(host, profile)
            except K26Error as exc:
                probe = ProbeResult(False, exc.message)
        kept = read_history(host, profile.service.name) if history else Records[DeployRecord]()
        return StatusReport(
            profile=profile.name or "",
            host=host.name,
            unit=unit,
            unit_path=path,
            props=props,
            unit_sha=sha256_text(text) if text is not None else None,
            profile_unit_sha=sha256_text(render_unit(profile)),
            patches=patches,
            probe=probe,
            history=kept.items[-history:] if history else [],
            patch_error=patch_error,
            history_problems=[p.one_line() for p in kept.problems] if history else [],
        )


def show_logs(
    loaded: LoadedProfile,
    on_line: Callable[[Any], None],
    *,
    lines: int = 50,
    follow: bool = False,
    accept_new_host_key: bool = False,
    connect: Connect | None = None,
) -> None:
    """The unit's last `lines` journal entries, then (with follow) new ones until interrupted."""
    with open_service(
        loaded.profile, accept_new_host_key=accept_new_host_key, lock=False, connect=connect
    ) as run:
        systemd = run.systemd
        entries = systemd.journal(lines=lines)
        for entry in entries:
            on_line(entry)
        if follow:
            cursor = entries[-1].cursor if entries else systemd.cursor_now()
            for entry in systemd.follow(cursor=cursor):
                on_line(entry)
