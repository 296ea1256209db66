"""One bisect step: put a configuration on the host (k26ctl.search.step), then judge it (smoke, or
the user's command).

deploy (k26ctl.deploy, yes, smoke on) -> the service did not come up: skip (or bad)
                                      -> smoke failed: bad; smoke passed: good
with --run CMD: deploy without smoke, then CMD decides by its exit code (git bisect run).
--tries N judges the same deployment up to N times (combine_tries); the reload is not repeated.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from k26ctl.bisect.engine import StepOutcome
from k26ctl.bisect.plan import Probe
from k26ctl.bisect.verdict import combine_tries, tries_needed, verdict_from_exit_code
from k26ctl.errors import K26Error
from k26ctl.profile import LoadedProfile
from k26ctl.search.assignment import with_assignment
from k26ctl.search.step import Deployer
from k26ctl.search.verdict import Verdict

Note = Callable[[str], None]


class Judge(Protocol):
    def judge(
        self, probe: Probe, step: int, loaded: LoadedProfile | None, url: str | None
    ) -> tuple[Verdict, str]: ...


# ---- the --run verdict command ---------------------------------------------------------------------


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


@dataclass
class CommandJudge:
    """Runs the user's shell command; its exit code is the verdict (git bisect run).

    The command sees K26_BISECT_KEY / K26_BISECT_VALUE (one key; several keys comma-joined and
    K26_BISECT_ASSIGNMENT as JSON), K26_BISECT_STEP, K26_BISECT_SESSION, K26_BISECT_PROFILE (the step's
    profile as a YAML file, loadable by any k26ctl command) and K26_BISECT_URL (the server, reachable
    from this machine while the command runs). Its output goes to stderr, keeping --json stdout clean.
    """

    command: str
    session: str = ""
    cwd: str | None = None
    stream: Any = None  # where the command's output goes (default: sys.stderr)

    def environment(
        self, probe: Probe, step: int, profile_file: str | None, url: str | None
    ) -> dict[str, str]:
        keys = sorted(probe.assignment)
        env = dict(os.environ)
        env.update(
            K26_BISECT_KEY=",".join(keys),
            K26_BISECT_VALUE=_text(probe.assignment[keys[0]]) if len(keys) == 1 else "",
            K26_BISECT_ASSIGNMENT=json.dumps(probe.assignment, sort_keys=True, default=str),
            K26_BISECT_STEP=str(step),
            K26_BISECT_SESSION=self.session,
            K26_BISECT_PURPOSE=probe.purpose,
        )
        for name, value in (("K26_BISECT_PROFILE", profile_file), ("K26_BISECT_URL", url)):
            if value:
                env[name] = value
            else:
                env.pop(name, None)
        return env

    def judge(
        self, probe: Probe, step: int, loaded: LoadedProfile | None, url: str | None
    ) -> tuple[Verdict, str]:
        with _profile_file(loaded) as profile_file:
            code = self._run(self.environment(probe, step, profile_file, url))
        return verdict_from_exit_code(code, self.command), f"--run exited {code}"

    def _run(self, env: dict[str, str]) -> int:
        out = self.stream or sys.stderr
        process = subprocess.Popen(
            self.command,
            shell=True,
            cwd=self.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so an interrupt can stop all of it
        )
        try:
            assert process.stdout is not None
            for raw in process.stdout:
                out.write(raw.decode("utf-8", "replace"))
                out.flush()
            return process.wait()
        except BaseException:
            _stop_group(process)
            raise


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


@contextlib.contextmanager
def _profile_file(loaded: LoadedProfile | None) -> Iterator[str | None]:
    if loaded is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="k26-bisect-") as tmp:
        path = Path(tmp) / f"{loaded.profile.name or 'step'}.yaml"
        path.write_text(yaml.safe_dump(loaded.profile.model_dump(mode="json"), sort_keys=False))
        yield str(path)


# ---- the step ----------------------------------------------------------------------------------------


@dataclass
class DeployingStepRunner:
    """deploy -> judge, with tries; without a deployer only the judge runs (--no-deploy)."""

    base: LoadedProfile | None
    deployer: Deployer | None
    judge: Judge | None  # None: smoke is the judge
    tries: int = 1
    load_failure_is_bad: bool = False
    note: Note = field(default=lambda message: None)

    def run(self, probe: Probe, step: int) -> StepOutcome:
        loaded = with_assignment(self.base, probe.assignment) if self.base is not None else None
        restarted = False
        load_seconds: float | None = None
        phases: dict[str, Any] | None = None
        first: tuple[Verdict, str] | None = None
        if self.deployer is not None:
            assert loaded is not None
            deployed = self.deployer.deploy(loaded)
            restarted, load_seconds, phases = deployed.restarted, deployed.load_seconds, deployed.phases
            if not deployed.up:
                bad = self.load_failure_is_bad and not deployed.refused
                verdict = Verdict.BAD if bad else Verdict.SKIP
                why = deployed.detail if deployed.refused else f"did not come up: {deployed.detail}"
                return StepOutcome(verdict, restarted, [verdict], why, load_seconds, phases)
            if self.judge is None and deployed.smoke_verdict is not None:
                first = (deployed.smoke_verdict, deployed.detail)

        verdicts: list[Verdict] = []
        details: list[str] = []
        while tries_needed(verdicts, self.tries):
            if first is not None:
                verdict, detail = first
                first = None
            else:
                verdict, detail = self._judge_once(probe, step, loaded)
            verdicts.append(verdict)
            details.append(detail)
            if self.tries > 1:
                self.note(f"try {len(verdicts)}/{self.tries}: {verdict.value} ({detail})")
        detail = details[-1] if details else ""
        return StepOutcome(combine_tries(verdicts), restarted, verdicts, detail, load_seconds, phases)

    def _judge_once(self, probe: Probe, step: int, loaded: LoadedProfile | None) -> tuple[Verdict, str]:
        if self.judge is None:
            assert self.deployer is not None and loaded is not None
            return self.deployer.smoke(loaded)
        if self.deployer is None or loaded is None:
            return self.judge.judge(probe, step, loaded, None)
        try:
            with self.deployer.server_url(loaded) as url:
                return self.judge.judge(probe, step, loaded, url)
        except K26Error as exc:
            if getattr(exc, "exit_code", None) == 69:
                return Verdict.SKIP, f"cannot reach the server for --run: {exc.message}"
            raise
