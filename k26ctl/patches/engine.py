"""The pure text engine: evaluate, apply and revert one patch on the text of its target file.

No I/O here. A patch is "applied" when every edit's post-image is present the expected number of
times and no bare anchor is left, "pending" when every anchor is bare exactly `count` times,
"not-needed" when the release already carries one of the patch's not-needed lines, and "refused"
otherwise (anchor missing, wrong count, half applied). Apply and revert compute the whole new text
or raise: the caller never sees a partial result.
"""

from __future__ import annotations

import difflib
import enum
from dataclasses import dataclass

from k26ctl.errors import PatchError
from k26ctl.patches.model import Edit, Patch


class State(str, enum.Enum):
    APPLIED = "applied"
    PENDING = "pending"
    NOT_NEEDED = "not-needed"
    REFUSED = "refused"


@dataclass(frozen=True)
class _Match:
    start: int  # index of the first line the edit owns in the current text
    end: int  # one past the last line
    applied: bool
    indent: str
    eol: str


@dataclass(frozen=True)
class EditCheck:
    index: int
    edit: Edit
    bare: int  # anchors found without the edit's lines
    applied: int  # post-images found

    @property
    def expected(self) -> int:
        return self.edit.count

    @property
    def state(self) -> State:
        if self.applied == self.expected and self.bare == 0:
            return State.APPLIED
        if self.bare == self.expected and self.applied == 0:
            return State.PENDING
        return State.REFUSED

    def problem(self) -> str:
        where = f"edit {self.index + 1} anchor {self.edit.preview()}"
        if self.bare == 0 and self.applied == 0:
            return f"{where} not found"
        if self.applied and self.bare:
            return f"{where} is half applied ({self.applied} patched, {self.bare} not)"
        found = self.bare + self.applied
        return f"{where} matches {found} times, expected {self.expected}"


@dataclass(frozen=True)
class Evaluation:
    patch: Patch
    state: State
    message: str
    checks: tuple[EditCheck, ...]


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _bare(line: str) -> str:
    return line.rstrip("\r\n")


def _indent(line: str) -> str:
    body = _bare(line)
    return body[: len(body) - len(body.lstrip())]


def _eol(line: str) -> str:
    if line.endswith("\r\n"):
        return "\r\n"
    return "\n"


def _render(lines: tuple[str, ...], indent: str, eol: str) -> list[str]:
    return [(indent + line if line.strip() else "") + eol for line in lines]


def _matches_stripped(text_lines: list[str], at: int, seq: tuple[str, ...]) -> bool:
    if at < 0 or at + len(seq) > len(text_lines):
        return False
    return all(text_lines[at + k].strip() == seq[k].strip() for k in range(len(seq)))


def _matches_exact(text_lines: list[str], at: int, rendered: list[str]) -> bool:
    if at < 0 or at + len(rendered) > len(text_lines):
        return False
    return all(_bare(text_lines[at + k]) == _bare(rendered[k]) for k in range(len(rendered)))


def _find(edit: Edit, text_lines: list[str]) -> list[_Match]:
    """Every non-overlapping place the edit's anchor (pre-image) or its result (post-image) sits."""
    found: list[_Match] = []
    n = len(edit.anchor)
    m = len(edit.lines)
    i = 0
    if edit.op == "replace":
        while i < len(text_lines):
            for seq, applied in ((edit.anchor, False), (edit.lines, True)):
                if seq and _matches_stripped(text_lines, i, seq):
                    own = _indent(text_lines[i])
                    indent = own[: max(0, len(own) - len(_indent(seq[0])))]
                    found.append(_Match(i, i + len(seq), applied, indent, _eol(text_lines[i])))
                    i += len(seq)
                    break
            else:
                i += 1
        return found
    while i < len(text_lines):
        if not _matches_stripped(text_lines, i, edit.anchor):
            i += 1
            continue
        indent, eol = _indent(text_lines[i]), _eol(text_lines[i])
        rendered = _render(edit.lines, indent, eol)
        if edit.op == "insert_after":
            applied = _matches_exact(text_lines, i + n, rendered)
            found.append(_Match(i, i + n + (m if applied else 0), applied, indent, eol))
        else:
            applied = _matches_exact(text_lines, i - m, rendered)
            found.append(_Match(i - (m if applied else 0), i + n, applied, indent, eol))
        i = found[-1].end
    return found


def _check(index: int, edit: Edit, text_lines: list[str]) -> tuple[EditCheck, list[_Match]]:
    matches = _find(edit, text_lines)
    applied = sum(1 for x in matches if x.applied)
    return EditCheck(index, edit, bare=len(matches) - applied, applied=applied), matches


def _not_needed_line(patch: Patch, text_lines: list[str]) -> str | None:
    if patch.not_needed is None:
        return None
    wanted = set(patch.not_needed.any_line)
    for line in text_lines:
        if line.strip() in wanted:
            return line.strip()
    return None


def evaluate(patch: Patch, text: str) -> Evaluation:
    """Classify the text of the patch's target file; never raises."""
    text_lines = _lines(text)
    checks = tuple(_check(i, e, text_lines)[0] for i, e in enumerate(patch.edits))
    states = {c.state for c in checks}
    if states == {State.APPLIED}:
        return Evaluation(patch, State.APPLIED, "already applied", checks)
    marker = _not_needed_line(patch, text_lines)
    if marker is not None and State.APPLIED not in states:
        reason = patch.not_needed.reason if patch.not_needed else ""
        return Evaluation(patch, State.NOT_NEEDED, f"not needed: {reason} (found `{marker}`)", checks)
    if states == {State.PENDING}:
        edits = len(checks)
        return Evaluation(patch, State.PENDING, f"would apply {edits} edit{'s' * (edits != 1)}", checks)
    if states == {State.APPLIED, State.PENDING}:
        done = ", ".join(str(c.index + 1) for c in checks if c.state is State.APPLIED)
        return Evaluation(
            patch, State.REFUSED, f"half applied: edit(s) {done} present, the others not", checks
        )
    problems = "; ".join(c.problem() for c in checks if c.state is State.REFUSED)
    return Evaluation(patch, State.REFUSED, problems, checks)


def _refuse(patch: Patch, evaluation: Evaluation, doing: str) -> PatchError:
    return PatchError(
        f"patch {patch.name}: cannot {doing} {patch.target}: {evaluation.message}",
        "the target differs from the release this patch was written for; "
        "run `k26ctl patch check --source DIR` on a copy, or update templates/patches/"
        f"{patch.name}.yaml",
    )


def _rewrite(edit: Edit, text_lines: list[str], matches: list[_Match], to_applied: bool) -> list[str]:
    out: list[str] = []
    pos = 0
    for match in matches:
        out.extend(text_lines[pos : match.start])
        if edit.op == "replace":
            seq = edit.lines if to_applied else edit.anchor
            out.extend(_render(seq, match.indent, match.eol))
        else:
            rendered = _render(edit.lines, match.indent, match.eol)
            owned = text_lines[match.start : match.end]
            if match.applied:
                owned = owned[len(rendered) :] if edit.op == "insert_before" else owned[: -len(rendered)]
            if to_applied:
                owned = rendered + owned if edit.op == "insert_before" else owned + rendered
            out.extend(owned)
        pos = match.end
    out.extend(text_lines[pos:])
    return out


def _anchor_ends_file(edit: Edit, text_lines: list[str]) -> bool:
    """An insert_after anchor on a last line without a newline cannot take lines after it."""
    return (
        edit.op == "insert_after"
        and bool(text_lines)
        and not text_lines[-1].endswith("\n")
        and _matches_stripped(text_lines, len(text_lines) - len(edit.anchor), edit.anchor)
    )


def apply_text(patch: Patch, text: str) -> str:
    """The patched text; the input unchanged when already applied; PatchError otherwise."""
    evaluation = evaluate(patch, text)
    if evaluation.state is State.APPLIED:
        return text
    if evaluation.state is not State.PENDING:
        raise _refuse(patch, evaluation, "apply to")
    text_lines = _lines(text)
    for edit in patch.edits:
        if edit.op == "replace":
            for match in _find(edit, text_lines):
                original = text_lines[match.start : match.end]
                if [_bare(x) for x in _render(edit.anchor, match.indent, match.eol)] != [
                    _bare(x) for x in original
                ]:
                    raise PatchError(
                        f"patch {patch.name}: anchor {edit.preview()} in {patch.target} is indented "
                        "differently from the patch, so a revert could not restore it exactly",
                        f"copy the anchor's indentation into templates/patches/{patch.name}.yaml",
                    )
        if _anchor_ends_file(edit, text_lines):
            raise PatchError(
                f"patch {patch.name}: anchor {edit.preview()} is the last line of {patch.target} "
                "and has no newline",
                "add a newline at the end of the file",
            )
        text_lines = _rewrite(edit, text_lines, _find(edit, text_lines), to_applied=True)
    new_text = "".join(text_lines)
    after = evaluate(patch, new_text)
    if after.state is not State.APPLIED:  # an edit's lines disturbed another edit's anchor
        raise PatchError(f"patch {patch.name}: edits overlap ({after.message})", "fix the patch definition")
    return new_text


def revert_text(patch: Patch, text: str) -> str:
    """The text with the patch's edits taken out; PatchError unless the patch is fully applied."""
    evaluation = evaluate(patch, text)
    if evaluation.state is not State.APPLIED:
        if evaluation.state in (State.PENDING, State.NOT_NEEDED):
            return text
        raise _refuse(patch, evaluation, "revert in")
    text_lines = _lines(text)
    for edit in reversed(patch.edits):
        text_lines = _rewrite(edit, text_lines, _find(edit, text_lines), to_applied=False)
    return "".join(text_lines)


def unified_diff(old: str, new: str, path: str) -> str:
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}"
        )
    )
