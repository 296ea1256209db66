"""Which command's JSON document this is, told by its shape (the documents carry no common tag)."""

from __future__ import annotations

from typing import Any

from k26ctl.errors import ConfigError

KINDS = ("smoke", "deploy", "bisect", "bisect-log", "sweep", "fleet-roll")


def kind_of(doc: Any) -> str:
    if not isinstance(doc, dict):
        raise ConfigError(
            "not a k26ctl result: the JSON is not an object", "save a command's --json output and pass that"
        )
    if doc.get("kind") == "fleet-roll":
        return "fleet-roll"
    if doc.get("kind") in ("deploy", "rollback") and "steps" in doc and "verdict" in doc:
        return "deploy"
    if "results" in doc and "suite" in doc and "passed" in doc:
        return "smoke"
    if isinstance(doc.get("spec"), dict) and "steps" in doc and "outcome" in doc:
        return "bisect-log"
    if doc.get("mode") in ("numeric", "set") and "steps" in doc:
        return "bisect"
    if "points" in doc and "objective" in doc:
        return "sweep"
    raise ConfigError(
        "not a k26ctl result this command can draw",
        "pass the --json output of smoke, deploy, bisect-config (or its log), sweep (or its log) "
        "or a fleet deploy",
    )
