"""Modules that load on first use instead of when something imports them.

paramiko imports `invoke` as it starts, only to run the `Match exec` lines of ~/.ssh/config. That is
about 120 more modules: some 0.09 s of every SSH command's start-up here, and more time again at exit
while the interpreter tears them down. A stand-in in `sys.modules` lets paramiko's import succeed; the
real module loads the first time one of its attributes is used, so `Match exec` still works.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any


class _OnFirstUse(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # introspection (copy, pickle, help) does not need the real module
            raise AttributeError(name)
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), name)


def defer_import(name: str) -> None:
    """Put a stand-in for the top-level module `name` in `sys.modules` that imports the real one at
    its first attribute access. Nothing happens when the module is already imported or not installed
    (then an importer sees the ImportError it expects)."""
    if name in sys.modules or importlib.util.find_spec(name) is None:
        return
    stand_in = _OnFirstUse(name)
    stand_in.__spec__ = None  # the import system reads `__spec__` of every module it finds here
    sys.modules[name] = stand_in
