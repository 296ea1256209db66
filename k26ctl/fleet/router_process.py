"""Starting and stopping a gateway k26ctl owns (the fleet's `router.owned`): `sglang-router launch`
or `smg launch`, bound where the fleet says, with no static worker list (the roll owns the list).
Both launchers take the same flags for what k26ctl sets. SMG is started only at the version k26ctl
was checked against (`smg.SMG_VERSION`).

At launch and on every registration the router may look a tokenizer up on the model hub; without
`tokenizer_path` its hub address (HF_ENDPOINT) points at a closed loopback port so that lookup fails
at once instead of reaching out of the machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from k26ctl.errors import ConfigError, UnreachableError
from k26ctl.fleet.model import OwnedRouter
from k26ctl.fleet.smg import SMG_VERSION
from k26ctl.httpsafe import BoundedClient, HttpError

CLOSED_HUB = "http://127.0.0.1:9"  # the discard port: nothing listens there
LAUNCHERS = {"sglang-router": "sglang_router.launch_router", "smg": "smg.launch_router"}


def router_argv(owned: OwnedRouter, kind: str = "sglang-router") -> list[str]:
    """`python -m <launcher>` (the same as `sglang-router launch` / `smg launch`, found without PATH)."""
    return [sys.executable, "-m", LAUNCHERS[kind], *owned.argv()[2:]]


def installed_version(kind: str) -> str:
    """The installed launcher's version; ConfigError when it is missing (or SMG at another version)."""
    from importlib import metadata

    wanted = {"sglang-router": "0.3.2", "smg": SMG_VERSION}[kind]
    try:
        version = metadata.version(kind)
    except metadata.PackageNotFoundError:
        raise ConfigError(
            f"{kind} is not installed", f"pip install '{kind}=={wanted}' (the lab extra has it)"
        ) from None
    if kind == "smg" and version != SMG_VERSION:
        raise ConfigError(
            f"smg {version} is installed; k26ctl's SMG adapter was checked against {SMG_VERSION}",
            f"pip install 'smg=={SMG_VERSION}'",
        )
    return version


def start_router(
    owned: OwnedRouter, log_path: Path, *, timeout: float = 30.0, kind: str = "sglang-router"
) -> subprocess.Popen[bytes]:
    """Launch the gateway and wait until it answers /liveness; its output goes to `log_path`."""
    installed_version(kind)
    env = dict(os.environ)
    if not owned.tokenizer_path:
        env["HF_ENDPOINT"] = CLOSED_HUB
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            router_argv(owned, kind),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    url = f"http://{owned.host}:{owned.port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise UnreachableError(f"{kind} exited with {proc.returncode} at start-up", f"see {log_path}")
        try:
            with BoundedClient(url, timeout=1.0, max_body=1 << 16) as client:
                if client.request("GET", "/liveness").status_code == 200:
                    return proc
        except HttpError:
            pass
        time.sleep(0.1)
    stop_router(proc.pid)
    raise UnreachableError(f"{kind} did not answer {url}/liveness within {timeout:g} s", f"see {log_path}")


def stop_router(pid: int, *, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after `timeout`; a pid that is already gone is fine."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            waited, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # not our child: poll for its existence instead
            waited = 0
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        if waited == pid:
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
