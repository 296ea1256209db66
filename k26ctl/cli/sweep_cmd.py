"""`k26ctl sweep`: the fastest configuration that still passes smoke, in few restarts.

A command group: `start` (the default: `sweep PROFILE ...` and `sweep --resume` run it), `log`, `reset`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from k26ctl.cli.common import (
    DefaultCommandGroup,
    accept_new_host_key_option,
    check_html,
    html_option,
    json_option,
    keep_deployment_option,
    print_json,
    profile_argument,
    resumable,
    set_option,
    show_reset,
    terminal_confirm,
    yes_option,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from k26ctl.sweep.api import Context
    from k26ctl.sweep.result import SweepResult
    from k26ctl.sweep.state import SweepSpec

HELP = """Find the fastest coherent configuration over profile keys, in few restarts (resumable).

\b
Forms (start is the default command: its name may be left out):
  k26ctl sweep PROFILE --param KEY=SPEC [--param KEY=SPEC ...] [--concurrency 1,4,8] [--target C]
  k26ctl sweep --resume            continue after Ctrl-C, a lost connection or a crash
  k26ctl sweep log                 the points measured so far (table, or --json)
  k26ctl sweep reset               put back the deployment live before the sweep; end it

\b
State: $XDG_STATE_HOME/k26ctl/sweep/SESSION.json and .log.jsonl.
A profile file named like a command: k26ctl sweep start NAME (or ./NAME).
Exit: 0 a best point, 1 none."""

START_HELP = """Sweep PROFILE over --param KEY=SPEC values; --resume continues the session.

\b
SPEC: A..B (integers), A..B:STEP, V1,V2,... or a YAML flow list [V1, V2] (e.g. patches=[[], [NAME]]).
Each point is deployed (restart), gated by smoke (an incoherent point is recorded, never measured or
recommended), then measured with chat-templated prompts over streaming /generate at every
--concurrency level: output tokens/s, accept length per request (meta_info), p50/p99 TTFT and ITL.
Speculation off and the plain DFlash chain are measured as controls. The search: coordinate passes
of a golden-section search per key (throughput unimodal, coherence changing at most once along a
key), never paying twice for a point. Objective: output tokens/s at --target (default: the lowest
--concurrency), optionally under --max-ttft-p99 / --max-itl-p99 (ms).
Exit: 0 a best point, 1 none."""

START_SHORT = "(default) Sweep PROFILE over --param KEY=SPEC values; --resume."


def session_option() -> Any:
    return typer.Option(
        "default", "--session", metavar="NAME", envvar="K26CTL_SWEEP_SESSION", help="Session name."
    )


def write_profile_option() -> Any:
    return typer.Option(
        None, "--write-profile", metavar="FILE", help="Write the best point as a profile extending PROFILE."
    )


def _levels(text: str) -> list[int]:
    from k26ctl.errors import UsageError

    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"--concurrency {text!r}: integers separated by commas", "e.g. 1,4,8") from None


def start(
    target: str | None = profile_argument("Profile to sweep (none with --resume).", required=False),
    params: list[str] = typer.Option([], "--param", "-p", metavar="KEY=SPEC", help="A key and its values."),
    concurrency: str = typer.Option("1,4", "--concurrency", "-c", metavar="C1,C2,...", help="Load levels."),
    objective_at: int | None = typer.Option(None, "--target", metavar="C", help="Concurrency to optimise."),
    max_ttft: float | None = typer.Option(
        None,
        "--max-ttft-p99",
        metavar="MS",
        help="Objective limit: p99 time to first token at --target (ms).",
    ),
    max_itl: float | None = typer.Option(
        None, "--max-itl-p99", metavar="MS", help="Objective limit: p99 inter-token latency at --target (ms)."
    ),
    max_restarts: int = typer.Option(12, "--max-restarts", min=1, help="Restart budget, controls included."),
    requests: int = typer.Option(16, "--requests", min=1, help="Requests per level (at least 2 x C)."),
    max_tokens: int = typer.Option(128, "--max-tokens", min=2, help="Output tokens per request."),
    template: str | None = typer.Option(None, "--chat-template", help="chatml (lab) or kimi_k2."),
    no_controls: bool = typer.Option(False, "--no-controls", help="Skip speculation off / DFlash chain."),
    overrides: list[str] = set_option(),
    write_profile: Path | None = write_profile_option(),
    resume: bool = typer.Option(False, "--resume", help="Continue the session's sweep."),
    session: str = session_option(),
    yes: bool = yes_option(),
    as_json: bool = json_option(),
    html: Path | None = html_option(),
    accept_new_host_key: bool = accept_new_host_key_option(),
) -> None:
    from k26ctl.errors import UsageError
    from k26ctl.sweep import api
    from k26ctl.sweep.space import parse_param

    check_html(html)
    ctx = _context(session, yes, accept_new_host_key)
    if resume:
        if params:
            raise UsageError("--param belongs to a new sweep", "the session remembers its parameters")
        if target is not None:
            raise UsageError("--resume takes no PROFILE", "the session remembers its profile")
        spec = api.SweepSession(session).spec()
        result = _interruptible(lambda: api.resume(ctx), session)
    else:
        if target is None or not params:
            raise UsageError(
                "give PROFILE and at least one --param KEY=SPEC",
                "e.g. k26ctl sweep profiles/ddtree-b16-patched.yaml --param spec.ddtree.budget=4..24",
            )
        spec = api.build_spec(
            target,
            [parse_param(p) for p in params],
            concurrency=_levels(concurrency),
            target=objective_at,
            max_ttft_p99_ms=max_ttft,
            max_itl_p99_ms=max_itl,
            sets=overrides,
            max_restarts=max_restarts,
            requests_per_level=requests,
            max_new_tokens=max_tokens,
            template=template,
            controls=not no_controls,
        )
        result = _interruptible(lambda: api.start(spec, ctx), session)
    _finish(spec, result, session, write_profile, as_json, html)


def log(
    write_profile: Path | None = write_profile_option(),
    session: str = session_option(),
    as_json: bool = json_option(),
    html: Path | None = html_option(),
) -> None:
    """The points measured so far: the table with the Pareto front, or --json. Exit 1 without a best point."""
    from k26ctl.sweep import api

    check_html(html)
    spec, result, unreadable = api.current_result(_context(session, yes=False, accept_new_host_key=False))
    if unreadable is not None:
        write_profile = None  # the best of an incomplete log is no basis for a profile
    try:
        _finish(spec, result, session, write_profile, as_json, html)
    finally:
        if unreadable is not None:  # the points that read are shown; this error (exit 78) wins
            raise unreadable


def reset(
    keep_deployment: bool = keep_deployment_option(),
    session: str = session_option(),
    yes: bool = yes_option(),
    as_json: bool = json_option(),
    accept_new_host_key: bool = accept_new_host_key_option(),
) -> None:
    """Put back the deployment that was live before the sweep (restart), then end the session."""
    from k26ctl.sweep import api

    show_reset(api.reset(_context(session, yes, accept_new_host_key), restore=not keep_deployment), as_json)


def _context(session: str, yes: bool, accept_new_host_key: bool) -> Context:
    from k26ctl.cli.present.sweep import SweepProgress
    from k26ctl.sweep import api

    progress = SweepProgress()
    return api.Context(
        session=session,
        yes=yes,
        confirm=terminal_confirm(),
        reporter=progress,
        note=progress.note,
        on_deploy_event=progress.deploy_event,
        accept_new_host_key=accept_new_host_key,
    )


def _finish(
    spec: SweepSpec,
    result: SweepResult,
    session: str,
    write_profile: Path | None,
    as_json: bool,
    html: Path | None = None,
) -> None:
    from k26ctl.cli.common import write_html
    from k26ctl.cli.present.sweep import render_table
    from k26ctl.sweep.result import write_winner

    write_html(result.to_json(), html)
    if write_profile is not None and result.best is not None:
        write_winner(write_profile, spec.profile, spec.sets, result.best.assignment, f"sweep-{session}")
    if as_json:
        print_json(result.to_json())
    else:
        render_table(result)
    if result.best is None:
        raise typer.Exit(1)


def _interruptible(call: Callable[[], SweepResult], session: str) -> SweepResult:
    return resumable(call, "sweep", "measured points are saved", session)


def register(app: typer.Typer) -> None:
    group = typer.Typer(cls=DefaultCommandGroup, help=HELP)
    group.command("start", help=START_HELP, short_help=START_SHORT)(start)
    group.command("log")(log)
    group.command("reset")(reset)
    app.add_typer(group, name="sweep")
