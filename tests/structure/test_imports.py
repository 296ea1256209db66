"""The layering holds: the import-linter contract passes and can fail, no import cycles, and the lab
(a test harness) is imported only by itself and by the `k26ctl lab` commands."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
# The CLI of the lab itself (`k26ctl lab ...`: cli/lab_*.py) is the one place above the lab.
LAB_COMMANDS_PREFIX = "k26ctl.cli.lab_"

pytestmark = pytest.mark.skipif(not Path(LINT_IMPORTS).exists(), reason="import-linter is not installed")


def _lint(project: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(project)}
    return subprocess.run(
        [LINT_IMPORTS, "--no-cache"], cwd=project, env=env, capture_output=True, text=True, timeout=300
    )


def _copy_project(into: Path) -> Path:
    project = into / "project"
    project.mkdir()
    shutil.copy2(ROOT / "pyproject.toml", project / "pyproject.toml")
    shutil.copytree(
        ROOT / "k26ctl",
        project / "k26ctl",
        ignore=shutil.ignore_patterns("__pycache__", "weights", "sglang_tree", "data"),
    )
    benchmarks = shutil.ignore_patterns("__pycache__", "data")
    shutil.copytree(ROOT / "benchmarks", project / "benchmarks", ignore=benchmarks)
    return project


def _graph() -> grimp.ImportGraph:
    return grimp.build_graph("k26ctl", cache_dir=None)


def test_the_layers_contract_holds() -> None:
    proc = _lint(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ", 0 broken" in proc.stdout and " 0 kept" not in proc.stdout


def test_the_layers_contract_fails_on_an_upward_import(tmp_path: Path) -> None:
    project = _copy_project(tmp_path)
    connect = project / "k26ctl" / "remote" / "connect.py"
    # the shape of the edge the contract exists for: the transport layer reaching into the lab,
    # hidden inside a function where only a whole-graph check sees it
    connect.write_text(
        connect.read_text()
        + "\n\ndef _lab_status(name: str) -> object:\n"
        + "    from k26ctl.lab.host import lab_status\n\n    return lab_status(name)\n"
    )
    proc = _lint(project)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ", 1 broken" in proc.stdout
    assert "k26ctl.remote.connect -> k26ctl.lab.host" in proc.stdout


def test_there_is_no_import_cycle_in_the_package() -> None:
    graph = _graph()
    modules = sorted(m for m in graph.modules if ".sglang_tree" not in m)
    cycles = []
    for module in modules:
        for imported in graph.find_modules_directly_imported_by(module):
            if ".sglang_tree" in imported or imported == module:
                continue
            chain = graph.find_shortest_chain(importer=imported, imported=module)
            if chain is not None:
                cycles.append((module, *chain))
    assert cycles == [], cycles[:5]


def test_only_the_lab_and_its_commands_import_the_lab() -> None:
    graph = _graph()
    importers = {
        importer
        for module in graph.find_descendants("k26ctl.lab") | {"k26ctl.lab"}
        for importer in graph.find_modules_that_directly_import(module)
        if not importer.startswith("k26ctl.lab")
    }
    outside = sorted(i for i in importers if not i.startswith(LAB_COMMANDS_PREFIX))
    assert outside == [], outside
    assert "k26ctl.cli.lab_cmd" in importers, "the lab commands import the lab: the check sees the graph"
