"""What a real-SGLang lab host has beyond the stand-in: under the host's /opt/sglang,

<version>/venv     each release's venv from the machine-wide cache, bound read-only
cpu-ops/sgl_kernel the pure-torch sgl_kernel stand-in (PYTHONPATH of the 0.5.23 profile)
models/k26real-tiny     the tiny Llama trained on the lab corpus (shipped, checksummed)
models/k26real-garbage  the same with untrained weights (made here, deterministic)
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path

from k26ctl.errors import K26Error
from k26ctl.lab.real.releases import RELEASES, ensure_release
from k26ctl.lab.real.untrained import write_untrained

INNER_ROOT = "/opt/sglang"
GOOD_MODEL = "k26real-tiny"
GARBAGE_MODEL = "k26real-garbage"
PACKAGE_DIR = Path(__file__).resolve().parent
SHIPPED_MODELS = PACKAGE_DIR / "models"
CPU_OPS = PACKAGE_DIR / "cpu_ops"


def inner_venv(version: str) -> str:
    return f"{INNER_ROOT}/{version}/venv"


def verify_checksums(model_dir: Path) -> None:
    """Every file listed in SHA256SUMS has its recorded digest (the shipped model is what was built)."""
    sums = model_dir / "SHA256SUMS"
    try:
        lines = sums.read_text().splitlines()
    except OSError as exc:
        raise K26Error(f"{sums}: {exc.strerror or exc}", "the shipped model is incomplete") from None
    for line in lines:
        digest, name = line.split(maxsplit=1)
        got = hashlib.sha256((model_dir / name.lstrip("*")).read_bytes()).hexdigest()
        if got != digest:
            raise K26Error(f"{model_dir / name}: checksum {got[:12]} is not the recorded {digest[:12]}")


def provision(
    opt: Path, versions: tuple[str, ...] = RELEASES, say: Callable[[str], None] = print
) -> list[tuple[Path, str]]:
    """Fill the host's /opt (at `opt` on this machine) and return the read-only binds (source, inside)
    of the release venvs, installing any release the cache lacks."""
    root = opt / INNER_ROOT.removeprefix("/opt/")
    binds = []
    for version in versions:
        venv = ensure_release(version, say)
        (root / version / "venv").mkdir(parents=True, exist_ok=True)  # the mount point
        binds.append((venv, inner_venv(version)))
    shutil.copytree(
        CPU_OPS, root / "cpu-ops", dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
    )
    good = SHIPPED_MODELS / GOOD_MODEL
    verify_checksums(good)
    models = root / "models"
    shutil.copytree(good, models / GOOD_MODEL, dirs_exist_ok=True)
    write_untrained(good, models / GARBAGE_MODEL)
    return binds
