"""`k26ctl lab ...`: the local lab. `lab host up|down|status` manage the nspawn test host.

Other lab commands (demo, serve, ...) live in their own modules exposing `register(lab_app)`;
add the module name to LAB_COMMAND_MODULES below and nothing else here needs to change.
"""

from __future__ import annotations

import importlib
import shlex
from typing import Any

import typer

from k26ctl.cli.common import json_option, print_json

# ---- add further `k26ctl lab <command>` modules here (each has `register(lab_app: typer.Typer)`) ----
LAB_COMMAND_MODULES: tuple[str, ...] = ("lab_demo", "lab_fleet")

DEFAULT_NAME = "k26lab"


def _name_option() -> Any:
    return typer.Option(DEFAULT_NAME, "--name", "-n", help="Lab host name (several can run side by side).")


def host_up(
    name: str = _name_option(),
    install_deps: bool = typer.Option(
        False, "--install-deps", help="apt-get install openssh-server and systemd-container if missing."
    ),
    real: bool = typer.Option(
        False,
        "--real",
        help="Also serve real SGLang (0.5.15 and 0.5.23 from the registry, installed once into "
        "/var/cache/k26ctl/sglang) with the tiny lab-corpus model under /opt/sglang.",
    ),
    gpu: bool | None = typer.Option(
        None,
        "--gpu/--no-gpu",
        help="Bind this machine's NVIDIA GPU(s) and driver into the host (default: when one is found, "
        "said so); --gpu on a machine without one is refused.",
    ),
    bind: list[str] = typer.Option(
        [], "--bind", metavar="SRC[:DST]", help="Also bind this folder read-write into the host (repeatable)."
    ),
    json_out: bool = json_option(),
) -> None:
    """Boot a lab host: systemd in an nspawn container with its own sshd, in its own network namespace."""
    from k26ctl.lab.host import lab_up
    from k26ctl.lab.host.gpu import find_gpu, parse_bind, require_gpu
    from k26ctl.lab.real.releases import RELEASES

    binds = tuple(parse_bind(spec) for spec in bind)
    parts = require_gpu() if gpu else (find_gpu() if gpu is None else None)
    if parts is not None and gpu is None:
        typer.echo(f"GPU found: binding {parts.describe()} (--no-gpu leaves it out)", err=True)
    state = lab_up(
        name, install_deps=install_deps, real_sglang=RELEASES if real else (), gpu=parts, binds=binds
    )
    if json_out:
        print_json(state.to_json(), "lab-host")
        return
    typer.echo(f"lab host {state.name} is up at {state.address} (boot {state.boot_seconds:.2f} s)")
    if state.gpu:
        typer.echo(f"  GPU: {state.gpu}; the real nvidia-smi at /usr/local/bin/nvidia-smi")
    if state.real_sglang:
        typer.echo(
            f"  real SGLang {', '.join(state.real_sglang)} under /opt/sglang: profiles/lab/sglang*.yaml"
        )
    typer.echo(f"  {shlex.join(state.openssh_argv())}")
    typer.echo(f"  profiles target it with `host: {{lab: {state.name}}}`")


def host_down(name: str = _name_option(), json_out: bool = json_option()) -> None:
    """Power the lab host off and remove its namespace, veth pair, mounts and state."""
    from k26ctl.lab.host import lab_down, leftovers

    was_running = lab_down(name)
    left = leftovers(name)
    if json_out:
        print_json({"name": name, "was_running": was_running, "leftovers": left}, "lab-host-down")
    elif left:
        typer.echo(f"lab host {name}: down, but left behind: {', '.join(left)}", err=True)
    else:
        typer.echo(f"lab host {name}: down" if was_running else f"lab host {name}: was not running")
    if left:
        raise typer.Exit(1)


def host_status(name: str = _name_option(), json_out: bool = json_option()) -> None:
    """Show whether the lab host runs and answers SSH. Exit 0 when up, 1 otherwise."""
    from k26ctl.lab.host import lab_status

    status = lab_status(name)
    if json_out:
        print_json(status.to_json(), "lab-host")
    else:
        line = f"lab host {name}: {status.state} ({status.reason})"
        if status.host is not None and status.running:
            line += f" at {status.host.address}, state in {status.host.state_dir}"
        typer.echo(line)
    if not status.running:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    lab_app = typer.Typer(
        help="The local lab: a real systemd + sshd test host and a CPU stand-in for SGLang.",
        no_args_is_help=True,
    )
    host_app = typer.Typer(help="The nspawn lab host (needs root).", no_args_is_help=True)
    host_app.command("up")(host_up)
    host_app.command("down")(host_down)
    host_app.command("status")(host_status)
    lab_app.add_typer(host_app, name="host")
    for module in LAB_COMMAND_MODULES:
        importlib.import_module(f"k26ctl.cli.{module}").register(lab_app)
    app.add_typer(lab_app, name="lab")
