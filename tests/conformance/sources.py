"""Real SGLang release sources for the conformance tests: each wheel fetched once with `pip download
--no-deps` into the user cache (as the patch tests do) and its Python sources unpacked once a session;
and SGLang's own OpenAI protocol module loaded from them."""

from __future__ import annotations

import importlib.util
import sys
import types
import zipfile
from pathlib import Path
from typing import Any

import pytest

from k26ctl.errors import UnreachableError

VERSIONS = ("0.5.15", "0.5.23")


class Sources:
    """One release's `sglang/` tree (Python files only)."""

    def __init__(self, version: str, root: Path) -> None:
        self.version = version
        self.root = root  # the sglang/ directory

    def text(self, relative: str) -> str:
        return (self.root / relative).read_text(encoding="utf-8")

    def files_containing(self, literal: str, under: str = "srt") -> list[str]:
        found = []
        for path in sorted((self.root / under).rglob("*.py")):
            if literal in path.read_text(encoding="utf-8", errors="replace"):
                found.append(str(path.relative_to(self.root)))
        return found


_CACHE: dict[str, Sources] = {}


def release_sources(version: str, base: Path) -> Sources:
    from k26ctl.patches.release import fetch_wheel
    from tests.support.tiers import require_slow

    if version not in _CACHE:
        require_slow(f"a download of sglang=={version}")
        try:
            wheel = fetch_wheel(version)
        except UnreachableError as exc:
            pytest.skip(f"pip cannot fetch sglang=={version}: {exc.message}")
        dest = base / version
        with zipfile.ZipFile(wheel) as archive:
            names = [n for n in archive.namelist() if n.startswith("sglang/") and n.endswith(".py")]
            archive.extractall(dest, names)
        _CACHE[version] = Sources(version, dest / "sglang")
    return _CACHE[version]


def load_protocol(src: Sources) -> Any:
    """SGLang's own OpenAI protocol module (entrypoints/openai/protocol.py), loaded in isolation: its
    only SGLang import, `sglang.utils.convert_json_schema_to_str`, is served by a stand-in for the
    duration of the import (the rest of SGLang needs a GPU stack)."""
    name = f"_sglang_protocol_{src.version.replace('.', '_')}"
    if name in sys.modules:
        return sys.modules[name]
    saved = {key: sys.modules.get(key) for key in ("sglang", "sglang.utils")}
    package = types.ModuleType("sglang")
    package.__path__ = []
    utils = types.ModuleType("sglang.utils")
    utils.convert_json_schema_to_str = lambda schema: str(schema)  # type: ignore[attr-defined]
    sys.modules.update({"sglang": package, "sglang.utils": utils})
    try:
        spec = importlib.util.spec_from_file_location(name, src.root / "srt/entrypoints/openai/protocol.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    finally:
        for key, value in saved.items():
            if value is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = value
    return module
