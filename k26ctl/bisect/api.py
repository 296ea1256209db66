"""The operations behind `k26ctl bisect-config`: start, resume, replay, log, reset.

Each returns a result object; the CLI only parses options and presents results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from k26ctl.bisect.candidates import build_candidates
from k26ctl.bisect.ddmin import SetSearch
from k26ctl.bisect.engine import Reporter, SearchResult, Strategy, run_search
from k26ctl.bisect.logfile import parse_log, render_log
from k26ctl.bisect.numeric import NumericSearch, max_probes
from k26ctl.bisect.plan import Change, Probe
from k26ctl.bisect.session import Session, SessionSpec, StepRecord
from k26ctl.bisect.setdiff import differing_keys
from k26ctl.bisect.steps import CommandJudge, DeployingStepRunner
from k26ctl.deploy.plan import sha256_text
from k26ctl.documents import tagged
from k26ctl.errors import ConfigError, K26Error, UsageError
from k26ctl.profile import LoadedProfile, load_profile
from k26ctl.render import render_unit
from k26ctl.search.assignment import assignment_id, with_assignment
from k26ctl.search.ops import ResetResult, confirm_restarts, reset_session
from k26ctl.search.restore import capture_live
from k26ctl.search.session import DEFAULT_SESSION
from k26ctl.search.step import HostDeployer
from k26ctl.statefile import BadStateError
from k26ctl.termsafe import clean
from k26ctl.validate import ensure_valid

Confirm = Callable[[str], bool]


@dataclass
class SearchOptions:
    run: str | None = None
    deploy: bool = True
    tries: int = 1
    verify_ends: bool = True
    load_failure_is_bad: bool = False
    refine: bool = True


@dataclass
class Context:
    """How this invocation talks to the operator."""

    session: str = DEFAULT_SESSION
    yes: bool = False
    confirm: Confirm | None = None  # None: no terminal to ask on
    reporter: Reporter | None = None
    note: Callable[[str], None] = field(default=lambda message: None)
    on_deploy_event: Callable[[Any], None] | None = None
    accept_new_host_key: bool = False
    state_directory: Path | None = None
    run_recorded_command: bool = False  # replay: the operator allows the log's --run CMD (still confirmed)


def _abs(path: str) -> str:
    return str(Path(path).expanduser().resolve())


def numeric_spec(
    profile: str,
    param: str,
    good: str | None,
    bad: str | None,
    values: str | None,
    sets: Sequence[str],
    options: SearchOptions,
) -> SessionSpec:
    return SessionSpec(
        mode="numeric",
        profile=_abs(profile) if Path(profile).exists() else profile,
        param=param,
        candidates=build_candidates(good, bad, values),
        sets=list(sets),
        **_option_fields(options),
    )


def set_spec(good_profile: str, bad_profile: str, sets: Sequence[str], options: SearchOptions) -> SessionSpec:
    good = load_profile(good_profile, sets)
    bad = load_profile(bad_profile, sets)
    changes = differing_keys(good.profile, bad.profile)
    if not changes:
        raise ConfigError(
            f"{good_profile} and {bad_profile} do not differ (after --set)", "give two different profiles"
        )
    return SessionSpec(
        mode="set",
        good_profile=_abs(good_profile) if Path(good_profile).exists() else good_profile,
        bad_profile=_abs(bad_profile) if Path(bad_profile).exists() else bad_profile,
        changes=[c.to_json() for c in changes],
        sets=list(sets),
        **_option_fields(options),
    )


def _option_fields(options: SearchOptions) -> dict[str, Any]:
    if options.tries < 1:
        raise UsageError(f"--tries {options.tries}: must be at least 1")
    if not options.deploy and not options.run:
        raise UsageError("--no-deploy needs --run CMD", "without a deploy only the command can judge a value")
    return {
        "run": options.run,
        "deploy": options.deploy,
        "tries": options.tries,
        "verify_ends": options.verify_ends,
        "load_failure_is_bad": options.load_failure_is_bad,
        "refine": options.refine,
    }


@dataclass
class Prepared:
    base: LoadedProfile
    strategy: Strategy
    description: str


def prepare(spec: SessionSpec) -> Prepared:
    """Load the profiles and build the strategy; every candidate end is validated locally first."""
    if spec.mode == "numeric":
        assert spec.profile is not None and spec.param is not None
        base = load_profile(spec.profile, spec.sets)
        search = NumericSearch(
            spec.param, spec.candidates, verify_ends=spec.verify_ends, bad_end_first=spec.bad_end_first
        )
        listed = spec.candidates if len(spec.candidates) <= 64 else [spec.candidates[0], spec.candidates[-1]]
        for value in listed:
            checked = with_assignment(base, {spec.param: value})
            if spec.deploy:
                _validate(checked)
        bound = max_probes(len(spec.candidates), verify_ends=spec.verify_ends)
        description = (
            f"{spec.param}: {len(spec.candidates)} candidates from {spec.candidates[0]!r} (good) to "
            f"{spec.candidates[-1]!r} (bad); at most {bound} deploys without skips (a sweep takes "
            f"{len(spec.candidates)})"
        )
        return Prepared(base, search, description)
    assert spec.good_profile is not None
    base = load_profile(spec.good_profile, spec.sets)
    changes = [Change(c["key"], c["good"], c["bad"]) for c in spec.changes]
    for subset in ({}, {c.key: c.bad for c in changes}):
        checked = with_assignment(base, subset)
        if spec.deploy:
            _validate(checked)
    keys = ", ".join(c.key for c in changes)
    description = f"{len(changes)} changed keys between the good and the bad profile: {keys}"
    return Prepared(base, SetSearch(changes, verify_ends=spec.verify_ends, refine=spec.refine), description)


def _validate(loaded: LoadedProfile) -> None:
    ensure_valid(loaded.profile)


def _runner(spec: SessionSpec, prepared: Prepared, ctx: Context) -> DeployingStepRunner:
    judge = CommandJudge(spec.run, session=ctx.session, cwd=spec.cwd) if spec.run else None
    deployer = (
        HostDeployer(
            smoke_in_deploy=judge is None,
            on_event=ctx.on_deploy_event,
            accept_new_host_key=ctx.accept_new_host_key,
        )
        if spec.deploy
        else None
    )
    return DeployingStepRunner(
        base=prepared.base,
        deployer=deployer,
        judge=judge,
        tries=spec.tries,
        load_failure_is_bad=spec.load_failure_is_bad,
        note=ctx.note,
    )


def _confirm(ctx: Context, question: str) -> None:
    confirm_restarts(_session(ctx), ctx.confirm, question, yes=ctx.yes, per="step")


def _session(ctx: Context) -> Session:
    return Session(ctx.session, ctx.state_directory)


def start(spec: SessionSpec, ctx: Context) -> SearchResult:
    session = _session(ctx)
    session.refuse_existing()
    prepared = prepare(spec)
    ctx.note(prepared.description)
    _confirm(ctx, f"Search {prepared.description}, restarting the service on its host for each step?")
    with session.locked():
        session.refuse_existing()
        if spec.deploy:
            spec.original = capture_live(prepared.base, accept_new_host_key=ctx.accept_new_host_key)
            if _live_is_bad_end(spec, prepared.base) and isinstance(prepared.strategy, NumericSearch):
                spec.bad_end_first = True
                prepared.strategy = replace(prepared.strategy, bad_end_first=True)
                ctx.note(
                    f"the host runs the bad end ({spec.param}={spec.candidates[-1]!r}) now: it is judged "
                    "first, without a restart"
                )
        session.create(spec)
        return run_search(session, prepared.strategy, _runner(spec, prepared, ctx), ctx.reporter)


def _live_is_bad_end(spec: SessionSpec, base: LoadedProfile) -> bool:
    """The running service was started from the bad end's unit and patch set (numeric, ends verified)."""
    original = spec.original
    if spec.mode != "numeric" or not spec.verify_ends or not original or not original.get("running"):
        return False
    bad = with_assignment(base, {str(spec.param): spec.candidates[-1]}).profile
    return original.get("unit_sha") == sha256_text(render_unit(bad)) and sorted(
        original.get("patches") or []
    ) == sorted(bad.patches)


def resume(ctx: Context) -> SearchResult:
    session = _session(ctx)
    spec = session.spec()
    prepared = prepare(spec)
    if session.outcome() is None:
        _confirm(ctx, f"Resume the search of {prepared.description}?")
    with session.locked():
        return run_search(session, prepared.strategy, _runner(spec, prepared, ctx), ctx.reporter)


def replay(path: Path, ctx: Context) -> SearchResult:
    """Start a session from a log's verdicts (no deploy for them), then finish the search if needed.

    A log whose search judges with `--run CMD` would run CMD for the remaining steps: that command
    comes from a file, so it runs only when the operator passed `--run-recorded-command` AND
    confirmed that exact command and directory on a terminal (`--yes` never covers it)."""
    parsed = parse_log(path)
    session = _session(ctx)
    session.refuse_existing()
    spec = parsed.spec
    prepared = prepare(spec)
    plan_done = _plan_done(parsed.steps, prepared)
    if spec.run and not plan_done:
        _confirm_recorded_command(ctx, spec.run, spec.cwd)
    with session.locked():
        session.refuse_existing()
        spec.original = None
        session.create(spec)
        for step in parsed.steps:
            session.record_finish(step)
        if not plan_done:
            _confirm(ctx, f"The log does not finish the search of {prepared.description}: deploy the rest?")
            if spec.deploy:
                spec.original = capture_live(prepared.base, accept_new_host_key=ctx.accept_new_host_key)
                session.create_keep_log(spec)
        return run_search(session, prepared.strategy, _runner(spec, prepared, ctx), ctx.reporter)


def _plan_done(steps: list[StepRecord], prepared: Prepared) -> bool:
    verdicts = {assignment_id(s.assignment): s.verdict for s in steps}
    return not isinstance(prepared.strategy.plan(lambda a: verdicts.get(assignment_id(a))), Probe)


def _confirm_recorded_command(ctx: Context, command: str, cwd: str) -> None:
    shown = f"command {clean(command, limit=2000)!r} in directory {clean(cwd, limit=500)!r}"
    if not ctx.run_recorded_command:
        raise UsageError(
            f"the log judges each step by running a {shown}; replay does not run commands from a file: "
            "nothing was changed",
            "read the command; to run it, pass --run-recorded-command and confirm it on a terminal",
        )
    if ctx.confirm is None:
        raise UsageError(
            f"--run-recorded-command needs a terminal to confirm the {shown} (--yes does not cover it): "
            "nothing was changed",
            "run the replay from an interactive terminal",
        )
    if not ctx.confirm(f"The log runs this {shown} for each remaining step. Run it?"):
        raise K26Error("bisect-config replay cancelled: nothing was changed")


def log_text(ctx: Context) -> tuple[str, BadStateError | None]:
    """The replayable log of every step that reads, and the error for the records that do not
    (the caller shows the log, then reports the error)."""
    session = _session(ctx)
    steps = session.read_steps()
    text = render_log(session.name, session.spec(), steps.items, session.outcome())
    return text, steps.error(session.log_name, session.reset_hint())


def log_json(ctx: Context) -> tuple[dict[str, Any], BadStateError | None]:
    """The session as one JSON document (the spec without the captured original deployment), and
    the error for unreadable records, as `log_text`."""
    session = _session(ctx)
    steps = session.read_steps()
    document = tagged(
        "bisect-log",
        {
            "session": session.name,
            "spec": {k: v for k, v in session.spec().to_json().items() if k != "original"},
            "steps": [s.to_json() for s in steps.items],
            "outcome": session.outcome(),
        },
    )
    return document, steps.error(session.log_name, session.reset_hint())


def reset(ctx: Context, *, restore: bool = True) -> ResetResult:
    """Put back the deployment that was live before the search, then forget the session."""
    session = _session(ctx)
    spec = session.spec()
    profile = spec.profile if spec.mode == "numeric" else spec.good_profile
    assert profile is not None
    return reset_session(
        session,
        spec.original if spec.deploy else None,
        lambda: load_profile(profile, spec.sets),
        lambda question: _confirm(ctx, question),
        restore=restore and spec.deploy,
        on_event=ctx.on_deploy_event,
        accept_new_host_key=ctx.accept_new_host_key,
        nothing_captured="nothing was captured before the search (a replayed log): the host was left as it"
        " is",
    )
