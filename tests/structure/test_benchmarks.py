"""Every benchmark script imports, answers --help, and imports nothing that is not there, also inside
its functions (where a deleted test helper would otherwise surface only in the benchmark's run)."""

from __future__ import annotations

import ast
import importlib.util
import runpy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = sorted(p for p in (ROOT / "benchmarks").glob("*.py") if p.name != "__init__.py")
OURS = ("k26ctl", "tests", "benchmarks")


def _ours(module: str) -> bool:
    return module.split(".")[0] in OURS


def imported_modules(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every absolute import of this project's packages in the file."""
    found: list[tuple[int, str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, []) for a in node.names if _ours(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _ours(node.module or ""):
            found.append((node.lineno, str(node.module), [a.name for a in node.names]))
    return found


def missing_imports(path: Path) -> list[str]:
    missing = []
    for line, module, names in imported_modules(path):
        try:
            spec = importlib.util.find_spec(module)
        except ModuleNotFoundError:  # a parent package is missing
            spec = None
        if spec is None:
            missing.append(f"{path.name}:{line}: {module}")
            continue
        loaded = importlib.import_module(module)
        for name in names:
            is_submodule = hasattr(loaded, "__path__") and importlib.util.find_spec(f"{module}.{name}")
            if not is_submodule and not hasattr(loaded, name):
                missing.append(f"{path.name}:{line}: {module}.{name}")
    return missing


def test_there_are_benchmarks() -> None:
    assert len(BENCHMARKS) >= 10


@pytest.mark.parametrize("script", BENCHMARKS, ids=lambda p: p.name)
def test_every_import_of_a_benchmark_resolves(script: Path) -> None:
    assert missing_imports(script) == []


def test_a_deleted_module_is_caught(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("def run():\n    from tests.lab.conftest import patched_tree_copy\n")
    assert missing_imports(broken) == ["broken.py:2: tests.lab.conftest"]


@pytest.mark.parametrize("script", BENCHMARKS, ids=lambda p: p.name)
def test_every_benchmark_answers_help(
    script: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", [str(script), "--help"])
    # as `python3 benchmarks/X.py` runs it: its folder first (a script may import a sibling)
    monkeypatch.setattr(sys, "path", [str(script.parent), *sys.path])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(script), run_name="__main__")
    assert done.value.code in (0, None)
    assert "usage:" in capsys.readouterr().out.lower()
