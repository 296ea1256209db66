"""SGLang releases from the package registry, one venv each, in a cache shared by every lab host.

`ensure_release("0.5.15")` makes <cache>/0.5.15/venv (created from this machine's own interpreter, so
the lab host, which sees that interpreter, can run it) and installs `sglang==0.5.15` into it, once:
an install is recorded by a stamp written only after the venv's sglang reports that version, and a
half-done one is resumed. One install at a time on the machine (a lock file). The lab host binds the
venvs read-only under its /opt.

    python -m k26ctl.lab.real.releases [--check] [VERSION ...]     (scripts/bootstrap.sh --real-sglang)
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from k26ctl.errors import K26Error

RELEASES = ("0.5.15", "0.5.23")
CACHE_ENV = "K26CTL_SGLANG_CACHE"
DEFAULT_CACHE = "/var/cache/k26ctl/sglang"
STAMP = ".k26ctl-installed.json"
INSTALL_TIMEOUT = 3600.0


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


def venv_dir(version: str) -> Path:
    return cache_root() / version / "venv"


def base_python() -> Path:
    """The interpreter behind the running one (outside any venv), without resolving pyenv shims."""
    return Path(getattr(sys, "_base_executable", None) or sys.executable)


def venv_version(venv: Path) -> str | None:
    """The sglang version installed in `venv` (read from its metadata, no import), None if none."""
    python = venv / "bin" / "python"
    if not python.exists():
        return None
    proc = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('sglang'))"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def installed(version: str) -> bool:
    """True when the release's venv is complete: stamped, and its sglang is that version."""
    venv = venv_dir(version)
    try:
        stamp = json.loads((venv / STAMP).read_text())
    except (OSError, ValueError):
        return False
    return stamp.get("sglang") == version and venv_version(venv) == version


def check_version(version: str) -> str:
    if version not in RELEASES:
        raise K26Error(f"SGLang {version} is not a lab release", f"the lab installs {', '.join(RELEASES)}")
    return version


def ensure_release(version: str, say: Callable[[str], None] = print) -> Path:
    """The venv of `version`, installing it first when it is not complete. Returns the venv path."""
    check_version(version)
    venv = venv_dir(version)
    if installed(version):
        return venv
    venv.parent.mkdir(parents=True, exist_ok=True)
    with (cache_root() / "install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one install on the machine at a time
        if installed(version):
            return venv
        if not (venv / "bin" / "python").exists():
            say(f"creating {venv}")
            _run([str(base_python()), "-m", "venv", str(venv)], "python -m venv")
        say(f"installing sglang=={version} into {venv} (several minutes, about 10 GB)")
        _run(
            [
                "nice",
                "-n",
                "10",
                str(venv / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                f"sglang=={version}",
            ],
            f"pip install sglang=={version}",
        )
        got = venv_version(venv)
        if got != version:
            raise K26Error(f"{venv}: sglang reports {got!r} after installing {version}")
        (venv / STAMP).write_text(json.dumps({"sglang": version}) + "\n")
    return venv


def _run(argv: list[str], what: str) -> None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        raise K26Error(f"{what} took over {INSTALL_TIMEOUT:.0f} s", "check the network and pip") from None
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr or proc.stdout).splitlines() if not ln.startswith("WARNING")]
        raise K26Error(f"{what} failed: {(lines or ['no output'])[-1]}", "run it by hand to see why")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m k26ctl.lab.real.releases")
    parser.add_argument("versions", nargs="*", default=list(RELEASES))
    parser.add_argument("--check", action="store_true", help="only report; exit 1 when one is missing")
    args = parser.parse_args(argv)
    missing = 0
    for version in args.versions:
        try:
            if args.check:
                ok = installed(check_version(version))
                missing += not ok
                print(f"sglang {version}: {'installed' if ok else 'missing'} ({venv_dir(version)})")
            else:
                print(f"sglang {version}: {ensure_release(version)}")
        except K26Error as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
