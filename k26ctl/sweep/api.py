"""The operations behind `k26ctl sweep`: start, resume, log, reset. The CLI only parses and presents."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from k26ctl.errors import ConfigError, UsageError
from k26ctl.profile import LoadedProfile, load_profile
from k26ctl.search.assignment import Assignment, describe, flatten, with_assignment
from k26ctl.search.ops import ResetResult, confirm_restarts, reset_session
from k26ctl.search.session import DEFAULT_SESSION
from k26ctl.search.step import Deployer
from k26ctl.statefile import BadStateError
from k26ctl.sweep.load import LoadSpec
from k26ctl.sweep.prompts import TEMPLATES, load_prompts, render
from k26ctl.sweep.result import SweepResult
from k26ctl.sweep.runner import Measure, PointRunner, http_measure
from k26ctl.sweep.search import Control, Finished, NextPoint, SweepPlanner
from k26ctl.sweep.space import Param, check_params, grid, point_id
from k26ctl.sweep.state import Objective, PointRecord, SweepSession, SweepSpec, by_id

Confirm = Callable[[str], bool]


class Reporter(Protocol):
    def started(self, number: int, point: NextPoint, restarts: int, max_restarts: int) -> None: ...

    def finished(self, record: PointRecord, objective: Objective) -> None: ...


class SilentReporter:
    def started(self, number: int, point: NextPoint, restarts: int, max_restarts: int) -> None:
        pass

    def finished(self, record: PointRecord, objective: Objective) -> None:
        pass


@dataclass
class Context:
    session: str = DEFAULT_SESSION
    yes: bool = False
    confirm: Confirm | None = None
    reporter: Reporter | None = None
    note: Callable[[str], None] = field(default=lambda message: None)
    on_deploy_event: Callable[[Any], None] | None = None
    state_directory: Path | None = None
    deployer: Deployer | None = None  # None: deploy through k26ctl.deploy
    measure: Measure | None = None  # None: the HTTP load measurement
    accept_new_host_key: bool = False


def build_spec(
    profile: str,
    params: Sequence[Param],
    *,
    concurrency: Sequence[int],
    target: int | None = None,
    max_ttft_p99_ms: float | None = None,
    max_itl_p99_ms: float | None = None,
    sets: Sequence[str] = (),
    max_restarts: int = 12,
    rounds: int = 2,
    requests_per_level: int = 16,
    max_new_tokens: int = 128,
    template: str | None = None,
    controls: bool = True,
) -> SweepSpec:
    check_params(params)
    levels = sorted(set(concurrency))
    if not levels or min(levels) < 1:
        raise UsageError("--concurrency needs levels of at least 1", "e.g. --concurrency 1,4,8")
    target = target if target is not None else levels[0]
    if target not in levels:
        levels = sorted({*levels, target})
    if max_restarts < 1:
        raise UsageError("--max-restarts must be at least 1")
    if requests_per_level < 1 or max_new_tokens < 2:
        raise UsageError("--requests must be >= 1 and --max-tokens >= 2")
    loaded = load_profile(profile, sets)
    if template is None:
        template = "chatml" if loaded.profile.host.lab else "kimi_k2"
    if template not in TEMPLATES:
        raise UsageError(f"unknown chat template {template!r}", f"use one of {', '.join(TEMPLATES)}")
    return SweepSpec(
        profile=str(Path(profile).expanduser().resolve()) if Path(profile).exists() else profile,
        params=[p.to_json() for p in params],
        concurrency=levels,
        objective={
            "concurrency": target,
            "max_ttft_p99_ms": max_ttft_p99_ms,
            "max_itl_p99_ms": max_itl_p99_ms,
        },
        sets=list(sets),
        max_restarts=max_restarts,
        rounds=rounds,
        requests_per_level=requests_per_level,
        max_new_tokens=max_new_tokens,
        template=template,
        controls=controls,
    )


def controls_for(loaded: LoadedProfile) -> list[Control]:
    """Speculation off and the plain DFlash chain, as far as they differ from the profile itself."""
    algorithm = loaded.profile.spec.algorithm.value
    found = []
    if algorithm != "NONE":
        found.append(Control("speculation off", {"spec.algorithm": "NONE"}))
    if algorithm == "DDTREE":
        found.append(Control("DFlash chain", {"spec.algorithm": "DFLASH"}))
    return found


BUDGET_KEY = "spec.ddtree.budget"


def break_points(loaded: LoadedProfile) -> dict[str, Any]:
    """Where throughput along a key is known not to be unimodal: a DDTree budget of block size - 1 is
    the full draft chain; one node more makes a width-2 tree and throughput dips (see search.py)."""
    spec = loaded.profile.spec
    if spec.algorithm.value != "DDTREE" or not spec.block_size or spec.block_size < 2:
        return {}
    return {BUDGET_KEY: spec.block_size - 1}


def start_point(loaded: LoadedProfile, params: Sequence[Param]) -> Assignment:
    flat = flatten(loaded.profile.model_dump(mode="json"))
    return {p.key: flat.get(p.key) for p in params}


@dataclass
class Prepared:
    base: LoadedProfile
    planner: SweepPlanner
    objective: Objective
    load: LoadSpec


def prepare(spec: SweepSpec) -> Prepared:
    """Load the profile, check every value of every parameter locally, build the planner."""
    base = load_profile(spec.profile, spec.sets)
    params = spec.param_list()
    start = start_point(base, params)
    from k26ctl.validate import ensure_valid

    for param in params:
        for value in param.values:
            try:
                with_assignment(base, {**start, param.key: value})
            except ConfigError as exc:
                raise ConfigError(f"--param {param.key}={value!r}: {exc.message}", exc.hint) from None
    controls = controls_for(base) if spec.controls else []
    for point in [start, *(c.assignment for c in controls)]:
        ensure_valid(with_assignment(base, point).profile)
    _ensure_same_scheduling(base, start, params, controls)
    planner = SweepPlanner(params, start, controls, rounds=spec.rounds, breaks=break_points(base))
    prompts = [render(messages, spec.template) for messages in load_prompts()]
    load = LoadSpec(prompts, list(spec.concurrency), spec.requests_per_level, spec.max_new_tokens)
    return Prepared(base, planner, spec.objective_obj(), load)


def _ensure_same_scheduling(
    base: LoadedProfile, start: Assignment, params: Sequence[Param], controls: Sequence[Control]
) -> None:
    """Every arm the sweep may measure runs under the same scheduler, or the comparison is void."""
    from k26ctl.validate.crossflag import mixed_scheduling

    arms = [("default", with_assignment(base, start).profile)]
    arms += [(c.label, with_assignment(base, c.assignment).profile) for c in controls]
    for param in params:
        for value in param.values:
            arms.append((f"{param.key}={value}", with_assignment(base, {**start, param.key: value}).profile))
    finding = mixed_scheduling(arms)
    if finding is not None:
        raise ConfigError(f"{finding.code}: {finding.message}", finding.hint)


def _label(point: NextPoint, planner: SweepPlanner) -> str:
    if point.role == "control":
        return point.why.removeprefix("control: ")
    if point.role == "default":
        return "default"
    return describe(point.assignment)


def run_sweep(
    session: SweepSession, spec: SweepSpec, prepared: Prepared, runner: PointRunner, reporter: Reporter | None
) -> SweepResult:
    reporter = reporter or SilentReporter()
    points = session.points()
    known = by_id(points)
    objective = prepared.objective

    def lookup(assignment: Assignment) -> Any:
        found = known.get(point_id(assignment))
        return found.evaluation(objective) if found is not None else None

    while True:
        restarts = sum(1 for p in points if p.restarted)
        plan = prepared.planner.plan(lookup, can_pay=restarts < spec.max_restarts)
        if isinstance(plan, Finished):
            best = known.get(point_id(plan.best)) if plan.best is not None else None
            return SweepResult(session.name, plan.status, objective, points, best, spec.max_restarts)
        number = max((p.number for p in points), default=0) + 1
        session.record_start(number, plan.assignment, plan.role)
        reporter.started(number, plan, restarts, spec.max_restarts)
        record = runner.run(number, plan.assignment, plan.role, _label(plan, prepared.planner))
        session.record_point(record)
        points.append(record)
        known[point_id(record.assignment)] = record
        reporter.finished(record, objective)


def _runner(prepared: Prepared, ctx: Context) -> PointRunner:
    deployer = ctx.deployer
    if deployer is None:
        from k26ctl.search.step import HostDeployer

        deployer = HostDeployer(
            smoke_in_deploy=True, on_event=ctx.on_deploy_event, accept_new_host_key=ctx.accept_new_host_key
        )
    return PointRunner(prepared.base, deployer, ctx.measure or http_measure(prepared.load))


def _confirm(ctx: Context, question: str) -> None:
    confirm_restarts(_session(ctx), ctx.confirm, question, yes=ctx.yes, per="point")


def _session(ctx: Context) -> SweepSession:
    return SweepSession(ctx.session, ctx.state_directory)


def describe_space(spec: SweepSpec) -> str:
    params = spec.param_list()
    sizes = " x ".join(f"{p.key} ({len(p.values)})" for p in params)
    return (
        f"{sizes} = {len(grid(params))} points; {spec.objective_obj().describe()}; "
        f"at most {spec.max_restarts} restarts"
    )


def start(spec: SweepSpec, ctx: Context) -> SweepResult:
    session = _session(ctx)
    session.refuse_existing()
    prepared = prepare(spec)
    ctx.note(describe_space(spec))
    _confirm(ctx, f"Sweep {describe_space(spec)}, restarting the service for each point?")
    with session.locked():
        session.refuse_existing()
        if ctx.deployer is None:
            from k26ctl.search.restore import capture_live

            spec.original = capture_live(prepared.base, accept_new_host_key=ctx.accept_new_host_key)
        session.create(spec)
        return run_sweep(session, spec, prepared, _runner(prepared, ctx), ctx.reporter)


def resume(ctx: Context) -> SweepResult:
    session = _session(ctx)
    spec = session.spec()
    prepared = prepare(spec)
    _confirm(ctx, f"Resume the sweep of {describe_space(spec)}?")
    with session.locked():
        return run_sweep(session, spec, prepared, _runner(prepared, ctx), ctx.reporter)


def current_result(ctx: Context) -> tuple[SweepSpec, SweepResult, BadStateError | None]:
    """The session as it stands (for `sweep log`), without deploying anything: the points that read,
    and the error for the records that do not (the caller shows the rest, then reports it)."""
    session = _session(ctx)
    spec = session.spec()
    prepared = prepare(spec)
    read = session.read_points()
    points = read.items
    known = by_id(points)

    def lookup(assignment: Assignment) -> Any:
        found = known.get(point_id(assignment))
        return found.evaluation(prepared.objective) if found is not None else None

    restarts = sum(1 for p in points if p.restarted)
    plan = prepared.planner.plan(lookup, can_pay=restarts < spec.max_restarts)
    status = plan.status if isinstance(plan, Finished) else "unfinished"
    best_assignment = prepared.planner.best_known(lookup)
    best = known.get(point_id(best_assignment)) if best_assignment is not None else None
    result = SweepResult(session.name, status, prepared.objective, points, best, spec.max_restarts)
    return spec, result, read.error(session.log_name, session.reset_hint())


def reset(ctx: Context, *, restore: bool = True) -> ResetResult:
    """Put back the deployment that was live before the sweep, then forget the session."""
    session = _session(ctx)
    spec = session.spec()
    return reset_session(
        session,
        spec.original,
        lambda: load_profile(spec.profile, spec.sets),
        lambda question: _confirm(ctx, question),
        restore=restore,
        on_event=ctx.on_deploy_event,
        accept_new_host_key=ctx.accept_new_host_key,
    )
