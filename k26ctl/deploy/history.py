"""The deploy history kept on the host: one JSON line per deploy or rollback.

It lives on the host (not on the operator's laptop) so every operator sees the same past: the last
speculative settings (smoke decision), the last load time (progress ETA), and what to roll back to.
Each deployed unit text is also kept by checksum next to it, so a rollback does not depend on backup
file names. Appends are atomic (read, add a line, write through a temp file and rename).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from k26ctl.remote.base import Host
from k26ctl.smoke.acceptance import PriorAccept
from k26ctl.statefile import Records

if TYPE_CHECKING:
    from k26ctl.profile import Profile

STATE_ROOT = "/var/lib/k26ctl"
MAX_RECORDS = 1000


def state_dir(service: str) -> str:
    return f"{STATE_ROOT}/{service}"


def history_path(service: str) -> str:
    return f"{state_dir(service)}/history.jsonl"


def unit_copy_path(service: str, unit_sha: str) -> str:
    return f"{state_dir(service)}/units/{unit_sha}.service"


@dataclass
class DeployRecord:
    """One deploy (or rollback) as the host remembers it."""

    time: str
    operator: str
    kind: str  # "deploy" | "rollback"
    profile: str
    fingerprint: str
    unit_path: str
    unit_sha: str | None  # the unit on disk after this run
    unit_copy: str | None  # where that unit's text is kept once a later run replaces it
    previous_unit_sha: str | None  # the unit this run replaced (None: there was none)
    previous_unit_copy: str | None
    unit_backup: str | None  # the timestamped backup the atomic write left beside the unit
    patches: list[str]  # patches applied on the host after this run
    previous_patches: list[str]  # and before it
    speculative: dict[str, Any]
    changed: bool
    restarted: bool
    running_unit_sha: str | None  # the unit the running service was started from
    running_patches: list[str] | None  # the patch set the running service was started with
    load_seconds: float | None
    smoke: dict[str, Any] | None
    verdict: str  # "ok" | "failed" | "rolled-back" | "interrupted"
    message: str = ""
    k26ctl_version: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    gpu_memory_mib: int | None = None  # GPU memory in use (all GPUs) once the server was ready
    # where the restart's time went (deploy.phases.RestartPhases.to_json), None without a restart
    phases: dict[str, Any] | None = None
    sglang_version: str | None = None  # the host's SGLang release this run started
    # what the start could reuse: {"jit_cache": "warm"|"cold"|"unknown", "weights_resident": 0..1}
    start_conditions: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DeployRecord:
        """A record as `to_json` writes it; pydantic's ValidationError names a field of the wrong type."""
        from k26ctl.statefile import validate

        return validate(cls, cls.with_defaults(data))

    @classmethod
    def with_defaults(cls, data: dict[str, Any]) -> dict[str, Any]:
        """`data`'s known keys, with the defaults older k26ctl versions did not write."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        defaults: dict[str, Any] = {
            "operator": "",
            "kind": "deploy",
            "profile": "",
            "fingerprint": "",
            "unit_path": "",
            "unit_sha": None,
            "unit_copy": None,
            "previous_unit_sha": None,
            "previous_unit_copy": None,
            "unit_backup": None,
            "patches": [],
            "previous_patches": [],
            "speculative": {},
            "changed": False,
            "restarted": False,
            "running_unit_sha": None,
            "running_patches": None,
            "load_seconds": None,
            "smoke": None,
            "verdict": "unknown",
        }
        for key, value in defaults.items():
            values.setdefault(key, value)
        values.setdefault("time", "")
        return values

    @property
    def smoke_passed(self) -> bool | None:
        if not self.smoke or not self.smoke.get("ran"):
            return None
        passed = self.smoke.get("passed")
        return bool(passed) if passed is not None else None


def parse_history(text: str) -> list[DeployRecord]:
    """Records in file order; lines that are not valid records are skipped (a hand-edited file)."""
    return read_records(text).items


def read_records(text: str, where: str = "deploy history") -> Records[DeployRecord]:
    """Every line that is a valid record (each field of its type), and a problem naming each other
    line: one bad line never hides the others, and never becomes a record with a wrong field."""
    from k26ctl.statefile import parse_lines

    return parse_lines(
        text.split("\n"), where, lambda record: DeployRecord, prepare=DeployRecord.with_defaults
    )


def serialize(records: Sequence[DeployRecord]) -> str:
    return "".join(json.dumps(r.to_json(), sort_keys=True, default=str) + "\n" for r in records)


def read_history(host: Host, service: str) -> Records[DeployRecord]:
    """The host's history; undecodable bytes replaced, unreadable lines reported with their number."""
    raw = host.read_file(history_path(service), sudo=True)
    if not raw:
        return Records()
    return read_records(raw.decode("utf-8", "replace"), f"{host.name}:{history_path(service)}")


def last_record(records: Sequence[DeployRecord], *, kind: str | None = None) -> DeployRecord | None:
    for record in reversed(records):
        if kind is None or record.kind == kind:
            return record
    return None


def last_load_seconds(records: Sequence[DeployRecord]) -> float | None:
    """The most recent measured load time on this host (for the progress ETA)."""
    for record in reversed(records):
        if record.load_seconds:
            return record.load_seconds
    return None


def last_gpu_memory_mib(records: Sequence[DeployRecord]) -> int | None:
    """GPU memory the ready server held at this host's last successful load (the load progress target)."""
    for record in reversed(records):
        if record.gpu_memory_mib and record.verdict == "ok":
            return record.gpu_memory_mib
    return None


def prior_accept(
    records: Sequence[DeployRecord], profile: str, speculative: dict[str, Any]
) -> PriorAccept | None:
    """The accept length the same configuration (profile name and speculative settings) reached in this
    host's last passing smoke run that measured one: the reference a collapse is judged against."""
    for record in reversed(records):
        if record.profile != profile or record.speculative != speculative or not record.smoke_passed:
            continue
        value = (record.smoke or {}).get("accept_length")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return PriorAccept(float(value), record.time, "this host's deploy history")
    return None


def host_prior_accept(host: Host, profile: Profile) -> PriorAccept | None:
    """`prior_accept` from the host's history; None when it cannot be read (it is only a reference)."""
    from k26ctl.errors import K26Error

    try:
        records = read_history(host, profile.service.name)
    except K26Error:
        return None
    return prior_accept(records.items, profile.name or "", profile.speculative_settings())


def ensure_state_dir(host: Host, service: str) -> None:
    host.run(["mkdir", "-p", f"{state_dir(service)}/units"], sudo=True, check=True)


def keep_current_unit(host: Host, service: str, unit_path: str, unit_sha: str) -> str:
    """Copy the unit about to be replaced into the state directory, named by its checksum, so a
    rollback can restore it exactly (one round trip; a rollback checks the copy's checksum)."""
    dest = unit_copy_path(service, unit_sha)
    script = 'mkdir -p -- "$1" && cp -p -- "$2" "$3.tmp" && mv -f -- "$3.tmp" "$3"'
    argv = ["sh", "-c", script, "sh", f"{state_dir(service)}/units", unit_path, dest]
    host.run(argv, sudo=True, check=True)
    return dest


def append_record(host: Host, service: str, record: DeployRecord, *, current: bytes | None = None) -> None:
    """Add one line. Existing lines are kept as they are (a newer k26ctl may have written more keys).
    `current` is the file as the caller read it under the deploy lock (saves a round trip)."""
    raw = current if current is not None else (host.read_file(history_path(service), sudo=True) or b"")
    lines = [line for line in raw.decode("utf-8", "replace").splitlines() if line.strip()]
    lines = [*lines, serialize([record]).rstrip("\n")][-MAX_RECORDS:]
    data = ("\n".join(lines) + "\n").encode()
    host.write_file_atomic(history_path(service), data, mode=0o644, sudo=True, backup=False)
