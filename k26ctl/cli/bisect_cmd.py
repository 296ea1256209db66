"""`k26ctl bisect-config`: find the first bad value of a setting, or the culprit keys, in few restarts.

A command group: `start` (the default: `bisect-config PROFILE ...` and `bisect-config --resume` run it),
`log`, `replay FILE` and `reset`."""

from __future__ import annotations

import sys
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
    write_html,
    yes_option,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from k26ctl.bisect.api import Context
    from k26ctl.bisect.engine import SearchResult

HELP = """Find what breaks the output, in as few restarts as the search allows (resumable).

\b
Forms (start is the default command: its name may be left out):
  k26ctl bisect-config PROFILE --param KEY --good A --bad B [--values v1,v2,...]
      binary search for the first bad value of KEY (integers between A and B, or the --values
      list in its order); both ends are deployed first unless --no-verify-ends
  k26ctl bisect-config --good-profile G --bad-profile B
      which of the keys that differ between two profiles break it (delta debugging), then the
      first bad value of numeric culprits (--no-refine to stop at the keys)
  k26ctl bisect-config --resume          continue after Ctrl-C, a lost connection or a crash
  k26ctl bisect-config log               print the session as a replayable log
  k26ctl bisect-config replay FILE       start a session from a log's verdicts, then finish it
  k26ctl bisect-config reset             put back the deployment live before the search; end it

\b
Each step deploys the value (restart only on change), waits for readiness and judges it:
smoke passes = good, smoke fails = bad, the service does not come up = skip (--load-failure-is-bad
to call it bad). --run CMD judges instead of smoke, with git bisect run exit codes: 0 good,
125 skip, 1-127 bad, >= 128 aborts. State: $XDG_STATE_HOME/k26ctl/bisect/SESSION.json and .log.jsonl.
A profile file named like a command: k26ctl bisect-config start NAME (or ./NAME).
Exit: 0 found, 1 inconclusive (skips) or an end check failed, 2 usage, 78 bad profile."""

START_HELP = """Search for the first bad value of --param between --good and --bad (numeric mode), or for
the keys that break --bad-profile against --good-profile (set mode); --resume continues the session.

\b
Each step deploys the value (restart only on change), waits for readiness and judges it:
smoke passes = good, smoke fails = bad, the service does not come up = skip (--load-failure-is-bad
to call it bad). --run CMD judges instead of smoke, with git bisect run exit codes: 0 good,
125 skip, 1-127 bad, >= 128 aborts. CMD sees K26_BISECT_KEY, K26_BISECT_VALUE, K26_BISECT_ASSIGNMENT,
K26_BISECT_PROFILE and K26_BISECT_URL. --tries N judges each step up to N times: one bad try makes it
bad, good needs all N good.
Exit: 0 found, 1 inconclusive (skips) or an end check failed, 2 usage, 78 bad profile."""


START_SHORT = "(default) Search PROFILE --param KEY --good A --bad B, or two profiles; --resume."


def session_option() -> Any:
    return typer.Option(
        "default",
        "--session",
        metavar="NAME",
        envvar="K26CTL_BISECT_SESSION",
        help="Session name (several searches).",
    )


def start(
    target: str | None = profile_argument(
        "Profile to search (numeric mode; none with --resume or set mode).", required=False
    ),
    param: str | None = typer.Option(None, "--param", "-p", metavar="KEY", help="Dotted profile key."),
    good: str | None = typer.Option(None, "--good", metavar="A", help="A value known to work."),
    bad: str | None = typer.Option(None, "--bad", metavar="B", help="A value known to fail."),
    values: str | None = typer.Option(
        None, "--values", metavar="V1,V2,...", help="Ordered candidates (default: the integers A..B)."
    ),
    overrides: list[str] = set_option(),
    good_profile: str | None = typer.Option(
        None, "--good-profile", metavar="PROFILE", help="Set mode: a profile that works."
    ),
    bad_profile: str | None = typer.Option(
        None, "--bad-profile", metavar="PROFILE", help="Set mode: a profile that fails."
    ),
    run: str | None = typer.Option(None, "--run", metavar="CMD", help="Judge with CMD instead of smoke."),
    no_deploy: bool = typer.Option(
        False, "--no-deploy", help="Only run --run CMD per step (the command deploys by itself)."
    ),
    tries: int = typer.Option(1, "--tries", min=1, help="Judge each step up to N times (flaky checks)."),
    no_verify_ends: bool = typer.Option(False, "--no-verify-ends", help="Trust --good and --bad."),
    load_failure_is_bad: bool = typer.Option(
        False, "--load-failure-is-bad", help="A value whose service does not come up is bad, not skip."
    ),
    no_refine: bool = typer.Option(False, "--no-refine", help="Set mode: stop at the culprit keys."),
    resume: bool = typer.Option(False, "--resume", help="Continue the session's search."),
    session: str = session_option(),
    yes: bool = yes_option(),
    as_json: bool = json_option(),
    html: Path | None = html_option(),
    accept_new_host_key: bool = accept_new_host_key_option(),
) -> None:
    from k26ctl.bisect import api
    from k26ctl.errors import UsageError

    check_html(html)
    ctx = _context(session, yes, accept_new_host_key)
    search_flags = {
        "--param": param,
        "--good": good,
        "--bad": bad,
        "--values": values,
        "--good-profile": good_profile,
        "--bad-profile": bad_profile,
        "--run": run,
    }
    given = [flag for flag, value in search_flags.items() if value is not None]
    if resume:
        if given:
            raise UsageError(
                f"--resume takes no search options ({', '.join(given)})",
                "the session remembers how it searches",
            )
        if target is not None:
            raise UsageError("--resume takes no PROFILE", "the session remembers its profile")
        _finish(_interruptible(lambda: api.resume(ctx), session), as_json, html)
        return
    options = api.SearchOptions(
        run=run,
        deploy=not no_deploy,
        tries=tries,
        verify_ends=not no_verify_ends,
        load_failure_is_bad=load_failure_is_bad,
        refine=not no_refine,
    )
    if good_profile is not None or bad_profile is not None:
        if good_profile is None or bad_profile is None or target is not None or param is not None:
            raise UsageError(
                "set mode takes --good-profile and --bad-profile (no PROFILE, no --param)",
                "k26ctl bisect-config --good-profile A.yaml --bad-profile B.yaml",
            )
        spec = api.set_spec(good_profile, bad_profile, overrides, options)
    else:
        if target is None or param is None:
            raise UsageError(
                "give PROFILE --param KEY --good A --bad B (or --good-profile/--bad-profile)",
                "e.g. k26ctl bisect-config profiles/ddtree-b16.yaml --param spec.ddtree.budget "
                "--good 7 --bad 16",
            )
        spec = api.numeric_spec(target, param, good, bad, values, overrides, options)
    _finish(_interruptible(lambda: api.start(spec, ctx), session), as_json, html)


def log(
    session: str = session_option(), as_json: bool = json_option(), html: Path | None = html_option()
) -> None:
    """Print the session as a replayable log: one shell line per step that reproduces its verdict."""
    from k26ctl.bisect import api

    check_html(html)
    ctx = _context(session, yes=False, accept_new_host_key=False)
    if as_json or html is not None:
        document, unreadable = api.log_json(ctx)
        if html is not None:
            write_html(document, html)
    if as_json:
        print_json(document)
    else:
        text, unreadable = api.log_text(ctx)
        sys.stdout.write(text)
    if unreadable is not None:  # the steps that read are shown above; the search must not resume
        raise unreadable


def replay(
    file: Path = typer.Argument(..., metavar="FILE", help="A log written by `bisect-config log`."),
    run_recorded_command: bool = typer.Option(
        False,
        "--run-recorded-command",
        help="Allow the log's --run CMD, after confirming that exact command on a terminal.",
    ),
    session: str = session_option(),
    yes: bool = yes_option(),
    as_json: bool = json_option(),
    accept_new_host_key: bool = accept_new_host_key_option(),
) -> None:
    """Start a session from a log's verdicts, then deploy the steps the log does not settle.

    A log that judges with --run CMD is refused unless --run-recorded-command is given and CMD is
    confirmed on a terminal (--yes never covers it)."""
    from k26ctl.bisect import api

    ctx = _context(session, yes, accept_new_host_key, run_recorded_command=run_recorded_command)
    _finish(_interruptible(lambda: api.replay(file, ctx), session), as_json)


def reset(
    keep_deployment: bool = keep_deployment_option(),
    session: str = session_option(),
    yes: bool = yes_option(),
    as_json: bool = json_option(),
    accept_new_host_key: bool = accept_new_host_key_option(),
) -> None:
    """Put back the deployment that was live before the search (restart), then end the session."""
    from k26ctl.bisect import api

    show_reset(api.reset(_context(session, yes, accept_new_host_key), restore=not keep_deployment), as_json)


def _context(
    session: str, yes: bool, accept_new_host_key: bool, *, run_recorded_command: bool = False
) -> Context:
    from k26ctl.bisect import api
    from k26ctl.cli.present.bisect import ProgressPrinter

    printer = ProgressPrinter()
    return api.Context(
        session=session,
        yes=yes,
        confirm=terminal_confirm(),
        run_recorded_command=run_recorded_command,
        reporter=printer,
        note=printer.note,
        on_deploy_event=printer.deploy_event,
        accept_new_host_key=accept_new_host_key,
    )


def _finish(result: SearchResult, as_json: bool, html: Path | None = None) -> None:
    write_html(result.to_json(), html)
    if as_json:
        print_json(result.to_json())
    else:
        from k26ctl.cli.present.bisect import search_summary

        print(search_summary(result))
    if not result.found:
        raise typer.Exit(1)


def _interruptible(call: Callable[[], SearchResult], session: str) -> SearchResult:
    return resumable(call, "bisect-config", "finished steps are saved", session)


def register(app: typer.Typer) -> None:
    group = typer.Typer(cls=DefaultCommandGroup, help=HELP)
    group.command("start", help=START_HELP, short_help=START_SHORT)(start)
    group.command("log")(log)
    group.command("replay")(replay)
    group.command("reset")(reset)
    app.add_typer(group, name="bisect-config")
