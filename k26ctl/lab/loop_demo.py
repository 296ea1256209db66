"""The users' loop as one story: deploy a broken speculative setting, see smoke fail while /health says
200, bisect the first bad value with real restarts, deploy the fix, sweep for the best value.

`k26ctl lab demo --gpu` tells it with real SGLang 0.5.15 on the lab host's GPU (profiles/lab/gpu/: NGRAM
verifying 16 draft tokens, and the lab patch `lab-verify-width-cap` that sizes the verify mask's offsets
from a width capped at 8); the same steps and the same checks run on the CPU stand-in in CI
(`STAND_IN_LOOP`: DDTree budget 16, whose unpatched Triton backend sizes the verify from the block size
8). A `LoopPlan` is all that differs. The host is left up.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from k26ctl.bisect import api as bisect_api
from k26ctl.deploy import deploy
from k26ctl.deploy.model import DeployOptions, DeployResult
from k26ctl.errors import K26Error
from k26ctl.lab.demo import DemoContext, DemoOutcome, DemoStep, lab_profile_path
from k26ctl.profile import load_profile


@dataclass(frozen=True)
class LoopPlan:
    """The profiles and values one telling of the loop uses (paths relative to profiles/lab/)."""

    title: str
    broken: str  # a speculative setting past the cap, with the fault: smoke must fail, /health 200
    fixed: str  # the same setting with the fault removed: smoke must pass with 0 probe mismatches
    key: str  # the profile key bisect-config and the sweep move
    good: int  # claimed good (at or under the cap)
    bad: int  # claimed bad (the broken profile's value)
    last_good: int  # the cap: the largest value the fault leaves correct
    sweep_values: tuple[int, ...]  # the sweep's values on the fixed server
    why: str  # one line: what the fault is

    @property
    def first_bad(self) -> int:
        return self.last_good + 1


GPU_LOOP = LoopPlan(
    title="real SGLang 0.5.15 on the GPU",
    broken="gpu/ngram-16-capped",
    fixed="gpu/ngram-16",
    key="spec.block_size",  # NGRAM's --speculative-num-draft-tokens
    good=4,
    bad=16,
    last_good=8,
    sweep_values=(8, 12, 16),
    why="NGRAM verifies 16 draft tokens; the lab patch sizes the verify mask's offsets from min(width, 8)",
)

STAND_IN_LOOP = LoopPlan(
    title="the CPU stand-in",
    broken="ddtree-b16",
    fixed="ddtree-b16-patched",
    key="spec.ddtree.budget",
    good=7,
    bad=16,
    last_good=7,  # verify width budget + 1 fits the block size 8 up to budget 7
    sweep_values=(8, 16),
    why="DDTree verifies budget + 1 tokens; the unpatched backend sizes the verify from the block size 8",
)


@dataclass
class LoopContext:
    """What the loop's steps share besides the demo context: the plan and the sweep's size."""

    plan: LoopPlan
    sweep_concurrency: tuple[int, ...] = (1, 4)
    sweep_requests: int = 8
    sweep_max_tokens: int = 96
    restarts: list[dict[str, Any]] | None = None  # filled by step_restarts


def _profile(ctx: DemoContext, name: str, *overrides: str) -> Any:
    return load_profile(lab_profile_path(name), [f"host.lab={ctx.lab}", *overrides])


def _deploy(ctx: DemoContext, name: str) -> DeployResult:
    return deploy(_profile(ctx, name), DeployOptions(yes=True, smoke=True), on_event=ctx.on_event)


def _probes(result: DeployResult) -> tuple[int, int] | None:
    probes = getattr(result.smoke, "probes", None)
    if probes is None or not probes.supported:
        return None
    return probes.checked, len(probes.mismatches)


def _health(result: DeployResult) -> Any:
    return getattr(result.smoke, "health_after", None)


def _failing_lines(result: DeployResult) -> list[str]:
    report = result.smoke
    if report is None:
        return [result.message] if result.message else []
    lines = []
    for request in report.failed_results[:3]:
        text = (request.text or "").replace("\n", " ")
        lines.append(
            f"{request.name}: {'; '.join(f.reason() for f in request.failures)[:160]} -> {text[:60]!r}"
        )
    return lines


def step_broken(loop: LoopContext) -> DemoStep:
    def step(ctx: DemoContext) -> DemoOutcome:
        plan = loop.plan
        ctx.say(
            f"== deploying {plan.broken} on {plan.title}: {plan.why}; smoke should fail behind /health 200"
        )
        result = _deploy(ctx, plan.broken)
        ready = any(s.name == "readiness" and s.status == "ok" for s in result.steps)
        health = _health(result)
        probes = _probes(result)
        ok = ready and result.failure == "smoke" and result.exit_code == 1 and health == 200
        got = f"ready, /health {health} after smoke, smoke exit {result.exit_code}" + (
            f", probes {probes[1]} of {probes[0]} mismatched" if probes else ""
        )
        return DemoOutcome(
            "broken deploy",
            "smoke exit 1, /health 200",
            got,
            ok,
            result.wall_seconds,
            result,
            _failing_lines(result),
        )

    return step


def step_bisect(loop: LoopContext) -> DemoStep:
    def step(ctx: DemoContext) -> DemoOutcome:
        plan = loop.plan
        ctx.say(
            f"== bisect-config {plan.key} on {plan.broken} between {plan.good} (claimed good) and "
            f"{plan.bad} (claimed bad): each step a real restart, judged by smoke"
        )
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="k26-loop-bisect-") as state:
            bisect_ctx = bisect_api.Context(
                session="lab-loop",
                yes=True,
                reporter=ctx.bisect_reporter,
                note=ctx.note,
                state_directory=Path(state),
            )
            spec = bisect_api.numeric_spec(
                str(lab_profile_path(plan.broken)),
                plan.key,
                str(plan.good),
                str(plan.bad),
                None,
                [f"host.lab={ctx.lab}"],
                bisect_api.SearchOptions(),
            )
            try:
                result = bisect_api.start(spec, bisect_ctx)
            except K26Error as exc:  # an end judged against its claim: the search stops, the story goes on
                took = time.monotonic() - started
                return DemoOutcome("bisect", "first bad = cap + 1", f"stopped: {exc.message}", False, took)
        doc = result.to_json()
        found = (doc.get("first_bad"), doc.get("last_good"))
        ok = result.found and found == (plan.first_bad, plan.last_good) and result.restarts <= 6
        got = f"first bad {found[0]}, last good {found[1]}, {result.restarts} restarts"
        detail = [f"{s['value']}: {s['verdict']} ({s['seconds']:.1f} s)" for s in doc["steps"]]
        return DemoOutcome(
            "bisect",
            f"first bad {plan.first_bad}, last good {plan.last_good}, <= 6 restarts",
            got,
            ok,
            time.monotonic() - started,
            None,
            detail,
            doc,
        )

    return step


def step_fixed(loop: LoopContext) -> DemoStep:
    def step(ctx: DemoContext) -> DemoOutcome:
        plan = loop.plan
        ctx.say(f"== deploying {plan.fixed}: the same setting with the fault removed; smoke should pass")
        result = _deploy(ctx, plan.fixed)
        probes = _probes(result)
        ok = result.exit_code == 0 and result.smoke_passed is True and probes is not None and probes[1] == 0
        got = f"smoke exit {result.exit_code}" + (
            f", probes {probes[1]} of {probes[0]} mismatched" if probes else ", probes not run"
        )
        summary = [result.smoke.summary()] if result.smoke is not None else []
        return DemoOutcome(
            "fixed deploy", "smoke exit 0, probes 0 mismatches", got, ok, result.wall_seconds, result, summary
        )

    return step


def step_sweep(loop: LoopContext) -> DemoStep:
    def step(ctx: DemoContext) -> DemoOutcome:
        from k26ctl.sweep import api as sweep_api
        from k26ctl.sweep.space import parse_param

        plan = loop.plan
        values = ",".join(str(v) for v in plan.sweep_values)
        ctx.say(f"== sweep {plan.key}={values} on {plan.fixed}: the fastest value that still passes smoke")
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="k26-loop-sweep-") as state:
            spec = sweep_api.build_spec(
                str(lab_profile_path(plan.fixed)),
                [parse_param(f"{plan.key}={values}")],
                concurrency=loop.sweep_concurrency,
                sets=[f"host.lab={ctx.lab}"],
                max_restarts=len(plan.sweep_values) + 1,
                rounds=1,
                requests_per_level=loop.sweep_requests,
                max_new_tokens=loop.sweep_max_tokens,
                controls=False,
            )
            sweep_ctx = sweep_api.Context(
                session="lab-loop", yes=True, note=ctx.note, state_directory=Path(state)
            )
            result = sweep_api.start(spec, sweep_ctx)
        doc = result.to_json()
        best = doc.get("best") or {}
        value = (best.get("assignment") or {}).get(plan.key)
        ok = value is not None
        got = f"recommends {plan.key}={value}, {result.restarts} restarts" if ok else "no recommendation"
        detail = [
            f"{p['label']}: "
            + (
                f"{p['output_tokens_per_s']} tok/s at concurrency {spec.objective['concurrency']}, "
                f"accept length {p['accept_length']}"
                if p["coherent"]
                else "incoherent (smoke failed)"
            )
            for p in doc.get("points", [])
        ]
        return DemoOutcome(
            "sweep", "a recommended value", got, ok, time.monotonic() - started, None, detail, doc
        )

    return step


def loop_steps(loop: LoopContext, up: DemoStep, names: tuple[str, ...] = ()) -> list[DemoStep]:
    """The loop's steps after `up` (which brings the host up), or only those named (`up` always first)."""
    makers: dict[str, Callable[[LoopContext], DemoStep]] = {
        "broken": step_broken,
        "bisect": step_bisect,
        "fixed": step_fixed,
        "sweep": step_sweep,
    }
    chosen = names or tuple(makers)
    return [up, *(makers[name](loop) for name in chosen)]


LOOP_STEP_NAMES = ("broken", "bisect", "fixed", "sweep")
