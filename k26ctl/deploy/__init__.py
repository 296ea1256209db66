"""Deploying a profile to its host: plan, apply, restart, readiness, smoke, history, rollback.

`deploy(loaded, opts, on_event)` runs the pipeline (see `pipeline`); `rollback` undoes the last change;
`session.open_service` is the connect-lock-systemd opening they share; `wait` waits for readiness.
"""

from __future__ import annotations

from k26ctl.deploy.model import DeployEvent, DeployOptions, DeployResult, StepResult
from k26ctl.deploy.pipeline import deploy
from k26ctl.deploy.restore import rollback

__all__ = ["DeployEvent", "DeployOptions", "DeployResult", "StepResult", "deploy", "rollback"]
