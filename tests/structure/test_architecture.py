"""ARCHITECTURE.md maps every package and module of k26ctl/ and every floor of the import contract;
a new package that is not on the map fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAP = ROOT / "ARCHITECTURE.md"


def parts_of(package: Path) -> list[str]:
    """The map names of a package's top-level parts: `k26ctl/NAME/` and `k26ctl/NAME.py`."""
    names = []
    for item in sorted(package.iterdir()):
        if item.name.startswith(("_", ".")) and item.name != "__main__.py":
            continue
        if item.is_dir() and item.name != "__pycache__":
            names.append(f"{package.name}/{item.name}/")
        elif item.suffix == ".py":
            names.append(f"{package.name}/{item.name}")
    return names


def missing_from(text: str, package: Path) -> list[str]:
    return [name for name in parts_of(package) if f"`{name}`" not in text]


def test_every_part_of_the_package_is_on_the_map() -> None:
    assert missing_from(MAP.read_text(encoding="utf-8"), ROOT / "k26ctl") == []


def test_every_floor_of_the_import_contract_is_on_the_map() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    text = MAP.read_text(encoding="utf-8")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    layers = config["tool"]["importlinter"]["contracts"][0]["layers"]
    for layer in layers:
        for module in (m.strip() for m in layer.split("|")):
            dotted = module.replace(".", "/")
            assert f"`{dotted}/`" in text or f"`{dotted}.py`" in text, module


def test_a_package_missing_from_the_map_is_named(tmp_path: Path) -> None:
    package = tmp_path / "k26ctl"
    (package / "newthing").mkdir(parents=True)
    (package / "newthing" / "__init__.py").write_text("")
    (package / "known.py").write_text("")
    (package / "__pycache__").mkdir()
    assert missing_from("| `k26ctl/known.py` | ... |", package) == ["k26ctl/newthing/"]


def test_readme_points_to_the_map() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = readme.split("## Layout", 1)[1]
    assert "ARCHITECTURE.md" in layout.split("\n## ", 1)[0]
