"""Coherence smoke tests for a running SGLang server, and the degenerate-output detectors.

Public API: `run_smoke`, `SmokeTarget`, `SmokeOptions`, `SmokeReport`, `Suite`, `load_suite`,
`score_text`. Names are resolved lazily so that `k26ctl score` does not pay for the HTTP client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from k26ctl.smoke.baseline import Baseline
    from k26ctl.smoke.detectors import Finding, TextVerdict, score_text
    from k26ctl.smoke.report import RequestResult, SmokeReport
    from k26ctl.smoke.runner import SmokeOptions, SmokeTarget, run_smoke
    from k26ctl.smoke.suite import Suite, load_suite

_EXPORTS = {
    "run_smoke": "runner",
    "SmokeTarget": "runner",
    "SmokeOptions": "runner",
    "SmokeReport": "report",
    "RequestResult": "report",
    "Suite": "suite",
    "load_suite": "suite",
    "Baseline": "baseline",
    "score_text": "detectors",
    "TextVerdict": "detectors",
    "Finding": "detectors",
}

__all__ = [
    "Baseline",
    "Finding",
    "RequestResult",
    "SmokeOptions",
    "SmokeReport",
    "SmokeTarget",
    "Suite",
    "TextVerdict",
    "load_suite",
    "run_smoke",
    "score_text",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'k26ctl.smoke' has no attribute {name!r}")
    return getattr(importlib.import_module(f"k26ctl.smoke.{module}"), name)
