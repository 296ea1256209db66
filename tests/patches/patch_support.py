"""Helpers for the patch tests: a small Host over this machine and real SGLang release sources."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from k26ctl.errors import UnreachableError
from k26ctl.profile import Profile
from k26ctl.remote.base import CommandResult, Host, LockInfo, WriteResult

TARGET = "srt/layers/attention/triton_backend.py"
PATCH = "triton-ddtree-verify-width"


class DirHost(Host):
    """This machine as a Host, enough for the patch operations (commands and files only)."""

    def __init__(self) -> None:
        self.name = "testhost"
        self.writes: list[str] = []

    def run(
        self,
        argv: Sequence[str],
        *,
        sudo: bool = False,
        check: bool = False,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        full_env = {**os.environ, **(env or {})}
        try:
            proc = subprocess.run(list(argv), input=stdin, capture_output=True, timeout=timeout, env=full_env)
        except FileNotFoundError as exc:
            return CommandResult(tuple(argv), 127, "", f"{argv[0]}: not found ({exc.strerror})")
        return CommandResult(tuple(argv), proc.returncode, proc.stdout.decode(), proc.stderr.decode())

    def stream(
        self, argv: Sequence[str], *, sudo: bool = False, timeout: float | None = None
    ) -> Iterator[str]:
        raise NotImplementedError

    def read_file(self, path: str, *, sudo: bool = False) -> bytes | None:
        try:
            return Path(path).read_bytes()
        except FileNotFoundError:
            return None

    def write_file_atomic(
        self, path: str, data: bytes, *, mode: int | None = None, sudo: bool = False, backup: bool = True
    ) -> WriteResult:
        directory = os.path.dirname(path)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".k26tmp-")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if os.path.exists(path):
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        os.replace(tmp, path)
        self.writes.append(path)
        return WriteResult(path, True, None, hashlib.sha256(data).hexdigest())

    def sha256(self, path: str, *, sudo: bool = False) -> str | None:
        data = self.read_file(path)
        return None if data is None else hashlib.sha256(data).hexdigest()

    def lock(self, name: str, *, holder: str, wait: float = 0.0) -> AbstractContextManager[LockInfo]:
        raise NotImplementedError

    def forward(self, remote_host: str, remote_port: int) -> AbstractContextManager[tuple[str, int]]:
        raise NotImplementedError


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

        if version not in self.pristine:
            try:
                wheel = fetch_wheel(version)
            except UnreachableError as exc:
                pytest.skip(f"pip cannot reach the package index for sglang=={version}: {exc.message}")
            self.pristine[version] = extract_targets(wheel, [TARGET, "__init__.py"], self.base / version)
        copy = dest / version / "sglang"
        shutil.copytree(self.pristine[version], copy)
        return copy
