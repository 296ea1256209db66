"""`k26ctl deploy PROFILE`: plan, apply, restart on change, wait for readiness, smoke, record.

Confirmation: with --yes (or K26CTL_YES=1) changes are applied without asking. Otherwise k26ctl asks
on the terminal; with no terminal (CI, cron, a pipe) it never prompts: a deploy that would change the
host stops before changing anything, exit 2, and says to pass --yes (like terraform apply without
-auto-approve). --check and deploys with nothing to change never need confirmation.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from k26ctl.cli.common import (
    accept_new_host_key_option,
    html_option,
    json_option,
    profile_argument,
    set_option,
    verbose_option,
    yes_option,
)
from k26ctl.errors import UsageError


def interactive() -> bool:
    return sys.stdin.isatty() and sys.stderr.isatty()


def deploy_command(
    profile: str = profile_argument("Profile file (or shipped profile name), or a fleet file."),
    overrides: list[str] = set_option(),
    check: bool = typer.Option(
        False, "--check", help="Only say what would change: exit 0 nothing to do, 3 changes pending."
    ),
    diff: bool = typer.Option(False, "--diff", help="Show unified diffs of the unit and the patches."),
    force: bool = typer.Option(False, "--force", help="Restart even when nothing changed."),
    smoke: bool | None = typer.Option(
        None,
        "--smoke/--no-smoke",
        help="Run the smoke suite after the deploy (default: when speculative settings changed).",
    ),
    rollback_on_failure: bool = typer.Option(
        False,
        "--rollback-on-failure",
        help="Restore the previous unit and patches when the deploy fails.",
    ),
    as_json: bool = json_option(),
    html: Path | None = html_option(),
    yes: bool = yes_option(),
    accept_new_host_key: bool = accept_new_host_key_option(),
    verbose: bool = verbose_option(),
    serial: int | None = typer.Option(
        None, "--serial", min=1, help="Fleet: members per batch after the canary."
    ),
    max_fail: int | None = typer.Option(None, "--max-fail", min=0, help="Fleet: failed members tolerated."),
    min_healthy: int | None = typer.Option(
        None, "--min-healthy", min=0, help="Fleet: never leave fewer healthy workers in the router."
    ),
    drain_timeout: float | None = typer.Option(
        None, "--drain-timeout", help="Fleet: seconds to reach load 0."
    ),
    soak: float | None = typer.Option(None, "--soak", help="Fleet: seconds to watch a member once back."),
    resume: bool = typer.Option(False, "--resume", help="Fleet: continue a halted or interrupted roll."),
) -> None:
    """Deploy PROFILE to its host and prove the model came up and speaks sense. Given a fleet file
    (top-level `fleet:`), roll it across the members behind the router: canary, then batches.

    Exit codes: 0 ok (or nothing to do), 1 the deploy failed (not ready, smoke failed, lock held),
    2 usage (also: changes pending with no terminal and no --yes), 3 changes pending (--check),
    69 host unreachable, 78 bad profile, 130 interrupted (the message says which unit is in place).
    Without a terminal k26ctl never prompts: changes need --yes or K26CTL_YES=1."""
    from k26ctl.cli.common import check_html
    from k26ctl.cli.fleet_cmd import deploy_fleet, is_fleet, refuse_fleet_options

    if check and html is not None:
        raise UsageError("--html draws what a deploy did; --check does nothing", "drop --check or --html")
    check_html(html)

    roll: dict[str, Any] = {"serial": serial, "max_fail": max_fail, "min_healthy": min_healthy,
            "drain_timeout": drain_timeout, "soak": soak, "resume": resume}  # fmt: skip
    if is_fleet(profile):
        if force or smoke is not None or rollback_on_failure:
            raise UsageError("--force, --smoke/--no-smoke and --rollback-on-failure do not apply to a fleet")
        deploy_fleet(profile, overrides, check=check, diff=diff, as_json=as_json, yes=yes,
                     accept_new_host_key=accept_new_host_key, html=html, **roll)  # fmt: skip
    refuse_fleet_options(**roll)
    from k26ctl.deploy.preload import preload

    preload()
    from k26ctl.deploy import DeployOptions, deploy
    from k26ctl.profile import load_profile

    loaded = load_profile(profile, overrides)
    opts = DeployOptions(
        check=check,
        diff=diff,
        force=force,
        smoke=smoke,
        rollback_on_failure=rollback_on_failure,
        yes=yes,
        confirm=confirmer(yes),
        accept_new_host_key=accept_new_host_key,
    )
    run_and_present(deploy, loaded, opts, verbose=verbose, as_json=as_json, show_diff=diff, html=html)


def confirmer(yes: bool) -> Any:
    """The terminal prompt, or None where nobody can answer (then changes need --yes)."""
    from k26ctl.cli.present.deploy import confirm_on_terminal

    return confirm_on_terminal if (not yes and interactive()) else None


def run_and_present(
    action: Callable[..., Any],
    loaded: Any,
    opts: Any,
    *,
    verbose: bool,
    as_json: bool,
    show_diff: bool = False,
    html: Path | None = None,
) -> None:
    """Run deploy or rollback with progress on stderr, print the result, exit with its code."""
    from k26ctl.cli.common import print_json, write_html
    from k26ctl.cli.present.deploy import make_presenter, result_text

    presenter = make_presenter(rich=_rich(), verbose=verbose)
    try:
        result = action(loaded, opts, on_event=presenter)
    finally:
        presenter.close()
    if not opts.check:
        write_html(result.to_json(), html)
    if as_json:
        print_json(result.to_json())
    else:
        print(result_text(result, show_diff=show_diff), flush=True)
    raise typer.Exit(result.exit_code)


def _rich() -> Any:
    from k26ctl.cli.common import use_color

    return sys.stderr.isatty() and use_color()


def register(app: typer.Typer) -> None:
    app.command("deploy")(deploy_command)
