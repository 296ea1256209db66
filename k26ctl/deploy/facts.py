"""Facts: what the host looks like before anything is decided (read-only)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from k26ctl.deploy.history import DeployRecord, last_record, read_history
from k26ctl.deploy.plan import sha256_text
from k26ctl.deploy.readiness import UnitState
from k26ctl.profile import Profile
from k26ctl.remote.base import Host

SHOW_PROPS = (
    "ActiveState",
    "SubState",
    "NRestarts",
    "MainPID",
    "ExecMainStatus",
    "Result",
    "LoadState",
    "UnitFileState",
    "NeedDaemonReload",
)


@dataclass
class HostFacts:
    unit_path: str
    unit_text: str | None
    props: dict[str, str]
    patch_actions: list[Any]  # k26ctl.patches.host.PatchAction, one per known patch
    history: list[DeployRecord] = field(default_factory=list)

    @property
    def unit_sha(self) -> str | None:
        return sha256_text(self.unit_text) if self.unit_text is not None else None

    @property
    def unit_state(self) -> UnitState:
        return UnitState.from_show(self.props)

    @property
    def needs_daemon_reload(self) -> bool:
        return self.props.get("NeedDaemonReload", "no") == "yes"

    @property
    def unit_file_state(self) -> str:
        return self.props.get("UnitFileState", "")

    @property
    def last(self) -> DeployRecord | None:
        return last_record(self.history)

    @property
    def applied_patches(self) -> list[str]:
        return sorted(a.name for a in self.patch_actions if a.state == "applied")


def read_unit(host: Host, path: str) -> str | None:
    raw = host.read_file(path, sudo=True)
    return raw.decode("utf-8", "replace") if raw is not None else None


def gather_facts(host: Host, systemd: Any, profile: Profile, unit_path: str) -> HostFacts:
    from k26ctl.patches.host import plan_patches

    return HostFacts(
        unit_path=unit_path,
        unit_text=read_unit(host, unit_path),
        props=dict(systemd.show(*SHOW_PROPS)),
        patch_actions=list(plan_patches(host, profile)),
        history=read_history(host, profile.service.name),
    )
