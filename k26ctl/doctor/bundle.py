"""The doctor bundle: one JSON file with the facts of a host (secrets already removed), for a bug report.

It names the format and the k26ctl version that wrote it and carries the sha256 of its facts, so
`doctor --explain` reads only what this k26ctl wrote, unchanged: a bundle of another version, a
damaged file or a hand-edited one is one line and exit 78, never a half-judged host.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from k26ctl.doctor.facts import Facts
from k26ctl.errors import ConfigError

FORMAT = "k26ctl-doctor-bundle/1"
MAX_BYTES = 32 << 20
HINT = "run `k26ctl doctor PROFILE --bundle FILE` again with this k26ctl"


def digest(facts: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(facts, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def bundle_document(facts: Facts) -> dict[str, Any]:
    from k26ctl import __version__

    data = facts.model_dump(mode="json")
    return {
        "format": FORMAT,
        "k26ctl_version": __version__,
        "written": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "sha256": digest(data),
        "facts": data,
    }


def write_bundle(path: str | Path, facts: Facts) -> None:
    from k26ctl.outputs import write_atomic

    write_atomic(path, json.dumps(bundle_document(facts), indent=1, sort_keys=True) + "\n")


def read_bundle(path: str | Path) -> Facts:
    from k26ctl import __version__, inputs, jsonsafe
    from k26ctl.statefile import field_problem
    from k26ctl.termsafe import clean

    where = clean(str(path), limit=200)
    written = "give a file that `k26ctl doctor PROFILE --bundle FILE` wrote"
    raw = inputs.read_bytes(path, what="doctor bundle", max_bytes=MAX_BYTES, hint=written)
    try:
        doc = jsonsafe.loads(raw)
    except ValueError as exc:
        raise ConfigError(
            f"doctor bundle {where}: not readable JSON ({clean(str(exc), limit=120)})", HINT
        ) from None
    if not isinstance(doc, dict) or "facts" not in doc:
        raise ConfigError(f"doctor bundle {where}: not a doctor bundle (no facts)", HINT)
    if doc.get("format") != FORMAT:
        shown = clean(str(doc.get("format")), limit=60)
        raise ConfigError(f"doctor bundle {where}: format {shown}, this k26ctl reads {FORMAT}", HINT)
    version = doc.get("k26ctl_version")
    if version != __version__:
        shown = clean(str(version), limit=40)
        raise ConfigError(
            f"doctor bundle {where}: written by k26ctl {shown}, this is {__version__}",
            f"read it with k26ctl {shown}, or {HINT[0].lower()}{HINT[1:]}",
        )
    facts = doc.get("facts")
    if not isinstance(facts, dict) or doc.get("sha256") != digest(facts):
        raise ConfigError(
            f"doctor bundle {where}: its facts do not match its sha256 (damaged or edited by hand)", HINT
        )
    try:
        return Facts.model_validate(facts)
    except ValidationError as exc:
        name, reason = field_problem(exc)
        raise ConfigError(f"doctor bundle {where}: {name}: {reason}", HINT) from None
