"""`k26ctl watch install`: the watcher as a systemd service on this machine (system or user manager).

The unit runs this interpreter with this k26ctl (`python -m k26ctl watch run ...`, PYTHONPATH set to
the package's directory so the service runs the code that rendered it), restarts on failure, and
stops with SIGTERM, which the watcher takes between cycles. It is checked with `systemd-analyze
verify` before it is written, written atomically, then enabled and started (`--no-start`: written
only). Nothing is written when systemd is not the init system and the unit would be started.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from k26ctl.errors import ConfigError, RemoteCommandError, UsageError
from k26ctl.outputs import write_atomic
from k26ctl.unitfile import quote_env_assignment, quote_exec_word

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the directory holding the k26ctl package


@dataclass(frozen=True)
class UnitPlace:
    scope: str  # "system" | "user"
    directory: Path

    @property
    def systemctl(self) -> list[str]:
        return ["systemctl", "--user"] if self.scope == "user" else ["systemctl"]

    @property
    def journalctl(self) -> list[str]:
        return ["journalctl", "--user"] if self.scope == "user" else ["journalctl"]


def unit_name(key: str) -> str:
    return f"k26ctl-watch-{re.sub(r'[^A-Za-z0-9_.-]', '_', key)}.service"


def default_place(scope: str | None, directory: Path | None) -> UnitPlace:
    chosen = scope or ("system" if os.geteuid() == 0 else "user")
    if chosen not in ("system", "user"):
        raise UsageError(f"--scope {chosen!r}: expected system or user")
    if directory is not None:
        return UnitPlace(chosen, directory)
    if chosen == "system":
        return UnitPlace(chosen, Path("/etc/systemd/system"))
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return UnitPlace(chosen, Path(config) / "systemd" / "user")


def render_unit(label: str, watch_args: list[str], scope: str) -> str:
    """The unit text; `watch_args` follow `python -m k26ctl watch run`."""
    argv = [sys.executable, "-m", "k26ctl", "watch", "run", *watch_args]
    exec_start = " ".join(quote_exec_word(word) for word in argv)
    env = [
        quote_env_assignment("PYTHONPATH", str(PACKAGE_ROOT)),
        quote_env_assignment("PYTHONUNBUFFERED", "1"),
    ]
    wanted_by = "default.target" if scope == "user" else "multi-user.target"
    description = f"k26ctl watch {label}".replace("%", "%%").replace("\n", " ")
    return unit_text(
        description, "network-online.target", f"Environment={' '.join(env)}\n", exec_start, wanted_by
    )


def unit_text(description: str, after: str, environment: str, exec_start: str, wanted_by: str) -> str:
    """A watcher's unit: restarted on failure, stopped with time to end a cycle, no new privileges.
    `environment` is zero or more whole `Environment=`/`EnvironmentFile=` lines."""
    return (
        "[Unit]\n"
        f"Description={description}\n"
        f"After={after}\n"
        "Wants=network-online.target\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        f"{environment}"
        f"ExecStart={exec_start}\n"
        "Restart=on-failure\n"
        "RestartSec=30\n"
        "KillSignal=SIGTERM\n"
        "TimeoutStopSec=300\n"
        "NoNewPrivileges=yes\n"
        "\n"
        "[Install]\n"
        f"WantedBy={wanted_by}\n"
    )


def systemd_is_init() -> bool:
    return Path("/run/systemd/system").is_dir()


def _run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RemoteCommandError(f"{' '.join(argv)}: {exc}") from None
    if check and proc.returncode != 0:
        raise RemoteCommandError(
            f"{' '.join(argv)} failed (exit {proc.returncode}): {proc.stderr.strip()[:300]}",
            returncode=proc.returncode,
            stderr=proc.stderr,
        )
    return proc


def verify(unit_text: str, name: str) -> None:
    from k26ctl.validate.systemd_verify import verify_unit_locally

    errors = [f for f in verify_unit_locally(unit_text, name, sys.executable) if f.level == "error"]
    if errors:
        raise ConfigError(f"the rendered watch unit does not verify: {errors[0].message}", errors[0].hint)


def install(place: UnitPlace, name: str, unit_text: str, start: bool) -> Path:
    if start and not systemd_is_init():
        raise UsageError(
            "systemd is not the init system here, so the unit cannot be started",
            "add --no-start to write the unit only, or install on a machine that runs systemd",
        )
    verify(unit_text, name)
    place.directory.mkdir(parents=True, exist_ok=True)
    path = place.directory / name
    write_atomic(path, unit_text)
    if start:
        _run([*place.systemctl, "daemon-reload"])
        _run([*place.systemctl, "enable", "--now", name])
    return path


def uninstall(place: UnitPlace, name: str, stop: bool) -> bool:
    path = place.directory / name
    if stop and systemd_is_init():
        _run([*place.systemctl, "disable", "--now", name], check=False)
    existed = path.exists()
    path.unlink(missing_ok=True)
    if stop and systemd_is_init():
        _run([*place.systemctl, "daemon-reload"], check=False)
    return existed


def service_status(place: UnitPlace, name: str) -> str:
    if not systemd_is_init():
        return "systemd is not the init system here"
    proc = _run([*place.systemctl, "status", "--no-pager", "--lines=0", name], check=False)
    return (proc.stdout or proc.stderr).rstrip()


def service_logs(place: UnitPlace, name: str, lines: int) -> str:
    proc = _run([*place.journalctl, "-u", name, "-n", str(lines), "--no-pager", "-o", "cat"], check=False)
    return (proc.stdout or proc.stderr).rstrip()
