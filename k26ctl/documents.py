"""The tag every JSON document k26ctl writes carries: `kind` (which document) and `schema_version`.

A reader (`k26ctl report`, a script) tells documents apart by the tag instead of by their shape, and
refuses one written by a newer k26ctl. Documents of the release before the tag have none; `report`
still reads those by their shape (k26ctl/report/kind.py). JSON Lines logs carry no tag per record:
their session file does.

Bump SCHEMA_VERSION when a kind's existing fields change meaning or go; new fields do not need it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SCHEMA_VERSION = 1

# kind -> what writes it
KINDS: dict[str, str] = {
    "smoke": "smoke --json",
    "deploy": "deploy --json",
    "rollback": "rollback --json",
    "status": "status --json",
    "validate": "validate --json, validate --remote --json",
    "render": "render --json",
    "bisect": "bisect-config --json (the search result)",
    "bisect-log": "bisect-config log --json",
    "bisect-reset": "bisect-config reset --json",
    "bisect-session": "the bisect-config session file",
    "sweep": "sweep --json, sweep log --json",
    "sweep-reset": "sweep reset --json",
    "sweep-session": "the sweep session file",
    "fleet-roll": "deploy FLEET.yaml --json, rollback FLEET.yaml --json",
    "fleet-check": "deploy FLEET.yaml --check --json",
    "fleet-status": "status FLEET.yaml --json",
    "fleet-run": "the local copy of a fleet's run record (run.json)",
    "patch-list": "patch list --json",
    "patch-states": "patch status/apply/revert --json",
    "patch-check": "patch check --json",
    "watch": "watch --json (one document a line)",
    "score": "score --json (one document a line)",
    "smoke-baseline": "smoke --record-baseline",
    "lab-host": "lab host up/status --json, and the lab host's state file",
    "lab-host-down": "lab host down --json",
    "lab-fleet": "lab fleet up --json, and the lab fleet's state file",
    "lab-fleet-demo": "lab demo --fleet --json",
    "lab-loop": "lab demo --gpu --record FILE",
    "doctor": "doctor --json, doctor --explain --json",
}


def tagged(kind: str, document: Mapping[str, Any]) -> dict[str, Any]:
    """`document` with its tag first (a tag already there is replaced)."""
    if kind not in KINDS:
        raise ValueError(f"unknown document kind {kind!r}: add it to k26ctl/documents.py KINDS")
    return {"kind": kind, "schema_version": SCHEMA_VERSION, **untagged(document)}


def untagged(document: Mapping[str, Any]) -> dict[str, Any]:
    """The document's own fields, without the tag (for a reader that hands a record on)."""
    return {k: v for k, v in document.items() if k not in ("kind", "schema_version")}


def tag_of(document: Any) -> tuple[str, int] | None:
    """(kind, schema_version) of a tagged document; None for an untagged one (or not an object)."""
    if not isinstance(document, dict):
        return None
    kind, version = document.get("kind"), document.get("schema_version")
    if not isinstance(kind, str) or isinstance(version, bool) or not isinstance(version, int):
        return None
    return kind, version
