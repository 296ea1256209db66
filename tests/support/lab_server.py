"""Start the real lab server (`python -m k26ctl.lab.serve`, torch on the CPU) on 127.0.0.1 as a child
process of the checkout under test: from explicit flags (`start_lab_server`), or from a shipped lab
profile the way its unit would run it (`lab_server`).

The profile path takes the argv and environment from `render_launch`, exactly as the unit on the lab
host would get them; only the host paths are mapped to this checkout (the interpreter, the weights
under k26ctl/lab/server/weights, and PYTHONPATH). `patched=True` runs the server over a copy of the
lab's SGLang-shaped tree with the profile's patches applied by k26ctl's own patch engine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "k26ctl" / "lab" / "server"
HOST_MODELS = "/opt/k26lab/models"
READY_LINE = "The server is fired up and ready to roll!"
VERIFY_WIDTH_PATCH = "triton-ddtree-verify-width"


@dataclass
class LabServer:
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def wait_for(self, text: str, timeout: float = 90.0) -> bool:
        """Whether `text` appears in the server's log within `timeout` (False at once if it exited)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log():
                return True
            if self.proc.poll() is not None:
                return text in self.log()
            time.sleep(0.1)
        return False

    def wait_ready(self, timeout: float = 120.0) -> LabServer:
        if not self.wait_for(READY_LINE, timeout):
            self.stop()
            raise AssertionError(f"lab server did not become ready:\n{self.log()[-3000:]}")
        return self

    def kill(self) -> None:
        """SIGKILL: the server dies without draining (a crash, as the tests see it)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def stop(self) -> int:
        """SIGTERM (the server drains as SGLang does), SIGKILL after 20 s; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return int(self.proc.returncode)


def start_lab_server(
    workdir: Path,
    args: list[str],
    env: dict[str, str] | None = None,
    wait_ready: bool = True,
    *,
    timeout: float = 120.0,
) -> LabServer:
    """`python -m k26ctl.lab.serve --host 127.0.0.1 --port FREE ARGS` run in `workdir` (its log there too),
    by default waited for until it says it is ready."""
    port = free_port()
    argv = ["-m", "k26ctl.lab.serve", "--host", "127.0.0.1", "--port", str(port), *args]
    return _launch(argv, port, workdir, env, wait_ready, timeout)


def _launch(
    argv: list[str], port: int, workdir: Path, env: dict[str, str] | None, wait_ready: bool, timeout: float
) -> LabServer:
    """This interpreter with `argv`; the environment without lab or SGLang settings from outside, then
    `env`, with this checkout on PYTHONPATH after any path `env` puts first (e.g. a patched tree)."""
    from tests.support.tiers import require_slow

    require_slow("a lab server")
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("K26LAB_", "SGLANG_"))}
    full_env.update(env or {})
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in ((env or {}).get("PYTHONPATH"), str(ROOT)) if p)
    log_path = workdir / f"server-{port}.log"
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, *argv], stdout=out, stderr=subprocess.STDOUT, env=full_env, cwd=workdir
        )
    server = LabServer(proc, port, log_path)
    return server.wait_ready(timeout) if wait_ready else server


def patched_tree(into: Path, names: Iterable[str] = (VERIFY_WIDTH_PATCH,)) -> Path:
    """A copy of the lab's SGLang-shaped tree in `into` with the patches `names` applied; returns `into`,
    the directory to put on PYTHONPATH."""
    from k26ctl.patches import apply_text, select_patches

    shutil.copytree(
        LAB / "sglang_tree", into, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
    )
    for patch in select_patches(list(names)):
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
    """The server of the shipped lab profile `profile` (name under profiles/lab/), ready, then stopped."""
    from k26ctl.profile import load_profile
    from k26ctl.render import render_launch

    port = free_port()
    loaded = load_profile(
        ROOT / "profiles" / "lab" / f"{profile}.yaml", [f"sglang.port={port}", *(overrides or [])]
    )
    spec = render_launch(loaded.profile)
    argv = [a.replace(HOST_MODELS, str(LAB / "weights")) for a in spec.argv[1:]]
    with tempfile.TemporaryDirectory(prefix="k26-lab-server-") as tmp:
        child_env = {k: v for k, v in spec.env.items() if k not in ("PATH", "PYTHONPATH")}
        if patched:
            child_env["PYTHONPATH"] = str(patched_tree(Path(tmp) / "tree", loaded.profile.patches))
        child_env.update(env or {})
        server = _launch(argv, port, Path(tmp), child_env, True, ready_timeout)
        try:
            yield server
        finally:
            server.stop()
