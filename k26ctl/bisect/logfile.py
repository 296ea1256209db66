"""`bisect-config log`: a replayable record of a session; `replay FILE` reads it back.

Every verdict line is a shell command that reproduces that verdict by hand (deploy the value, then
judge it the same way), followed by a marker comment holding the machine-readable step:

    k26ctl deploy P --set k=8 --yes && k26ctl smoke P --set k=8  # k26-bisect-step {"assignment": ...}

As with git bisect replay, editing the "verdict" inside a marker changes what the replay believes.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from k26ctl.bisect.session import SessionSpec, StepRecord
from k26ctl.bisect.shapes import SpecShape as _SpecShape
from k26ctl.bisect.shapes import StepMarkShape as _StepShape
from k26ctl.errors import ConfigError
from k26ctl.search.assignment import describe

SPEC_MARK = "# k26-bisect-spec "
STEP_MARK = "# k26-bisect-step "


def _q(text: str) -> str:
    return shlex.quote(text)


def _value_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def search_command(spec: SessionSpec, session: str) -> str:
    """The `k26ctl bisect-config ...` line that starts the same search."""
    parts = ["k26ctl", "bisect-config"]
    if spec.mode == "numeric":
        values = ",".join(_value_text(v) for v in spec.candidates)
        parts += [_q(spec.profile or ""), "--param", _q(spec.param or ""), "--values", _q(values)]
    else:
        parts += ["--good-profile", _q(spec.good_profile or ""), "--bad-profile", _q(spec.bad_profile or "")]
        if not spec.refine:
            parts.append("--no-refine")
    for item in spec.sets:
        parts += ["--set", _q(item)]
    if spec.run:
        parts += ["--run", _q(spec.run)]
    if not spec.deploy:
        parts.append("--no-deploy")
    if spec.tries != 1:
        parts += ["--tries", str(spec.tries)]
    if not spec.verify_ends:
        parts.append("--no-verify-ends")
    if spec.load_failure_is_bad:
        parts.append("--load-failure-is-bad")
    parts += ["--session", _q(session), "--yes"]
    return " ".join(parts)


def reproduce_command(spec: SessionSpec, step: StepRecord, session: str) -> str:
    """Shell that deploys this step's configuration and judges it as the search did."""
    profile = spec.profile if spec.mode == "numeric" else spec.good_profile
    sets = [*spec.sets]
    removed = []
    for key, value in sorted(step.assignment.items()):
        if value is None and spec.mode == "set":
            removed.append(key)
        sets.append(f"{key}={json.dumps(value)}" if not isinstance(value, str) else f"{key}={value}")
    set_args = " ".join(f"--set {_q(s)}" for s in sets)
    profile_arg = _q(profile or "")
    deploy = f"k26ctl deploy {profile_arg} {set_args} --yes --no-smoke".replace("  ", " ")
    if spec.run:
        keys = sorted(step.assignment)
        env = {
            "K26_BISECT_KEY": ",".join(keys),
            "K26_BISECT_VALUE": _value_text(step.assignment[keys[0]]) if len(keys) == 1 else "",
            "K26_BISECT_ASSIGNMENT": json.dumps(step.assignment, sort_keys=True),
            "K26_BISECT_STEP": str(step.step),
            "K26_BISECT_SESSION": session,
        }
        judge = "env " + " ".join(f"{k}={_q(v)}" for k, v in env.items()) + f" sh -c {_q(spec.run)}"
    else:
        judge = f"k26ctl smoke {profile_arg} {set_args}".rstrip()
    line = f"{deploy} && {judge}" if spec.deploy else judge
    if removed:
        line += f"  # (remove {', '.join(removed)} from the profile first)"
    return line


def render_log(
    name: str, spec: SessionSpec, steps: Sequence[StepRecord], outcome: dict[str, Any] | None
) -> str:
    portable = {k: v for k, v in spec.to_json().items() if k != "original"}
    lines = [
        f"# k26ctl bisect-config log: session {name}, {spec.mode} search",
        "# Each 'k26ctl ...' line reproduces one verdict; 'k26ctl bisect-config replay FILE' reads the",
        "# k26-bisect markers back (edit a verdict in a marker to change what the replay believes).",
        SPEC_MARK + json.dumps(portable, default=str, sort_keys=True),
        f"# started as: {search_command(spec, name)}",
    ]
    for step in steps:
        restart = "restarted" if step.restarted else "no restart"
        tries = f", tries {'/'.join(step.tries)}" if len(step.tries) > 1 else ""
        lines.append(
            f"# step {step.step}: {describe(step.assignment)} -> {step.verdict.value}"
            f" ({step.seconds:.1f} s, {restart}{tries})"
        )
        marker = {
            "step": step.step,
            "assignment": step.assignment,
            "verdict": step.verdict.value,
            "seconds": round(step.seconds, 3),
            "restarted": step.restarted,
        }
        lines.append(
            f"{reproduce_command(spec, step, name)}  {STEP_MARK}{json.dumps(marker, sort_keys=True)}"
        )
    if outcome is not None:
        summary = {
            k: outcome.get(k) for k in ("status", "first_bad", "last_good", "culprit_keys") if k in outcome
        }
        lines.append(f"# result: {json.dumps(summary, default=str)}")
    else:
        lines.append("# the search is not finished: k26ctl bisect-config --resume")
    return "\n".join(lines) + "\n"


@dataclass
class ParsedLog:
    spec: SessionSpec
    steps: list[StepRecord]


MAX_LOG_BYTES = 16 << 20


def parse_log(path: Path) -> ParsedLog:
    """Read a log written by `bisect-config log`; any damage is one ConfigError naming the line."""
    from k26ctl import inputs, jsonsafe
    from k26ctl.smoke.responses import shape_problem

    hint = "give a file written by bisect-config log"
    text = inputs.read_text(path, what="bisect log", max_bytes=MAX_LOG_BYTES, hint=hint)
    spec: SessionSpec | None = None
    steps: list[StepRecord] = []
    for number, line in enumerate(text.split("\n"), 1):
        try:
            if line.startswith(SPEC_MARK):
                shape = _SpecShape.model_validate(jsonsafe.loads(line[len(SPEC_MARK) :]))
                spec = SessionSpec.from_json(shape.model_dump(exclude={"original", "created"}))
            elif STEP_MARK in line:
                step = _StepShape.model_validate(jsonsafe.loads(line.split(STEP_MARK, 1)[1]))
                steps.append(
                    StepRecord(
                        step=len(steps) + 1,
                        assignment=step.assignment,
                        verdict=step.verdict,
                        seconds=step.seconds,
                        restarted=step.restarted,
                        tries=[],
                        detail="replayed",
                        replayed=True,
                    )
                )
        except ValidationError as exc:
            raise ConfigError(
                f"{path}:{number}: unreadable bisect marker ({shape_problem(exc)})", hint
            ) from None
        except ValueError as exc:
            raise ConfigError(
                f"{path}:{number}: unreadable bisect marker ({exc})", "verdicts are good, bad or skip"
            ) from None
    if spec is None:
        raise ConfigError(f"{path}: no '{SPEC_MARK.strip()}' line", hint)
    return ParsedLog(spec, steps)
