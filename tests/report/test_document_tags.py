"""Every JSON document carries its kind and schema version; `report` reads the tag, and still reads
the untagged documents of the release before it (tests/report/data holds those)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from k26ctl.cli.common import print_json
from k26ctl.documents import KINDS, SCHEMA_VERSION, tag_of, tagged
from k26ctl.errors import ConfigError
from k26ctl.report.kind import kind_of
from tests.report.hostile import fixture
from tests.support.cli import run_here

UNTAGGED = {
    "deploy-unpatched.json": ("deploy", "deploy"),
    "smoke-patched.json": ("smoke", "smoke"),
    "bisect.json": ("bisect", "bisect"),
    "bisect-log.json": ("bisect-log", "bisect-log"),
    "sweep.json": ("sweep", "sweep"),
    "fleet-halted-bad-roll.json": ("fleet-roll", "fleet-roll"),
}
PROFILE = Path(__file__).resolve().parents[2] / "profiles" / "lab" / "ddtree-b16.yaml"


@pytest.mark.parametrize(("name", "kinds"), sorted(UNTAGGED.items()))
def test_the_tag_decides_and_untagged_documents_still_read(name: str, kinds: tuple[str, str]) -> None:
    kind, view = kinds
    old = fixture(name)
    assert tag_of(old) is None and kind_of(old) == view
    new = tagged(kind, old)
    assert tag_of(new) == (kind, SCHEMA_VERSION) and kind_of(new) == view


def test_a_rollback_document_is_drawn_as_a_deploy() -> None:
    assert kind_of(tagged("rollback", fixture("deploy-unpatched.json"))) == "deploy"


def test_the_tag_wins_over_the_shape() -> None:
    # a smoke-shaped document that says it is a validate result is not drawn as a smoke page
    with pytest.raises(ConfigError, match="a validate document: report draws no page for it"):
        kind_of(tagged("validate", fixture("smoke-patched.json")))


def test_a_newer_schema_is_refused() -> None:
    newer = {**tagged("smoke", fixture("smoke-patched.json")), "schema_version": SCHEMA_VERSION + 1}
    with pytest.raises(ConfigError, match="schema version 2"):
        kind_of(newer)


def test_an_unknown_kind_cannot_be_tagged_and_print_json_wants_a_tag() -> None:
    with pytest.raises(ValueError, match="unknown document kind"):
        tagged("nonsense", {})
    with pytest.raises(ValueError, match="without its kind"):
        print_json({"untagged": True})
    assert "smoke" in KINDS and "bisect-session" in KINDS


@pytest.mark.parametrize(
    ("argv", "kind"),
    [
        (["render", str(PROFILE), "--format", "json"], "render"),
        (["validate", str(PROFILE), "--json"], "validate"),
        (["patch", "list", "--json"], "patch-list"),
    ],
)
def test_commands_tag_their_documents(argv: list[str], kind: str) -> None:
    done = run_here(*argv)
    assert done.returncode == 0, done.stderr
    assert tag_of(json.loads(done.stdout)) == (kind, SCHEMA_VERSION)
