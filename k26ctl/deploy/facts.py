"""Facts: what the host looks like before anything is decided (read-only)."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from k26ctl.deploy.history import DeployRecord, history_path, last_record, read_records
from k26ctl.deploy.plan import sha256_text
from k26ctl.deploy.readiness import UnitState
from k26ctl.errors import PatchError
from k26ctl.patches.host import SGLangTree, locate_sglang, plan_patches
from k26ctl.profile import Profile
from k26ctl.remote.base import Host

SHOW_PROPS = (
    "DynamicUser",  # a drop-in's DynamicUser=yes changes where the JIT caches can live
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
    history_raw: bytes | None = None  # the file as read (None: no history yet)
    history_problems: list[str] = field(default_factory=list)  # its lines that do not read, one each
    sglang_version: str | None = None  # the host's SGLang release, when it can be told

    @property
    def patch_states(self) -> dict[str, str]:
        return {a.name: a.state for a in self.patch_actions}

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
    """Independent reads run side by side over the one connection: each is a round trip, and a
    deploy that changes nothing is mostly these. The host's Python is asked once where SGLang is
    (its version, and the tree the patches are read from)."""
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="k26ctl-facts") as pool:
        located = pool.submit(locate_sglang, host, profile) if profile.sglang.version is None else None
        unit_text = pool.submit(read_unit, host, unit_path)
        props = pool.submit(systemd.show, *SHOW_PROPS)
        locate = located.result if located is not None else None
        actions = pool.submit(lambda: plan_patches(host, profile, locate=locate))
        history = pool.submit(host.read_file, history_path(profile.service.name), sudo=True)
        raw_history = history.result()
        where = f"{host.name}:{history_path(profile.service.name)}"
        kept = read_records(raw_history.decode("utf-8", "replace"), where) if raw_history else None
        return HostFacts(
            unit_path=unit_path,
            unit_text=unit_text.result(),
            props=dict(props.result()),
            patch_actions=list(actions.result()),
            history=kept.items if kept else [],
            history_raw=raw_history,
            history_problems=[problem.one_line() for problem in kept.problems] if kept else [],
            sglang_version=_version(located) if located is not None else profile.sglang.version,
        )


def _version(located: Future[SGLangTree]) -> str | None:
    """The host's SGLang version; None when its tree cannot be found (patches report that)."""
    try:
        return located.result().version
    except PatchError:
        return None
