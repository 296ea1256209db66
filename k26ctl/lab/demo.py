"""`k26ctl lab demo`: the whole story on the lab host in one command.

1. bring the lab host up; 2. deploy the unpatched DDTree budget 16 lab profile: the server loads and
/health answers 200, but smoke flags the output (expected failure); 3. deploy the patched profile:
k26ctl patches the host's SGLang tree, restarts, and smoke passes. The host is left up.

Steps are a list of `DemoStep`s so more can be appended: `--bisect` adds `step_bisect`, which searches
the unpatched budget-16 lab profile between 7 (good) and 16 (bad) in a throwaway session, then resets,
which puts back the deployment that was live before (the patched profile of the demo).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from k26ctl.bisect import api
from k26ctl.bisect.engine import Reporter, SearchResult
from k26ctl.deploy import deploy
from k26ctl.deploy.model import DeployOptions, DeployResult, EventCallback
from k26ctl.lab.host import LabHostState, lab_up
from k26ctl.profile import load_profile
from k26ctl.resources import profiles_dir


@dataclass
class DemoContext:
    lab: str  # lab host name
    on_event: EventCallback | None = None
    say: Callable[[str], None] = print
    host_state: LabHostState | None = None  # once up
    bisect_reporter: Reporter | None = None  # how step_bisect shows its steps (the CLI's printer)
    note: Callable[[str], None] = print


@dataclass
class DemoOutcome:
    name: str
    expected: str
    got: str
    as_expected: bool
    seconds: float
    result: DeployResult | None = None
    detail: list[str] = field(default_factory=list)
    document: dict[str, Any] | None = None  # the step's --json document when it is no deploy


DemoStep = Callable[[DemoContext], DemoOutcome]


def lab_profile_path(name: str) -> Path:
    return profiles_dir() / "lab" / f"{name}.yaml"


def _deploy(ctx: DemoContext, profile: str) -> DeployResult:
    loaded = load_profile(lab_profile_path(profile), [f"host.lab={ctx.lab}"])
    return deploy(loaded, DeployOptions(yes=True, smoke=True), on_event=ctx.on_event)


def failing_lines(result: DeployResult, limit: int = 4) -> list[str]:
    """The first failed requests of a deploy's smoke: their findings and the start of their text."""
    report = result.smoke
    if report is None:
        return [result.message] if result.message else []
    lines = []
    for request in report.failed_results[:limit]:
        text = (request.text or "").replace("\n", " ")
        lines.append(f"{request.name}: {'; '.join(f.reason() for f in request.failures)} -> {text[:60]!r}")
    return lines


def step_lab_up(ctx: DemoContext) -> DemoOutcome:
    started = time.monotonic()
    ctx.say(f"== bringing lab host {ctx.lab} up")
    state = lab_up(ctx.lab)
    ctx.host_state = state
    took = time.monotonic() - started
    return DemoOutcome("lab host up", "up", f"up at {state.address}", True, took)


def step_unpatched(ctx: DemoContext) -> DemoOutcome:
    ctx.say(
        "== deploying ddtree-b16 (DDTree budget 16, unpatched): the verify step checks 17 tokens while the "
        "Triton backend sizes its mask from the block size (8), so output should degenerate"
    )
    result = _deploy(ctx, "ddtree-b16")
    ready = any(s.name == "readiness" and s.status == "ok" for s in result.steps)
    degenerate = ready and result.failure == "smoke" and result.exit_code == 1
    got = (
        "ready (/health 200, model listed), but smoke flagged degenerate output"
        if degenerate
        else f"{result.verdict} ({result.message or 'no finding'})"
    )
    return DemoOutcome(
        "unpatched budget 16",
        "smoke fails (degenerate output), /health still 200",
        got,
        degenerate,
        result.wall_seconds,
        result,
        failing_lines(result),
    )


def step_patched(ctx: DemoContext) -> DemoOutcome:
    ctx.say(
        "== deploying ddtree-b16-patched: k26ctl applies triton-ddtree-verify-width to the host's tree "
        "(target backend sized budget+1), restarts, smoke should pass"
    )
    result = _deploy(ctx, "ddtree-b16-patched")
    ok = result.exit_code == 0 and result.smoke_passed is True
    got = "smoke passed" if ok else f"{result.verdict} ({result.message})"
    summary = [result.smoke.summary()] if result.smoke is not None else []
    return DemoOutcome("patched budget 16", "smoke passes", got, ok, result.wall_seconds, result, summary)


BISECT_KEY = "spec.ddtree.budget"


def bisect_lab_profile(
    ctx: DemoContext,
    profile: str,
    key: str,
    good: int,
    bad: int,
    then: Callable[[api.Context], str] | None = None,
) -> tuple[SearchResult, str]:
    """bisect-config of `key` on a lab profile between `good` and `bad`, in a throwaway session on the
    demo's host (ends verified, then binary search); `then` runs in that session afterwards (a reset)."""
    with tempfile.TemporaryDirectory(prefix="k26-demo-bisect-") as state:
        bisect_ctx = api.Context(
            session="lab-demo",
            yes=True,
            reporter=ctx.bisect_reporter,
            note=ctx.note,
            state_directory=Path(state),
        )
        spec = api.numeric_spec(
            str(lab_profile_path(profile)),
            key,
            str(good),
            str(bad),
            None,
            [f"host.lab={ctx.lab}"],
            api.SearchOptions(),
        )
        result = api.start(spec, bisect_ctx)
        return result, then(bisect_ctx) if then is not None else ""


def step_bisect(ctx: DemoContext) -> DemoOutcome:
    """Bisect the first bad DDTree budget on the lab host, then reset."""
    ctx.say(
        "== bisect-config on the unpatched budget-16 profile: which budget breaks first? "
        "(7 claimed good, 16 claimed bad; ends verified, then binary search)"
    )
    started = time.monotonic()

    def reset_after(bisect_ctx: api.Context) -> str:
        ctx.say("== bisect-config reset: putting back the deployment from before the search")
        return api.reset(bisect_ctx).message

    result, reset_message = bisect_lab_profile(ctx, "ddtree-b16", BISECT_KEY, 7, 16, then=reset_after)
    doc = result.to_json()
    ok = (
        result.found
        and (doc.get("first_bad"), doc.get("last_good")) == (8, 7)
        and result.restarts <= (doc.get("max_restarts") or 0)
    )
    got = (
        f"first bad budget {doc.get('first_bad')}, last good {doc.get('last_good')}: "
        f"{result.restarts} restarts (bound {doc.get('max_restarts')}, a sweep needs {doc.get('candidates')})"
    )
    detail = [f"{s['value']}: {s['verdict']} ({s['seconds']:.1f} s)" for s in doc["steps"]] + [reset_message]
    return DemoOutcome(
        "bisect budget",
        "first bad 8, last good 7, within ends + ceil(log2 n)",
        got,
        ok,
        time.monotonic() - started,
        None,
        detail,
        doc,
    )


DEFAULT_STEPS: list[DemoStep] = [step_lab_up, step_unpatched, step_patched]


def run_demo(ctx: DemoContext, steps: list[DemoStep] | None = None) -> list[DemoOutcome]:
    outcomes = []
    for step in steps if steps is not None else DEFAULT_STEPS:
        outcome = step(ctx)
        outcomes.append(outcome)
        mark = "as expected" if outcome.as_expected else "NOT AS EXPECTED"
        ctx.say(f"   {outcome.name}: {outcome.got} [{mark}] ({outcome.seconds:.1f} s)")
        for line in outcome.detail:
            ctx.say(f"     {line}")
    return outcomes


def summary_lines(outcomes: list[DemoOutcome], lab: str) -> list[str]:
    lines = ["== what happened"]
    for o in outcomes:
        lines.append(
            f"  {'ok ' if o.as_expected else 'BAD'} {o.name:<22} expected: {o.expected:<50} got: {o.got}"
        )
    lines.append(
        f"the lab host {lab} is still up: try `k26ctl status profiles/lab/ddtree-b16-patched.yaml "
        f"--set host.lab={lab}`; `k26ctl lab host down --name {lab}` removes it"
    )
    return lines
