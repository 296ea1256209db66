"""`patch check`: try the patch set on a local copy of a real SGLang release or source tree.

Wheels come from `pip download --no-deps` into the user's cache (XDG_CACHE_HOME/k26ctl/sglang-wheels)
and are reused from there. Only the patches' target files are unpacked. The check runs the pure
engine in memory: apply, compile, re-apply (must be a no-op) and revert (must give the original
bytes); nothing outside the temporary copy is touched.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from k26ctl.errors import ConfigError, UnreachableError
from k26ctl.patches.engine import State, apply_text, evaluate, revert_text, unified_diff
from k26ctl.patches.model import Patch

_VERSION = re.compile(r"^[0-9]+(\.[0-9]+)*([a-zA-Z0-9.+]*)$")


def wheel_cache_dir() -> Path:
    from k26ctl import statedir

    return statedir.cache_root() / "k26ctl" / "sglang-wheels"


def _cached_wheel(version: str, cache: Path) -> Path | None:
    found = sorted(cache.glob(f"sglang-{version}-*.whl"))
    return found[0] if found else None


def fetch_wheel(version: str, cache: Path | None = None, *, timeout: float = 600.0) -> Path:
    """The release wheel of sglang==version, downloaded with pip into the cache once."""
    if not _VERSION.match(version):
        raise ConfigError(f"not a release version: {version!r}", "for example --sglang-version 0.5.15")
    cache = cache or wheel_cache_dir()
    cached = _cached_wheel(version, cache)
    if cached is not None:
        return cached
    cache.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet"]
    argv += [f"sglang=={version}", "-d", str(cache)]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise UnreachableError(
            f"pip download sglang=={version} timed out", "check the package index"
        ) from None
    wheel = _cached_wheel(version, cache)
    if proc.returncode != 0 or wheel is None:
        detail = (proc.stderr.strip().splitlines() or ["no wheel saved"])[-1]
        raise UnreachableError(
            f"pip could not download sglang=={version}: {detail}",
            "check the version exists and that pip reaches its index (or use --source DIR)",
        )
    return wheel


def extract_targets(wheel: Path, targets: Iterable[str], dest: Path) -> Path:
    """Unpack `sglang/<target>` for each target into dest; returns dest/'sglang'."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        for target in targets:
            member = f"sglang/{target}"
            if member in names:
                archive.extract(member, dest)
    return dest / "sglang"


def source_root(directory: Path) -> Path:
    """Accept the `sglang/` package dir itself, a dir holding it, or an SGLang checkout."""
    for candidate in (directory, directory / "sglang", directory / "python" / "sglang"):
        if (candidate / "srt").is_dir():
            return candidate
    raise ConfigError(
        f"no sglang package under {directory}",
        "give the sglang/ directory, its parent, or an SGLang checkout",
    )


@dataclass(frozen=True)
class CheckOutcome:
    name: str
    target: str
    result: str  # applied | already-applied | not-needed | refused | missing
    message: str
    diff: str = ""

    @property
    def refused(self) -> bool:
        return self.result in ("refused", "missing")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CheckReport:
    source: str
    outcomes: list[CheckOutcome] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(o.refused for o in self.outcomes)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "ok": self.ok, "patches": [o.to_json() for o in self.outcomes]}


def _check_one(patch: Patch, text: str) -> tuple[CheckOutcome, str]:
    evaluation = evaluate(patch, text)
    if evaluation.state is State.APPLIED:
        return CheckOutcome(patch.name, patch.target, "already-applied", evaluation.message), text
    if evaluation.state is State.NOT_NEEDED:
        return CheckOutcome(patch.name, patch.target, "not-needed", evaluation.message), text
    if evaluation.state is State.REFUSED:
        return CheckOutcome(patch.name, patch.target, "refused", evaluation.message), text
    new_text = apply_text(patch, text)
    problems: list[str] = []
    try:
        compile(new_text, patch.target, "exec", dont_inherit=True)
    except SyntaxError as exc:
        problems.append(f"does not compile: {exc.msg} at line {exc.lineno}")
    if apply_text(patch, new_text) != new_text:
        problems.append("re-applying changes the text again")
    if revert_text(patch, new_text) != text:
        problems.append("revert does not give the original bytes")
    diff = unified_diff(text, new_text, patch.target)
    if problems:
        return CheckOutcome(patch.name, patch.target, "refused", "; ".join(problems), diff), text
    edits = len(patch.edits)
    message = (
        f"{edits} edit{'s' * (edits != 1)} applied; compiles; re-apply is a no-op; revert gives the original"
    )
    return CheckOutcome(patch.name, patch.target, "applied", message, diff), new_text


def check_tree(root: Path, patches: Iterable[Patch], source: str | None = None) -> CheckReport:
    """Apply the set in order to in-memory copies of the targets under the package root `root`."""
    texts: dict[str, str] = {}
    outcomes: list[CheckOutcome] = []
    for patch in patches:
        path = root / patch.target
        if patch.target not in texts:
            if not path.is_file():
                outcomes.append(CheckOutcome(patch.name, patch.target, "missing", f"{path} does not exist"))
                continue
            texts[patch.target] = path.read_text(encoding="utf-8")
        outcome, texts[patch.target] = _check_one(patch, texts[patch.target])
        outcomes.append(outcome)
    return CheckReport(source or str(root), outcomes)


def check_release(
    version: str, patches: list[Patch], workdir: Path, cache: Path | None = None
) -> CheckReport:
    wheel = fetch_wheel(version, cache)
    root = extract_targets(wheel, {p.target for p in patches}, workdir)
    return check_tree(root, patches, f"sglang {version} ({wheel.name})")
