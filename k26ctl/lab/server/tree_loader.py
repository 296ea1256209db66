"""Find and import the SGLang-shaped package tree that provides the attention backend.

The lab host runs the server with PYTHONPATH pointing at its own copy of the tree (which
`k26ctl patch` may have patched); when the `sglang` found on the path is not a lab tree (or there is
none), the copy bundled with k26ctl is used. A real SGLang installation is never imported.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

BUNDLED_TREE = Path(__file__).resolve().parent / "sglang_tree"
MARKER = "__k26lab_tree__"


@dataclass(frozen=True)
class LabTree:
    root: Path  # the directory holding the `sglang` package
    backend: ModuleType  # sglang.srt.layers.attention.triton_backend
    forward_batch_info: ModuleType
    lab_memory: ModuleType

    @property
    def backend_file(self) -> Path:
        return Path(self.backend.__file__ or "")


def is_lab_tree(package_dir: Path) -> bool:
    init = package_dir / "__init__.py"
    try:
        return MARKER in init.read_text(encoding="utf-8")
    except OSError:
        return False


def find_tree_root() -> Path:
    """The root of the lab tree to use: `sglang` from sys.path if it is a lab tree, else the bundled one."""
    loaded = sys.modules.get("sglang")
    if loaded is not None and loaded.__file__ and is_lab_tree(Path(loaded.__file__).parent):
        return Path(loaded.__file__).parent.parent
    spec = importlib.util.find_spec("sglang") if loaded is None else None
    if spec is not None and spec.submodule_search_locations:
        package_dir = Path(next(iter(spec.submodule_search_locations)))
        if is_lab_tree(package_dir):
            return package_dir.parent
    return BUNDLED_TREE


def import_tree(root: Path | None = None) -> LabTree:
    """Import the tree at `root` (default: `find_tree_root()`), replacing any other loaded `sglang`."""
    root = (root or find_tree_root()).resolve()
    loaded = sys.modules.get("sglang")
    if loaded is not None and Path(loaded.__file__ or "").parent.parent.resolve() != root:
        for name in [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]:
            del sys.modules[name]
    added = str(root) not in sys.path
    if added:
        sys.path.insert(0, str(root))
    importlib.invalidate_caches()
    try:
        package = importlib.import_module("sglang")
        if not is_lab_tree(Path(package.__file__ or "").parent):
            raise ImportError(f"{root}/sglang is not a k26ctl lab tree")
        return LabTree(
            root=root,
            backend=importlib.import_module("sglang.srt.layers.attention.triton_backend"),
            forward_batch_info=importlib.import_module("sglang.srt.model_executor.forward_batch_info"),
            lab_memory=importlib.import_module("sglang.srt.lab_memory"),
        )
    finally:
        if added:
            sys.path.remove(str(root))
