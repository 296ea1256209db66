"""What a deploy takes (DeployOptions), what it reports while running (DeployEvent), and what it
returns (DeployResult, with the Ansible-style recap)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from k26ctl.deploy.plan import Plan
from k26ctl.documents import tagged
from k26ctl.errors import ExitCode

if TYPE_CHECKING:
    from k26ctl.smoke.report import SmokeReport


@dataclass
class DeployOptions:
    check: bool = False  # stop after the plan: exit 0 nothing to do, 3 changes pending
    diff: bool = False  # include unified diffs of the unit and patches in events and the result
    force: bool = False  # restart even when nothing changed
    smoke: bool | None = None  # None: smoke when speculative settings changed since the last deploy
    rollback_on_failure: bool = False
    yes: bool = False  # apply without asking
    # Asked before applying changes when `yes` is False; None means nobody can answer (no TTY):
    # the deploy then refuses to change anything and says to pass --yes.
    confirm: Callable[[Plan], bool] | None = None
    accept_new_host_key: bool = False
    lock_wait: float = 0.0


@dataclass(frozen=True)
class DeployEvent:
    """Something the operator may want to see as it happens. `kind` is one of:
    step (a pipeline step finished: data has name/status/detail), phase (a step starts),
    progress (weight load: percent/done/total/eta), log (a journal line), diff, warning."""

    kind: str
    message: str
    data: dict[str, Any] = field(default_factory=dict)


EventCallback = Callable[[DeployEvent], None]


@dataclass(frozen=True)
class StepResult:
    name: str
    status: str  # ok | changed | failed | skipped
    detail: str = ""
    seconds: float = 0.0


@dataclass
class DeployResult:
    profile: str
    host: str
    unit: str
    verdict: str = "ok"  # ok | failed | changes-pending
    exit_code: int = ExitCode.OK
    changed: bool = False
    restarted: bool = False
    load_seconds: float | None = None  # the server's own start-to-ready time, from its journal
    ready_seconds: float | None = None  # wall time from the restart to a passing probe
    gpu_memory_mib: int | None = None  # GPU memory the ready server holds (nvidia-smi), if known
    stop_seconds: float | None = None  # the old server's own stop time, from the journal
    wall_seconds: float = 0.0
    smoke: SmokeReport | None = None  # when smoke ran
    smoke_reason: str = ""
    failure: str | None = None  # readiness | smoke | None
    message: str = ""
    journal_lines: list[str] = field(default_factory=list)
    rolled_back: bool = False
    host_state: str = ""
    plan: Plan | None = None
    diff: str = ""
    steps: list[StepResult] = field(default_factory=list)
    kind: str = "deploy"  # deploy | rollback
    accept_baseline: dict[str, Any] | None = None  # the accept length against its configuration's baseline
    phases: Any | None = None  # deploy.phases.RestartPhases of this run's restart, from the journal
    expected: Any | None = None  # deploy.downtime.Expectation: the stop -> ready time history predicts
    readahead: dict[str, Any] | None = None  # the weights read ahead before the stop (deploy.readahead)
    start_conditions: dict[str, Any] | None = None  # JIT caches warm/cold, weights resident before start

    @property
    def smoke_passed(self) -> bool | None:
        return None if self.smoke is None else self.smoke.passed

    def counts(self) -> dict[str, int]:
        out = {"changed": 0, "ok": 0, "failed": 0, "skipped": 0}
        for step in self.steps:
            out[step.status] = out.get(step.status, 0) + 1
        return out

    def recap(self) -> str:
        c = self.counts()
        return f"changed={c['changed']} ok={c['ok']} failed={c['failed']}"

    def to_json(self) -> dict[str, Any]:
        smoke = self.smoke.to_json() if self.smoke is not None else None
        return tagged(
            self.kind,
            {
                "kind": self.kind,
                "profile": self.profile,
                "host": self.host,
                "unit": self.unit,
                "verdict": self.verdict,
                "exit_code": self.exit_code,
                "changed": self.changed,
                "restarted": self.restarted,
                "load_seconds": self.load_seconds,
                "ready_seconds": self.ready_seconds,
                "gpu_memory_mib": self.gpu_memory_mib,
                "stop_seconds": self.stop_seconds,
                "wall_seconds": round(self.wall_seconds, 3),
                "failure": self.failure,
                "message": self.message,
                "journal_lines": self.journal_lines,
                "rolled_back": self.rolled_back,
                "host_state": self.host_state,
                "smoke_reason": self.smoke_reason,
                "smoke": smoke,
                "accept_baseline": self.accept_baseline,
                "plan": self.plan.to_json() if self.plan else None,
                "diff": self.diff or None,
                "steps": [
                    {"name": s.name, "status": s.status, "detail": s.detail, "seconds": round(s.seconds, 3)}
                    for s in self.steps
                ],
                "recap": self.counts(),
                "phases": self.phases.to_json() if self.phases is not None else None,
                "expected_downtime": self.expected.to_json() if self.expected is not None else None,
                "readahead": self.readahead,
                "start_conditions": self.start_conditions,
            },
        )
