"""`deploy`, `status` and `rollback` given a fleet file: the roll behind the router, presented.

A fleet file is recognised by its top-level `fleet:` key; the profile commands hand it over here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from k26ctl.errors import UsageError


def is_fleet(path: str) -> bool:
    from k26ctl.fleet.source import is_fleet_file

    return is_fleet_file(path)


def refuse_fleet_options(**given: Any) -> None:
    """Roll options given with a single-host profile are a usage error (not silently ignored)."""
    named = [f"--{k.replace('_', '-')}" for k, v in given.items() if v not in (None, False)]
    if named:
        raise UsageError(
            f"{', '.join(named)} only apply to a fleet file", "pass a fleet file (top-level fleet:)"
        )


def deploy_fleet(
    path: str,
    overrides: list[str],
    *,
    check: bool,
    diff: bool,
    as_json: bool,
    yes: bool,
    accept_new_host_key: bool,
    rollback: bool = False,
    html: Path | None = None,
    **roll: Any,
) -> None:
    from k26ctl.cli.common import print_json, write_html
    from k26ctl.cli.present.fleet import progress, result_text
    from k26ctl.fleet.api import check_fleet, roll_fleet, roll_options
    from k26ctl.fleet.model import load_fleet

    fleet = load_fleet(path, overrides)
    if check or diff:
        checked = check_fleet(fleet, diff=diff, accept_new_host_key=accept_new_host_key)
        if as_json:
            print_json(checked.to_json())
        else:
            for name, res in checked.results.items():
                changes = res.plan.change_lines() if res.plan is not None else []
                print(f"{name}: " + ("; ".join(changes) if changes else f"nothing to do ({res.verdict})"))
                if diff and res.diff:
                    print(res.diff)
            for name, err in checked.errors.items():
                print(f"{name}: error: {err}")
        raise typer.Exit(checked.exit_code)
    if not yes:
        raise UsageError(
            f"a fleet {'rollback' if rollback else 'deploy'} changes every member: pass --yes",
            "see what would change first with --check",
        )
    options = roll_options(fleet, action="rollback" if rollback else "deploy", **roll)
    result = roll_fleet(fleet, options, progress, accept_new_host_key=accept_new_host_key)
    write_html(result.to_json(), html)
    if as_json:
        print_json(result.to_json())
    else:
        print(result_text(result), flush=True)
    raise typer.Exit(result.exit_code)


def status_fleet(path: str, overrides: list[str], *, as_json: bool) -> None:
    from k26ctl.cli.common import print_json
    from k26ctl.fleet.api import fleet_status
    from k26ctl.fleet.model import load_fleet

    status = fleet_status(load_fleet(path, overrides))
    if as_json:
        print_json(status.to_json())
        raise typer.Exit(status.exit_code)
    from k26ctl.termsafe import clean

    run = status.record
    kind = status.gateway_kind or "gateway"
    how = " (detected)" if status.gateway_detected else ""
    routed = f"{sum(w.healthy for w in status.workers)}/{len(status.workers)} worker(s) routed to"
    print(clean(f"fleet {status.fleet}: {kind}{how} {status.router_url}: {status.router_error or routed}"))
    if run:
        reason = f": {run.reason}" if run.reason else ""
        print(clean(f"last run {run.run_id} ({run.action}): {run.status}{reason}"))
    width = max(len(n) for n in status.members)
    for name, m in status.members.items():
        print(
            clean(
                f"  {name:<{width}}  {m['url']}  {kind}: {_gateway_words(m['gateway'])}  k26ctl: {m['where']}"
            )
        )
    raise typer.Exit(status.exit_code)


def _gateway_words(view: dict[str, Any]) -> str:
    words = str(view.get("state", "unknown"))
    if "load" in view:
        words += f", load {view['load']}"
    if "priority" in view:
        words += f", priority {view['priority']}"
    return words
