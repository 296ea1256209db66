"""Where every member of a fleet stands during and after a roll, kept locally and on each host.

Local: $XDG_STATE_HOME/k26ctl/fleet/<fleet>/run.json (the current or last run, rewritten atomically
on every change) and runs.jsonl (one line per finished run). On each host the member's own changes
are appended to /var/lib/k26ctl/<service>/fleet.jsonl, beside its deploy history.

The record is the roll's memory of who may serve: after a router restart (which forgets every
worker) the in-service set is rebuilt from it, and never from the router.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from k26ctl.documents import tagged

# Phases of one member. In service: the router may send it traffic.
OLD = "old"  # serving the config it had before this run
NEW = "new"  # serving the target config
REMOVING = "removing"  # DELETE sent, not yet confirmed gone
DRAINING = "draining"  # out of the router, old config, requests finishing
DEPLOYING = "deploying"  # out of the router, the deploy pipeline runs
VERIFIED = "verified"  # out of the router, target config deployed and smoke passed
ADDING = "adding"  # POST sent, waiting for listed + healthy
SOAKING = "soaking"  # in the router, watched
FAILED = "failed"  # out of the router after a failed step
INTERRUPTED = "interrupted"  # out of the router after Ctrl-C

IN_SERVICE = frozenset({OLD, NEW, SOAKING})
IN_FLIGHT = frozenset({REMOVING, ADDING})  # the router's answer decides; resync leaves them alone
OUT_OF_SERVICE = frozenset({DRAINING, DEPLOYING, VERIFIED, FAILED, INTERRUPTED})

RUNNING, DONE, HALTED, STOPPED = "running", "done", "halted", "interrupted"
PHASES = IN_SERVICE | IN_FLIGHT | OUT_OF_SERVICE


def describe(phase: str, config: str) -> str:
    """The operator's words for where a member stands."""
    if phase == OLD:
        return "old config, serving"
    if phase in (NEW, SOAKING):
        return "new config, serving" + (" (soaking)" if phase == SOAKING else "")
    where = {"old": "old config", "new": "new config", "unknown": "config unknown"}.get(config, config)
    if phase == FAILED:
        return f"failed, out of router ({where})"
    if phase == INTERRUPTED:
        return f"interrupted, out of router ({where})"
    return f"out of router, {phase} ({where})"


@dataclass
class MemberState:
    phase: str = OLD
    config: str = "old"  # old | new | unknown: what the host runs as far as known
    detail: str = ""
    fingerprint: str | None = None  # the target profile's fingerprint once deployed
    seconds: dict[str, float] = field(default_factory=dict)  # per step
    updated: str = ""
    gateway: dict[str, Any] = field(default_factory=dict)  # SMG: its priority, cost at take-out

    @property
    def in_service(self) -> bool:
        return self.phase in IN_SERVICE


@dataclass
class RunRecord:
    fleet: str
    run_id: str
    action: str  # deploy | rollback
    status: str = RUNNING
    started: str = ""
    finished: str = ""
    reason: str = ""
    targets: dict[str, str] = field(default_factory=dict)  # member -> target fingerprint
    members: dict[str, MemberState] = field(default_factory=dict)

    @classmethod
    def new(cls, fleet: str, action: str, names: list[str], targets: dict[str, str]) -> RunRecord:
        return cls(
            fleet=fleet,
            run_id=time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3),
            action=action,
            started=now_iso(),
            targets=dict(targets),
            members={n: MemberState(updated=now_iso()) for n in names},
        )

    @property
    def unfinished(self) -> bool:
        return self.status in (RUNNING, HALTED, STOPPED)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRecord:
        """A record as `to_json` writes it; pydantic's ValidationError names a wrong field, and a phase
        or status this version does not know is refused (it would be read as out of service)."""
        from k26ctl.statefile import validate

        return validate(RunRecord, data)

    def __post_init__(self) -> None:
        if self.status not in (RUNNING, DONE, HALTED, STOPPED):
            raise ValueError(f"status: unknown run status {self.status[:40]!r}")
        for name, member in self.members.items():
            if member.phase not in PHASES:
                raise ValueError(f"members.{name[:40]}.phase: unknown phase {member.phase[:40]!r}")


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def state_dir(fleet: str) -> Path:
    from k26ctl import statedir

    return statedir.state_root() / "k26ctl" / "fleet" / fleet


class LocalStore:
    """The local copy of the run record (atomic rewrite; finished runs appended to runs.jsonl)."""

    def __init__(self, fleet: str, root: Path | None = None) -> None:
        self.dir = root or state_dir(fleet)

    @property
    def path(self) -> Path:
        return self.dir / "run.json"

    def load(self) -> RunRecord | None:
        from k26ctl import statefile

        if not os.path.lexists(self.path):
            return None
        return statefile.read_document(
            self.path,
            RunRecord,
            what="fleet run record",
            hint=f"fix the field, or move {self.path} away (the hosts keep their own fleet.jsonl)",
        )

    def save(self, record: RunRecord) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(tagged("fleet-run", record.to_json()), fh, indent=1, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        if not record.unfinished:
            with open(self.dir / "runs.jsonl", "a", encoding="utf-8") as fh:
                fh.write(json.dumps(record.to_json(), sort_keys=True) + "\n")
