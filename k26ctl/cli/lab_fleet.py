"""`k26ctl lab fleet up|down|restart-router` and `k26ctl lab load`: registered on the `lab` group."""

from __future__ import annotations

import typer

from k26ctl.cli.common import json_option, print_json

NAME_HELP = "Fleet name (its hosts are NAME-1..NAME-N)."


def up(
    size: int = typer.Option(3, "--size", help="How many lab hosts (1-8)."),
    name: str = typer.Option("k26fleet", "--name", "-n", help=NAME_HELP),
    profile: str | None = typer.Option(
        None,
        "--profile",
        help="Shipped lab profile to start with: lab/ddtree-b7.yaml, or lab/sglang.yaml with --real.",
    ),
    real: bool = typer.Option(
        False, "--real", help="Members serve real SGLang 0.5.15 (as `lab host up --real`), 2.5 GiB each."
    ),
    gateway: str = typer.Option(
        "sglang-router", "--gateway", help="The gateway in front: sglang-router (0.3.2) or smg (1.13.0)."
    ),
    as_json: bool = json_option(),
) -> None:
    """Boot the hosts, start the gateway (127.0.0.1), deploy PROFILE everywhere, register the workers."""
    from k26ctl.lab.fleet import lab_fleet_up
    from k26ctl.lab.real.releases import RELEASES

    state = lab_fleet_up(
        name,
        size,
        profile=profile or ("lab/sglang.yaml" if real else "lab/ddtree-b7.yaml"),
        real_sglang=RELEASES[:1] if real else (),
        gateway=gateway,
        on_progress=lambda m: typer.echo(m, err=True),
    )
    if as_json:
        print_json(state.__dict__, "lab-fleet")
        return
    typer.echo(f"lab fleet {name}: {size} member(s) behind {state.gateway} at {state.router_url}")
    typer.echo(f"  fleet file: {state.fleet_file}")
    typer.echo(f"  k26ctl status {state.fleet_file}")
    typer.echo(f"  k26ctl lab load --url {state.router_url} --requests 50")


def down(name: str = typer.Option("k26fleet", "--name", "-n", help=NAME_HELP)) -> None:
    """Stop the gateway and remove every member host and the fleet's state."""
    from k26ctl.lab.fleet import lab_fleet_down

    hosts = lab_fleet_down(name)
    typer.echo(f"lab fleet {name}: down ({', '.join(hosts) or 'nothing was up'})")


def restart(name: str = typer.Option("k26fleet", "--name", "-n", help=NAME_HELP)) -> None:
    """Restart the gateway: it comes back with no workers (a running roll re-adds those in service)."""
    from k26ctl.lab.fleet import restart_router

    state = restart_router(name)
    typer.echo(f"lab fleet {name}: {state.gateway} restarted (pid {state.router_pid}), it lists no workers")


def load(
    url: str = typer.Option(..., "--url", help="The lab router (or a lab server): loopback or 10.231.x.x."),
    requests: int = typer.Option(200, "--requests", help="At most this many requests."),
    duration: float = typer.Option(120.0, "--duration", help="At most this many seconds."),
    concurrency: int = typer.Option(2, "--concurrency", help="Requests in flight."),
    max_tokens: int = typer.Option(48, "--max-tokens"),
    rate: float | None = typer.Option(
        None, "--rate", help="At most this many requests a second (default: as fast as answered)."
    ),
    as_json: bool = json_option(),
) -> None:
    """Chat requests through the router, judged by the smoke detectors: successes, failures,
    degenerate answers, p50/p99 latency. Exit 1 when any failed or was degenerate."""
    from k26ctl.lab.load import run_load

    report = run_load(
        url,
        requests=requests,
        duration=duration,
        concurrency=concurrency,
        max_tokens=max_tokens,
        rate=rate,
    )
    if as_json:
        print_json(report.to_json(), "lab-fleet-demo")
    else:
        typer.echo(report.text())
    summary = report.summary(report.samples)
    raise typer.Exit(1 if summary["failed"] or summary["degenerate"] else 0)


def register(lab_app: typer.Typer) -> None:
    fleet_app = typer.Typer(
        help="N lab hosts behind a real gateway (sglang-router or SMG) on loopback.", no_args_is_help=True
    )
    fleet_app.command("up")(up)
    fleet_app.command("down")(down)
    fleet_app.command("restart-router")(restart)
    lab_app.add_typer(fleet_app, name="fleet")
    lab_app.command("load")(load)
