"""`k26ctl status`, `k26ctl logs` and `k26ctl rollback`: the service as it runs on the host."""

from __future__ import annotations

import sys
from typing import Any

import typer

from k26ctl.cli.common import (
    accept_new_host_key_option,
    json_option,
    profile_argument,
    set_option,
    verbose_option,
    yes_option,
)


def status_command(
    profile: str = profile_argument(),
    overrides: list[str] = set_option(),
    as_json: bool = json_option(),
    history: int = typer.Option(5, "--history", help="How many history records to show."),
    accept_new_host_key: bool = accept_new_host_key_option(),
) -> None:
    """Service state, whether the unit matches PROFILE, readiness, patches and recent deploys."""
    from k26ctl.cli.fleet_cmd import is_fleet, status_fleet

    if is_fleet(profile):
        status_fleet(profile, overrides, as_json=as_json)
    from k26ctl.cli.common import print_json
    from k26ctl.deploy.status import host_status
    from k26ctl.profile import load_profile

    loaded = load_profile(profile, overrides)
    report = host_status(loaded, accept_new_host_key=accept_new_host_key, history=history)
    from k26ctl.cli.present.watch import last_verdict_line
    from k26ctl.watch.host_unit import watch_verdict

    watch, source = watch_verdict(loaded, accept_new_host_key)
    if as_json:
        print_json({**report.to_json(), "watch": watch, "watch_source": source}, "status")
    else:
        from k26ctl.cli.present.status import status_text

        print(status_text(report))
        print(last_verdict_line(watch) + (f" [{source}]" if source else ""))


def logs_command(
    profile: str = profile_argument(),
    overrides: list[str] = set_option(),
    lines: int = typer.Option(50, "--lines", "-n", help="How many recent lines."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new lines (Ctrl-C stops)."),
    as_json: bool = json_option("One JSON object per line (JSON Lines)."),
    accept_new_host_key: bool = accept_new_host_key_option(),
) -> None:
    """The service's journal on the host."""
    import json

    from k26ctl.deploy.status import show_logs
    from k26ctl.profile import load_profile

    def emit(entry: Any) -> None:
        if as_json:
            doc = {
                "cursor": entry.cursor,
                "timestamp_us": entry.timestamp_us,
                "priority": entry.priority,
                "pid": entry.pid,
                "message": entry.message,
            }
            sys.stdout.write(json.dumps(doc, ensure_ascii=False) + "\n")
        else:
            sys.stdout.write(entry.format() + "\n")
        sys.stdout.flush()

    try:
        show_logs(
            load_profile(profile, overrides),
            emit,
            lines=lines,
            follow=follow,
            accept_new_host_key=accept_new_host_key,
        )
    except KeyboardInterrupt:
        raise typer.Exit(0) from None


def rollback_command(
    profile: str = profile_argument("Profile file (or shipped profile name) naming the host."),
    overrides: list[str] = set_option(),
    as_json: bool = json_option(),
    yes: bool = yes_option(),
    accept_new_host_key: bool = accept_new_host_key_option(),
    verbose: bool = verbose_option(),
    resume: bool = typer.Option(False, "--resume", help="Fleet: continue a halted or interrupted roll."),
) -> None:
    """Restore the unit and patch set that were in place before the last change, restart, wait.
    Given a fleet file, roll the rollback across the members behind the router.

    Without a terminal, --yes (or K26CTL_YES=1) is required."""
    from k26ctl.cli.fleet_cmd import deploy_fleet, is_fleet, refuse_fleet_options

    if is_fleet(profile):
        deploy_fleet(profile, overrides, check=False, diff=False, as_json=as_json, yes=yes,
                     accept_new_host_key=accept_new_host_key, rollback=True, resume=resume)  # fmt: skip
    refuse_fleet_options(resume=resume)
    from k26ctl.cli.deploy_cmd import confirmer, run_and_present
    from k26ctl.deploy import DeployOptions, rollback
    from k26ctl.profile import load_profile

    loaded = load_profile(profile, overrides)
    opts = DeployOptions(yes=yes, confirm=confirmer(yes), accept_new_host_key=accept_new_host_key)
    run_and_present(rollback, loaded, opts, verbose=verbose, as_json=as_json)


def register(app: typer.Typer) -> None:
    app.command("status")(status_command)
    app.command("logs")(logs_command)
    app.command("rollback")(rollback_command)
