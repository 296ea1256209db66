"""`k26ctl watch`: keep checking a serving server's answers (canary, probes, detectors, drift) between
deploys; Prometheus metrics, alert rules, a systemd unit. `k26ctl watch PROFILE` is `watch run PROFILE`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from k26ctl.cli.common import (
    DefaultCommandGroup,
    accept_new_host_key_option,
    json_option,
    profile_argument,
    set_option,
)


class _WatchGroup(DefaultCommandGroup):
    """`k26ctl watch PROFILE` and `k26ctl watch --url URL` mean `k26ctl watch run ...`."""

    default_command = "run"


HELP = "Keep checking a serving server's answers between deploys (canary, Prometheus metrics, alerts)."


def run_command(
    profile: str | None = profile_argument("Profile naming the server.", required=False),
    overrides: list[str] = set_option(),
    url: str | None = typer.Option(None, "--url", help="Server base URL instead of a profile."),
    model: str | None = typer.Option(
        None, "--model", help="Model name (default: the profile's or /v1/models)."
    ),
    suite: str | None = typer.Option(None, "--suite", help="Suite the canary's prompts come from."),
    interval: float = typer.Option(60.0, "--interval", help="Seconds between cycles (jittered by 10 %)."),
    once: bool = typer.Option(False, "--once", help="One cycle (re-checked if bad), exit 0/1/69 as smoke."),
    as_json: bool = json_option("One JSON object per cycle on stdout (JSON Lines)."),
    metrics_port: int | None = typer.Option(None, "--metrics-port", help="Serve Prometheus metrics here."),
    metrics_address: str = typer.Option(
        "127.0.0.1", "--metrics-address", help="Address to serve metrics on."
    ),
    textfile: Path | None = typer.Option(
        None, "--textfile", metavar="FILE", help="Also write node_exporter textfile metrics (atomically)."
    ),
    rebaseline: bool = typer.Option(
        False, "--rebaseline", help="Forget the baseline; the next healthy cycle records it."
    ),
    prompts: int = typer.Option(3, "--prompts", min=2, help="Canary prompts, all in flight together."),
    max_tokens: int = typer.Option(64, "--max-tokens", min=8, help="Output tokens per canary answer."),
    probe_positions: int = typer.Option(32, "--probe-positions", min=1, help="Tokens probed per answer."),
    request_timeout: float = typer.Option(30.0, "--request-timeout", help="Seconds per canary request."),
    max_latency: float | None = typer.Option(
        None, "--max-latency", help="Degraded above this many seconds per request."
    ),
    max_queue: float = typer.Option(
        1, "--max-queue", help="Skip the cycle (back off) at this many queued requests."
    ),
    cycles: int | None = typer.Option(None, "--cycles", min=1, help="Stop after this many steps."),
    api_key_env: str | None = typer.Option(
        None, "--api-key-env", metavar="VAR", help="Variable holding the API key."
    ),
    accept_new_host_key: bool = accept_new_host_key_option(),
    min_accept_length: float | None = typer.Option(
        None, "--min-accept-length", help="Degraded under this accept length (default: the profile's)."
    ),
    host_state: str | None = typer.Option(
        None,
        "--host-state",
        metavar="SERVICE",
        help="Running on the served host: state in /var/lib/k26ctl/SERVICE/watch, changes in its "
        "watch-history.jsonl (set by `watch install --on host`).",
    ),
) -> None:
    """Watch PROFILE's server (or --url): a light canary every interval; healthy, degraded, failing or
    unreachable."""
    from k26ctl.cli.smoke_cmd import check_base_url
    from k26ctl.errors import UsageError

    if (profile is None) == (url is None):
        raise UsageError(
            "give either a PROFILE or --url URL", "e.g. k26ctl watch ddtree-b7, or --url http://..."
        )
    if url is not None:
        if overrides:
            raise UsageError("--set applies to a profile, not to --url")
        check_base_url(url)
    if not 0 < interval <= 86400:
        raise UsageError(f"--interval {interval:g}: expected seconds in (0, 86400]", "e.g. --interval 60")
    if not 0 < request_timeout <= 600:
        raise UsageError(f"--request-timeout {request_timeout:g}: expected seconds in (0, 600]")
    if metrics_port is not None and not 0 < metrics_port < 65536:
        raise UsageError(f"--metrics-port {metrics_port}: not a port number", "e.g. --metrics-port 9469")
    if host_state is not None and not host_state.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise UsageError(f"--host-state {host_state!r}: expected a service name")
    from k26ctl.watch.service import RunRequest, run_watch

    code = run_watch(
        RunRequest(
            profile=profile,
            overrides=overrides,
            url=url,
            model=model,
            suite=suite,
            interval=interval,
            once=once,
            as_json=as_json,
            metrics_port=metrics_port,
            metrics_address=metrics_address,
            textfile=textfile,
            rebaseline=rebaseline,
            prompts=prompts,
            max_tokens=max_tokens,
            probe_positions=probe_positions,
            request_timeout=request_timeout,
            max_latency=max_latency,
            max_queue=max_queue,
            cycles=cycles,
            api_key_env=api_key_env,
            accept_new_host_key=accept_new_host_key,
            host_state=host_state,
            min_accept_length=min_accept_length,
        ),
        _printer(as_json),
    )
    raise typer.Exit(code)


def _printer(as_json: bool) -> Any:
    """One JSON line per record on stdout, or one readable line on stderr."""
    import json

    from k26ctl.cli.present.watch import cycle_line
    from k26ctl.documents import tagged
    from k26ctl.termsafe import clean

    def emit(record: dict[str, Any]) -> None:
        if as_json:
            sys.stdout.write(json.dumps(tagged("watch", record), ensure_ascii=False, default=str) + "\n")
            sys.stdout.flush()
            return
        sys.stderr.write(clean(cycle_line(record), limit=2000) + "\n")
        sys.stderr.flush()

    return emit


def rules_command() -> None:
    """Print the Prometheus alert rules for the watcher's metrics."""
    from k26ctl.watch.rules import alert_rules

    sys.stdout.write(alert_rules())


def history_command(
    profile: str | None = profile_argument("Profile naming the server.", required=False),
    url: str | None = typer.Option(None, "--url", help="Server base URL instead of a profile."),
    as_json: bool = json_option("One JSON object per state change (JSON Lines)."),
    lines: int = typer.Option(20, "--lines", "-n", help="How many recent changes."),
    overrides: list[str] = set_option(),
    on: str = typer.Option(
        "local",
        "--on",
        help="Whose history: local (this machine's watcher) or host (kept on PROFILE's host).",
    ),
    accept_new_host_key: bool = accept_new_host_key_option(),
) -> None:
    """The watcher's state changes for PROFILE (or --url), with their evidence."""
    import json

    from k26ctl.cli.present.watch import change_line
    from k26ctl.watch.service import target_store_key
    from k26ctl.watch.store import WatchStore

    if _runs_on_host(on, profile, url):
        from k26ctl.watch.host_history import read_watch_history, watch_history_path

        loaded_profile, host = _host_session(profile or "", overrides, accept_new_host_key)
        with host:
            records = read_watch_history(host, loaded_profile.service.name)
        source = f"{watch_history_path(loaded_profile.service.name)} on {host.name}"
    else:
        store = WatchStore.for_target(target_store_key(profile, url, overrides), create=False)
        records, source = store.read_history(), str(store.history)
    records = records[-lines:] if lines > 0 else []
    for record in records:
        if as_json:
            sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
        else:
            sys.stdout.write(change_line(record) + "\n")
    if not records and not as_json:
        print(f"no state changes recorded in {source}", file=sys.stderr)


def _scope_options() -> Any:
    return typer.Option(None, "--scope", help="systemd manager: system (default as root) or user.")


def _unit_dir_option() -> Any:
    return typer.Option(
        None, "--unit-dir", metavar="DIR", help="Write the unit here instead (with --no-start)."
    )


def _on_option() -> Any:
    return typer.Option(
        "local",
        "--on",
        help="Where the watcher runs: local (this machine) or host (PROFILE's host, over SSH).",
    )


def _runs_on_host(on: str, profile: str | None, url: str | None, **local_only: Any) -> bool:
    """Checks the target (a PROFILE or --url, not both) and --on; True where the watcher is PROFILE's
    host's, False where it is this machine's."""
    from k26ctl.errors import UsageError

    if (profile is None) == (url is None):
        raise UsageError("give either a PROFILE or --url URL")
    if on not in ("local", "host"):
        raise UsageError(f"--on {on!r}: expected local or host", "e.g. --on host")
    if on == "local":
        return False
    if profile is None or url is not None:
        raise UsageError(
            "--on host needs a PROFILE (it names the host)", "e.g. k26ctl watch install ddtree-b7 --on host"
        )
    given = [name for name, value in local_only.items() if value]
    if given:
        raise UsageError(f"--{given[0].replace('_', '-')} applies to --on local only")
    return True


def _host_session(profile: str, overrides: list[str], accept_new_host_key: bool) -> Any:
    from k26ctl.profile import load_profile
    from k26ctl.remote import connect

    loaded = load_profile(profile, overrides)
    return loaded.profile, connect(loaded.profile, accept_new_host_key=accept_new_host_key)


def install_command(
    profile: str | None = profile_argument("Profile naming the server.", required=False),
    overrides: list[str] = set_option(),
    url: str | None = typer.Option(None, "--url", help="Server base URL instead of a profile."),
    suite: str | None = typer.Option(None, "--suite", help="Suite the canary's prompts come from."),
    interval: float = typer.Option(60.0, "--interval", help="Seconds between cycles."),
    metrics_port: int | None = typer.Option(9469, "--metrics-port", help="Prometheus port (0: none)."),
    metrics_address: str = typer.Option(
        "127.0.0.1", "--metrics-address", help="Address to serve metrics on."
    ),
    textfile: Path | None = typer.Option(None, "--textfile", metavar="FILE", help="node_exporter textfile."),
    as_json: bool = typer.Option(False, "--json", help="The service logs JSON lines."),
    scope: str | None = _scope_options(),
    unit_dir: Path | None = _unit_dir_option(),
    no_start: bool = typer.Option(
        False, "--no-start", help="Write the unit only; do not enable or start it."
    ),
    on: str = _on_option(),
    host_python: str | None = typer.Option(
        None,
        "--host-python",
        metavar="PATH",
        help="--on host: interpreter that imports k26ctl there (default: the profile's sglang.python).",
    ),
    accept_new_host_key: bool = accept_new_host_key_option(),
) -> None:
    """Install the watcher as a systemd service on this machine, or with --on host on PROFILE's host
    (verified, written atomically, enabled and started)."""
    from k26ctl.errors import UsageError
    from k26ctl.watch import unit

    if unit_dir is not None and not no_start:
        raise UsageError("--unit-dir writes the unit only", "add --no-start")
    if not 0 < interval <= 86400:
        raise UsageError(f"--interval {interval:g}: expected seconds in (0, 86400]")
    if _runs_on_host(on, profile, url, scope=scope, unit_dir=unit_dir, textfile=textfile):
        from k26ctl.watch.host_unit import HostWatchSettings, install_on_host

        loaded_profile, host = _host_session(profile or "", overrides, accept_new_host_key)
        settings = HostWatchSettings(
            python=host_python or loaded_profile.sglang.python,
            interval=interval,
            suite=suite,
            metrics_port=metrics_port or None,
            metrics_address=metrics_address,
            as_json=as_json,
        )
        with host:
            remote_path = install_on_host(host, loaded_profile, settings, start=not no_start)
        print(f"{'wrote' if no_start else 'installed and started'} {remote_path} on {host.name}")
        return
    args, label, key = _watch_args(profile, overrides, url)
    if suite:
        args += ["--suite", str(Path(suite).resolve()) if Path(suite).exists() else suite]
    args += ["--interval", f"{interval:g}"]
    if metrics_port:
        args += ["--metrics-port", str(metrics_port), "--metrics-address", metrics_address]
    if textfile is not None:
        args += ["--textfile", str(textfile.resolve())]
    if as_json:
        args.append("--json")
    place = unit.default_place(scope, unit_dir)
    name = unit.unit_name(key)
    path = unit.install(place, name, unit.render_unit(label, args, place.scope), start=not no_start)
    print(f"{'wrote' if no_start else 'installed and started'} {path}")


def _watch_args(profile: str | None, overrides: list[str], url: str | None) -> tuple[list[str], str, str]:
    """The `watch run` arguments naming the target, its label and its state key."""
    from k26ctl.watch.store import target_key

    if url is not None:
        from k26ctl.cli.smoke_cmd import check_base_url

        check_base_url(url)
        return ["--url", url], url, target_key(None, url)
    from k26ctl.profile import load_profile

    loaded = load_profile(profile or "", overrides)
    where = str(loaded.path.resolve()) if loaded.path else profile or ""
    name = loaded.profile.name or (loaded.path.stem if loaded.path else where)
    args = [where]
    for item in overrides:
        args += ["--set", item]
    return args, name, target_key(name, None)


def uninstall_command(
    profile: str | None = profile_argument("Profile naming the server.", required=False),
    overrides: list[str] = set_option(),
    url: str | None = typer.Option(None, "--url", help="Server base URL instead of a profile."),
    scope: str | None = _scope_options(),
    unit_dir: Path | None = _unit_dir_option(),
    on: str = _on_option(),
    accept_new_host_key: bool = accept_new_host_key_option(),
) -> None:
    """Stop, disable and remove the watcher's systemd service (here, or with --on host on the host)."""
    from k26ctl.watch import unit

    if _runs_on_host(on, profile, url, scope=scope, unit_dir=unit_dir):
        from k26ctl.watch.host_unit import host_unit_path, uninstall_from_host

        loaded_profile, host = _host_session(profile or "", overrides, accept_new_host_key)
        with host:
            removed = uninstall_from_host(host, loaded_profile)
        at = f"{host_unit_path(loaded_profile)} on {host.name}"
        print(f"removed {at}" if removed else f"no watch unit at {at}")
        return
    _, _, key = _watch_args(profile, overrides, url)
    place = unit.default_place(scope, unit_dir)
    name = unit.unit_name(key)
    removed = unit.uninstall(place, name, stop=unit_dir is None)
    print(
        f"removed {place.directory / name}" if removed else f"{name} was not installed in {place.directory}"
    )


def service_status_command(
    profile: str | None = profile_argument("Profile naming the server.", required=False),
    overrides: list[str] = set_option(),
    url: str | None = typer.Option(None, "--url", help="Server base URL instead of a profile."),
    scope: str | None = _scope_options(),
    as_json: bool = json_option(),
    on: str = _on_option(),
    accept_new_host_key: bool = accept_new_host_key_option(),
) -> None:
    """The watcher service's state and its last verdict."""
    import json

    from k26ctl.cli.present.watch import host_service_line, last_verdict_line
    from k26ctl.watch import unit
    from k26ctl.watch.store import WatchStore

    if _runs_on_host(on, profile, url, scope=scope):
        from k26ctl.watch.host_unit import host_service_state, host_unit_name, read_host_last

        loaded_profile, host = _host_session(profile or "", overrides, accept_new_host_key)
        with host:
            state = host_service_state(host, loaded_profile)
            host_last = read_host_last(host, loaded_profile.service.name)
        if as_json:
            print(json.dumps({"host": host.name, "unit": host_unit_name(loaded_profile), "service": state,
                              "last": host_last}, ensure_ascii=False))  # fmt: skip
            return
        print(host_service_line(host_unit_name(loaded_profile), host.name, state))
        print(last_verdict_line(host_last))
        return
    _, _, key = _watch_args(profile, overrides, url)
    last = WatchStore.for_target(key, create=False).read_last()
    place = unit.default_place(scope, None)
    service = unit.service_status(place, unit.unit_name(key))
    if as_json:
        print(json.dumps({"service": service, "last": last}, ensure_ascii=False))
        return
    print(service)
    print(last_verdict_line(last))


def logs_command(
    profile: str | None = profile_argument("Profile naming the server.", required=False),
    overrides: list[str] = set_option(),
    url: str | None = typer.Option(None, "--url", help="Server base URL instead of a profile."),
    scope: str | None = _scope_options(),
    lines: int = typer.Option(50, "--lines", "-n", help="How many recent lines."),
    on: str = _on_option(),
    accept_new_host_key: bool = accept_new_host_key_option(),
) -> None:
    """The watcher service's journal (here, or with --on host on the host)."""
    from k26ctl.watch import unit

    if _runs_on_host(on, profile, url, scope=scope):
        from k26ctl.termsafe import clean
        from k26ctl.watch.host_unit import host_service_logs

        loaded_profile, host = _host_session(profile or "", overrides, accept_new_host_key)
        with host:
            print(clean(host_service_logs(host, loaded_profile, lines), keep_newlines=True, limit=200000))
        return
    _, _, key = _watch_args(profile, overrides, url)
    print(unit.service_logs(unit.default_place(scope, None), unit.unit_name(key), lines))


def register(app: typer.Typer) -> None:
    group = typer.Typer(cls=_WatchGroup, help=HELP, no_args_is_help=True)
    group.command("run")(run_command)
    group.command("rules")(rules_command)
    group.command("history")(history_command)
    group.command("install")(install_command)
    group.command("uninstall")(uninstall_command)
    group.command("status")(service_status_command)
    group.command("logs")(logs_command)
    app.add_typer(group, name="watch")
