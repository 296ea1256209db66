"""`k26ctl watch install PROFILE --on host`: the watcher as a systemd service on the served host.

The unit runs `PYTHON -m k26ctl watch run --url http://127.0.0.1:PORT ... --host-state SERVICE` on
the host, so the canary never leaves the machine; its state (`last.json`, `history.jsonl`) lives in
`/var/lib/k26ctl/SERVICE/watch/` and each confirmed change is appended to `watch-history.jsonl`
beside the deploy history. The unit goes through deploy's own steps: checked with
`systemd-analyze verify` on the host, written atomically (with a backup), daemon-reload, enable,
start. Nothing is written when the host's interpreter cannot import k26ctl.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from k26ctl.deploy.apply import enable_unit, remove_unit, write_unit
from k26ctl.deploy.history import state_dir
from k26ctl.errors import ConfigError, UsageError
from k26ctl.profile import LoadedProfile, Profile
from k26ctl.remote.base import Host
from k26ctl.remote.systemd import Systemd
from k26ctl.unitfile import escape_specifiers, quote_env_assignment, quote_exec_word
from k26ctl.watch.unit import unit_name, unit_text

UNIT_DIR = "/etc/systemd/system"


def host_watch_dir(service: str) -> str:
    return f"{state_dir(service)}/watch"


def host_unit_name(profile: Profile) -> str:
    return unit_name(f"host-{profile.service.name}")


def host_unit_path(profile: Profile) -> str:
    return f"{UNIT_DIR}/{host_unit_name(profile)}"


def loopback_url(profile: Profile) -> str:
    return f"http://127.0.0.1:{profile.sglang.port}"


@dataclass(frozen=True)
class HostWatchSettings:
    python: str  # the host's interpreter that imports k26ctl
    interval: float = 60.0
    suite: str | None = None  # a shipped suite name or a local file (copied to the host)
    metrics_port: int | None = 9469
    metrics_address: str = "127.0.0.1"
    as_json: bool = False


def render_host_unit(profile: Profile, settings: HostWatchSettings, suite_ref: str) -> str:
    argv = [settings.python, "-m", "k26ctl", "watch", "run", "--url", loopback_url(profile),
            "--model", profile.served_name, "--suite", suite_ref, "--interval", f"{settings.interval:g}",
            "--host-state", profile.service.name]  # fmt: skip
    if profile.smoke.min_accept_length is not None:
        argv += ["--min-accept-length", f"{profile.smoke.min_accept_length:g}"]
    if settings.metrics_port:
        argv += ["--metrics-port", str(settings.metrics_port), "--metrics-address", settings.metrics_address]
    if profile.sglang.api_key_env:
        argv += ["--api-key-env", profile.sglang.api_key_env]
    if settings.as_json:
        argv.append("--json")
    exec_start = " ".join(quote_exec_word(word) for word in argv)
    description = f"k26ctl watch {profile.service.name} (on this host)".replace("%", "%%")
    after = f"network-online.target {profile.service.name}.service"
    return unit_text(description, after, _environment(profile), exec_start, "multi-user.target")


def _environment(profile: Profile) -> str:
    """PYTHONUNBUFFERED, and the API key's variable from where the server's unit takes it."""
    lines = "Environment=PYTHONUNBUFFERED=1\n"
    name = profile.sglang.api_key_env
    if not name:
        return lines
    value = profile.service.environment.get(name)
    if value is not None:
        lines += f"Environment={quote_env_assignment(name, str(value))}\n"
    if profile.service.environment_file:
        lines += f"EnvironmentFile={escape_specifiers(profile.service.environment_file)}\n"
    return lines


def check_python(host: Host, python: str) -> None:
    res = host.run([python, "-c", "import k26ctl"], check=False)
    if not res.ok:
        raise ConfigError(
            f"{host.name}: {python} cannot import k26ctl: "
            f"{(res.stderr.strip().splitlines() or [f'exit {res.returncode}'])[-1][:200]}",
            "install k26ctl into an interpreter on the host and name it with --host-python",
        )


def _place_suite(host: Host, profile: Profile, suite: str | None) -> str:
    """The suite reference the host can read: a local file is copied beside the watch state."""
    ref = suite or profile.smoke.suite or "default"
    path = Path(ref)
    if not path.is_file():
        return ref
    from k26ctl.smoke.suite import load_suite

    load_suite(str(path))  # refuse a broken suite here, before anything is written on the host
    remote = f"{host_watch_dir(profile.service.name)}/suite{path.suffix or '.yaml'}"
    host.write_file_atomic(remote, path.read_bytes(), mode=0o644, sudo=True, backup=False)
    return remote


def _verify_on_host(host: Host, name: str, text: str, python: str) -> None:
    from k26ctl.validate.systemd_verify import interpret_verify

    if not host.run(["systemd-analyze", "--version"]).ok:
        return  # the host cannot check units; systemd itself still refuses a broken one at start
    folder = host.run(["mktemp", "-d", "/tmp/k26ctl-verify.XXXXXX"], check=True).stdout.strip()
    try:
        host.write_file_atomic(f"{folder}/{name}", text.encode(), mode=0o600, backup=False)
        result = host.run(["systemd-analyze", "verify", "--man=no", f"{folder}/{name}"], timeout=120)
    finally:
        host.run(["rm", "-rf", "--", folder])
    findings = interpret_verify(
        result.returncode, result.stderr, name, python, tolerate_missing_executable=False
    )
    errors = [f for f in findings if f.level == "error"]
    if errors:
        raise ConfigError(f"{host.name}: the watch unit does not verify: {errors[0].message}", errors[0].hint)


def install_on_host(host: Host, profile: Profile, settings: HostWatchSettings, start: bool) -> str:
    if settings.interval <= 0:
        raise UsageError("--interval must be positive")
    check_python(host, settings.python)
    host.run(["mkdir", "-p", host_watch_dir(profile.service.name)], sudo=True, check=True)
    suite_ref = _place_suite(host, profile, settings.suite)
    name = host_unit_name(profile)
    text = render_host_unit(profile, settings, suite_ref)
    _verify_on_host(host, name, text, settings.python)
    path = host_unit_path(profile)
    write_unit(host, path, text)
    systemd = Systemd(host, name, user=False)
    systemd.daemon_reload()
    if start:
        enable_unit(host, name)
        systemd.restart()
    return path


def uninstall_from_host(host: Host, profile: Profile) -> bool:
    path = host_unit_path(profile)
    existed = host.read_file(path, sudo=True) is not None
    remove_unit(host, Systemd(host, host_unit_name(profile), user=False), host_unit_name(profile), path)
    return existed


def host_service_state(host: Host, profile: Profile) -> dict[str, str]:
    return Systemd(host, host_unit_name(profile), user=False).show(
        "LoadState", "ActiveState", "SubState", "UnitFileState", "MainPID", "NRestarts"
    )


def host_service_logs(host: Host, profile: Profile, lines: int) -> str:
    argv = ["journalctl", "-u", host_unit_name(profile), "-n", str(lines), "--no-pager", "-o", "cat"]
    res = host.run(argv, sudo=True, check=False)
    return (res.stdout or res.stderr).rstrip()


def read_host_last(host: Host, service: str) -> dict[str, Any] | None:
    """The host watcher's last record (None: no watcher has run on the host)."""
    raw = host.read_file(f"{host_watch_dir(service)}/last.json", sudo=True)
    if raw is None:
        return None
    try:
        data = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def watch_verdict(
    loaded: LoadedProfile, accept_new_host_key: bool = False
) -> tuple[dict[str, Any] | None, str | None]:
    """The last watch verdict for `loaded`'s server and where it came from: the host's watcher first
    ("host"), else this machine's ("local"); (None, None) when neither has run."""
    from k26ctl.errors import K26Error
    from k26ctl.remote import connect
    from k26ctl.watch.store import last_verdict

    try:
        with connect(loaded.profile, accept_new_host_key=accept_new_host_key) as host:
            on_host = read_host_last(host, loaded.profile.service.name)
    except K26Error:
        on_host = None  # the host's answer is a bonus here: status already reported the host itself
    if on_host is not None:
        return on_host, "host"
    local = last_verdict(loaded)
    return (local, "local") if local is not None else (None, None)
