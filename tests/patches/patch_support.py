"""Helpers for the patch tests: this machine as a Host, and real SGLang release sources."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from k26ctl.errors import UnreachableError
from k26ctl.profile import Profile
from k26ctl.remote.base import WriteResult
from k26ctl.remote.local import LocalHost

TARGET = "srt/layers/attention/triton_backend.py"
PATCH = "triton-ddtree-verify-width"


class RecordingHost(LocalHost):
    """This machine as a Host (the real LocalHost), noting which paths were written."""

    def __init__(self) -> None:
        super().__init__(name="testhost")
        self.writes: list[str] = []

    def write_file_atomic(
        self, path: str, data: bytes, *, mode: int | None = None, sudo: bool = False, backup: bool = True
    ) -> WriteResult:
        result = super().write_file_atomic(path, data, mode=mode, sudo=sudo, backup=backup)
        self.writes.append(path)
        return result


def make_profile(root: Path | None, patches: Sequence[str] = (PATCH,), **sglang: object) -> Profile:
    settings: dict[str, object] = {"python": sys.executable, **sglang}
    if root is not None:
        settings["package_root"] = str(root)
    return Profile.model_validate(
        {"host": {"address": "local"}, "sglang": settings, "patches": list(patches)}
    )


class ReleaseSources:
    """Real SGLang release sources: each wheel is fetched once (pip download into the user cache)
    and unpacked once per session; every test gets its own copy of the package root."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.pristine: dict[str, Path] = {}

    def copy(self, version: str, dest: Path) -> Path:
        from k26ctl.patches.release import extract_targets, fetch_wheel
        from tests.support.tiers import require_slow

        if version not in self.pristine:
            require_slow(f"a download of sglang=={version}")
            try:
                wheel = fetch_wheel(version)
            except UnreachableError as exc:
                pytest.skip(f"pip cannot reach the package index for sglang=={version}: {exc.message}")
            self.pristine[version] = extract_targets(wheel, [TARGET, "__init__.py"], self.base / version)
        copy = dest / version / "sglang"
        shutil.copytree(self.pristine[version], copy)
        return copy
