"""Which page draws a JSON document: told by its tag (`kind`, `schema_version`: k26ctl/documents.py),
or, for an untagged document of the release before the tag, by its shape."""

from __future__ import annotations

from typing import Any

from k26ctl.documents import SCHEMA_VERSION, tag_of
from k26ctl.errors import ConfigError

KINDS = ("smoke", "deploy", "bisect", "bisect-log", "sweep", "fleet-roll")
# document kind -> the view that draws it
VIEWS = {kind: kind for kind in KINDS} | {"rollback": "deploy"}
DRAWN = "smoke, deploy, bisect-config (or its log), sweep (or its log) or a fleet deploy"


def kind_of(doc: Any) -> str:
    if not isinstance(doc, dict):
        raise ConfigError(
            "not a k26ctl result: the JSON is not an object", "save a command's --json output and pass that"
        )
    tag = tag_of(doc)
    if tag is None:
        return _kind_by_shape(doc)
    kind, version = tag
    if version > SCHEMA_VERSION:
        raise ConfigError(
            f"a {kind} document of schema version {version}: this k26ctl reads up to {SCHEMA_VERSION}",
            "draw it with the k26ctl that wrote it, or upgrade this one",
        )
    if kind not in VIEWS:
        raise ConfigError(
            f"a {kind} document: report draws no page for it",
            f"pass the --json output of {DRAWN}",
        )
    return VIEWS[kind]


def _kind_by_shape(doc: dict[str, Any]) -> str:
    """The untagged documents of the release before the tag."""
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
        f"pass the --json output of {DRAWN}",
    )
