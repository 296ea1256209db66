"""A stand-in for flashinfer, only so that SGLang 0.5.15 imports on a machine without it.

SGLang imports flashinfer submodules at module level on CUDA (layers/sampler.py,
layers/attention/vision.py). The real package is large and pulls in more; the GPU check serves with
`--attention-backend triton --sampling-backend pytorch` and SGLANG_IS_FLASHINFER_AVAILABLE=false, so
no flashinfer code should run. Every `flashinfer.*` import succeeds here and every name in it is a
placeholder that raises when called: a path that does need flashinfer fails loudly instead of quietly.
`flashinfer.norm` is refused, so sgl_kernel falls back to its own RMSNorm kernels.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import sys
import types
from typing import Any

__version__ = "0.0.0+k26ctl-stand-in"

_REFUSED = {"norm"}
_PROVIDED = {"sampling"}  # modules of this folder with working (torch) versions


class _Placeholder(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder(f"{cls.__qualname__}.{name}")

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{cls.__qualname__}: flashinfer is not installed (stand-in only)")


def _placeholder(name: str) -> type:
    return _Placeholder(name.rsplit(".", 1)[-1], (), {"__qualname__": name, "__module__": "flashinfer"})


class _Module(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name == "logger":
            return logging.getLogger(self.__name__)
        value = _placeholder(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(
        self, fullname: str, path: Any, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        parts = fullname.split(".")
        if parts[0] == "flashinfer" and len(parts) > 1 and parts[1] not in _PROVIDED | _REFUSED:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _Module(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []


sys.meta_path.insert(0, _Finder())
sys.modules[__name__].__class__ = _Module
