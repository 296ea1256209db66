"""The pure text engine on small synthetic files: matching, counts, idempotence, exact reverts."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from k26ctl.errors import ConfigError, PatchError
from k26ctl.patches import State, apply_text, evaluate, load_patches, revert_text, select_patches
from k26ctl.patches.model import Patch, load_patch_file, parse_patch
from tests.support.tiers import examples

SOURCE = """class Backend:
    def __init__(self, runner):
        self.width = runner.args.width
        self.other = 1

    def verify(self, lens):
        mask_len = self.width * (
            lens + self.width
        )
        mask_len = self.width * (lens + self.width)
        return mask_len
"""


def make(**edit: object) -> Patch:
    data = {"name": "t", "summary": "s", "target": "a/b.py", "edits": [edit]}
    return parse_patch(data)


def insert_after(anchor: str, lines: str, count: int = 1) -> Patch:
    return make(anchor=anchor, insert_after=lines, count=count)


def test_insert_after_uses_the_anchor_indentation_and_reverts_exactly() -> None:
    patch = insert_after(
        "self.width = runner.args.width", "if runner.tree:\n    self.width = runner.budget + 1\n"
    )
    assert evaluate(patch, SOURCE).state is State.PENDING
    new = apply_text(patch, SOURCE)
    expected = [
        "        self.width = runner.args.width",
        "        if runner.tree:",
        "            self.width = runner.budget + 1",
    ]
    assert "\n".join(expected) + "\n" in new
    assert evaluate(patch, new).state is State.APPLIED
    assert apply_text(patch, new) == new
    assert revert_text(patch, new) == SOURCE
    assert revert_text(patch, SOURCE) == SOURCE  # nothing to revert


def test_multi_line_anchor_matches_only_the_whole_statement() -> None:
    """`mask_len = self.width * (` as a prefix is in two statements; as a whole line, in one."""
    three_lines = "mask_len = self.width * (\n    lens + self.width\n)\n"
    patch = insert_after(three_lines, "mask_len = mask_len  # checked")
    new = apply_text(patch, SOURCE)
    assert new.count("# checked") == 1
    assert new.index("# checked") < new.index("mask_len = self.width * (lens + self.width)")
    assert revert_text(patch, new) == SOURCE


def test_missing_anchor_and_wrong_count_are_refused_with_the_reason() -> None:
    missing = insert_after("self.width = runner.args.depth", "x = 1")
    evaluation = evaluate(missing, SOURCE)
    assert evaluation.state is State.REFUSED and "not found" in evaluation.message
    with pytest.raises(PatchError, match="not found"):
        apply_text(missing, SOURCE)

    twice = insert_after("return mask_len", "pass", count=2)
    with pytest.raises(PatchError, match="matches 1 times, expected 2"):
        apply_text(twice, SOURCE)
    doubled = SOURCE + "    def again(self):\n        return mask_len\n"
    assert apply_text(twice, doubled).count("pass") == 2
    once = insert_after("return mask_len", "pass")
    with pytest.raises(PatchError, match="matches 2 times, expected 1"):
        apply_text(once, doubled)


def test_half_applied_is_refused() -> None:
    patch = make(anchor="return mask_len", insert_before="pass", count=2)
    doubled = SOURCE + "    def again(self):\n        return mask_len\n"
    half = doubled.replace("        return mask_len\n", "        pass\n        return mask_len\n", 1)
    evaluation = evaluate(patch, half)
    assert evaluation.state is State.REFUSED and "half applied" in evaluation.message
    with pytest.raises(PatchError):
        revert_text(patch, half)


def test_insert_before_and_replace() -> None:
    before = make(anchor="self.other = 1", insert_before="# note")
    new = apply_text(before, SOURCE)
    assert "        # note\n        self.other = 1\n" in new and revert_text(before, new) == SOURCE

    replace = make(
        anchor="mask_len = self.width * (lens + self.width)", replace="mask_len = self.fixed(lens)"
    )
    new = apply_text(replace, SOURCE)
    assert "        mask_len = self.fixed(lens)\n" in new and "(lens + self.width)\n" not in new
    assert evaluate(replace, new).state is State.APPLIED
    assert apply_text(replace, new) == new and revert_text(replace, new) == SOURCE


def test_crlf_files_keep_their_line_endings() -> None:
    crlf = SOURCE.replace("\n", "\r\n")
    patch = insert_after("self.other = 1", "self.more = 2")
    new = apply_text(patch, crlf)
    assert "        self.more = 2\r\n" in new and "\n" not in new.replace("\r\n", "")
    assert revert_text(patch, new) == crlf


def test_anchor_on_a_last_line_without_newline_is_refused() -> None:
    patch = insert_after("return mask_len", "pass")
    with pytest.raises(PatchError, match="no newline"):
        apply_text(patch, SOURCE.rstrip("\n"))


def test_not_needed_marker() -> None:
    data = {
        "name": "t",
        "summary": "s",
        "target": "a/b.py",
        "not_needed": {"reason": "fixed upstream", "any_line": ["width = spec.width"]},
        "edits": [{"anchor": "self.width = runner.args.width", "insert_after": "x = 1"}],
    }
    patch = parse_patch(data)
    fixed = SOURCE.replace("self.width = runner.args.width", "width = spec.width")
    evaluation = evaluate(patch, fixed)
    assert evaluation.state is State.NOT_NEEDED and "fixed upstream" in evaluation.message
    assert evaluate(patch, SOURCE).state is State.PENDING
    # the marker as part of a longer line does not count
    assert (
        evaluate(patch, fixed.replace("width = spec.width", "width = spec.width or 1")).state is State.REFUSED
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"summary": "s", "target": "a.py", "edits": [{"anchor": "x", "insert_after": "y"}]}, "name"),
        (
            {
                "name": "t",
                "summary": "s",
                "target": "/abs.py",
                "edits": [{"anchor": "x", "insert_after": "y"}],
            },
            "target",
        ),
        (
            {
                "name": "t",
                "summary": "s",
                "target": "../a.py",
                "edits": [{"anchor": "x", "insert_after": "y"}],
            },
            "target",
        ),
        ({"name": "t", "summary": "s", "target": "a.py", "edits": []}, "edits"),
        ({"name": "t", "summary": "s", "target": "a.py", "edits": [{"anchor": "x"}]}, "exactly one"),
        (
            {
                "name": "t",
                "summary": "s",
                "target": "a.py",
                "edits": [{"anchor": "x", "insert_after": "y", "bad": 1}],
            },
            "bad",
        ),
        (
            {"name": "t", "summary": "s", "target": "a.py", "edits": [{"anchor": "x", "replace": "x\ny"}]},
            "own anchor",
        ),
        (
            {
                "name": "t",
                "summary": "s",
                "target": "a.py",
                "edits": [{"anchor": "x", "insert_after": "y", "count": 0}],
            },
            "count",
        ),
    ],
)
def test_bad_patch_definitions_are_config_errors(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        parse_patch(data, "p.yaml")
    assert info.value.exit_code == 78


def test_patch_file_name_must_match(tmp_path: Path) -> None:
    path = tmp_path / "other.yaml"
    path.write_text("name: t\nsummary: s\ntarget: a.py\nedits:\n  - anchor: x\n    insert_after: y\n")
    with pytest.raises(ConfigError, match="differs from the file name"):
        load_patch_file(path)


def test_shipped_set_loads_and_unknown_names_get_a_suggestion() -> None:
    shipped = load_patches()
    assert "triton-ddtree-verify-width" in shipped
    patch = shipped["triton-ddtree-verify-width"]
    assert patch.target == "srt/layers/attention/triton_backend.py"
    assert patch.versions == ("0.5.14", "0.5.15", "0.5.16")
    with pytest.raises(ConfigError, match="unknown patch") as info:
        select_patches(["triton-ddtree-verify-widht"])
    assert info.value.hint == "did you mean 'triton-ddtree-verify-width'?"


@settings(max_examples=examples(60))
@given(
    before=st.lists(st.sampled_from(["a = 1", "    b = 2", "", "# c", "anchor_x = 0"]), max_size=8),
    after=st.lists(st.sampled_from(["a = 1", "    b = 2", "", "# c"]), max_size=8),
    indent=st.sampled_from(["", "    ", "\t"]),
    eol=st.sampled_from(["\n", "\r\n"]),
)
def test_apply_then_revert_is_identity(before: list[str], after: list[str], indent: str, eol: str) -> None:
    patch = insert_after("anchor = 1", "if x:\n    anchor = 2\n\n# done")
    text = eol.join([*before, indent + "anchor = 1", *after]) + eol
    new = apply_text(patch, text)
    assert evaluate(patch, new).state is State.APPLIED
    assert apply_text(patch, new) == new
    assert revert_text(patch, new) == text
