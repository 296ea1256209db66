"""Start the real lab server (python -m k26ctl.lab.serve) on 127.0.0.1 from a shipped lab profile.

The argv and environment come from the profile through `render_launch`, exactly as the unit on the
lab host would get them; only the host paths are mapped to this checkout (the interpreter, the
weights under k26ctl/lab/server/weights, and PYTHONPATH). `patched=True` runs the server over a copy of
the lab's SGLang-shaped tree with the profile's patches applied by k26ctl's own patch engine.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "k26ctl" / "lab" / "server"
HOST_MODELS = "/opt/k26lab/models"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LabServer:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)


def patched_tree(names: list[str], into: Path) -> Path:
    """A copy of the lab tree with `names` applied; returns the directory to put on PYTHONPATH."""
    from k26ctl.patches.engine import apply_text
    from k26ctl.patches.model import select_patches

    shutil.copytree(LAB / "sglang_tree", into, dirs_exist_ok=True)
    for patch in select_patches(names):
        target = into / "sglang" / patch.target
        target.write_text(apply_text(patch, target.read_text(encoding="utf-8")), encoding="utf-8")
    return into


@contextmanager
def lab_server(
    profile: str,
    *,
    patched: bool = False,
    env: dict[str, str] | None = None,
    ready_timeout: float = 120.0,
    overrides: list[str] | None = None,
) -> Iterator[LabServer]:
    from k26ctl.profile import load_profile
    from k26ctl.render import render_launch

    port = free_port()
    loaded = load_profile(
        ROOT / "profiles" / "lab" / f"{profile}.yaml", [f"sglang.port={port}", *(overrides or [])]
    )
    spec = render_launch(loaded.profile)
    argv = [sys.executable, *[a.replace(HOST_MODELS, str(LAB / "weights")) for a in spec.argv[1:]]]
    with tempfile.TemporaryDirectory(prefix="k26smoke-lab-") as tmp:
        tree = patched_tree(list(loaded.profile.patches), Path(tmp) / "tree") if patched else None
        child_env = {k: v for k, v in os.environ.items() if not k.startswith("K26LAB_")}
        child_env.update({k: v for k, v in spec.env.items() if k not in ("PATH", "PYTHONPATH")})
        child_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tree) if tree else "", str(ROOT)) if p)
        child_env.update(env or {})
        log_path = Path(tmp) / "server.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=child_env, cwd=tmp)
        server = LabServer(f"http://127.0.0.1:{port}", process, log_path)
        try:
            _wait_ready(server, ready_timeout)
            yield server
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    server.kill()


def _wait_ready(server: LabServer, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"lab server exited with {server.process.returncode}:\n{server.log()[-2000:]}")
        try:
            if httpx.get(server.url + "/health", timeout=2.0, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    server.kill()
    raise RuntimeError(f"lab server not ready within {timeout:.0f} s:\n{server.log()[-2000:]}")
