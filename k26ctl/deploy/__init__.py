"""Deploying a profile to its host: plan, apply, restart, readiness, smoke, history, rollback.

`deploy(loaded, opts, on_event)` runs the pipeline (see `pipeline`); `rollback` undoes the last change.
Names are resolved lazily: `k26ctl.health` imports the pure modules of this package, and the pipeline
imports `k26ctl.health`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from k26ctl.deploy.model import DeployEvent, DeployOptions, DeployResult, StepResult
    from k26ctl.deploy.pipeline import deploy
    from k26ctl.deploy.restore import rollback

_EXPORTS = {
    "DeployEvent": "model",
    "DeployOptions": "model",
    "DeployResult": "model",
    "StepResult": "model",
    "deploy": "pipeline",
    "rollback": "restore",
}

__all__ = ["DeployEvent", "DeployOptions", "DeployResult", "StepResult", "deploy", "rollback"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'k26ctl.deploy' has no attribute {name!r}")
    return getattr(importlib.import_module(f"k26ctl.deploy.{module}"), name)
