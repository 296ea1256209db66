"""Scoring a text: every detector of the registry, with thresholds chosen by the prompt's kind.

Each detector returns zero or more `Finding`s with a score, the threshold it was compared with, and
the offending span, so a report can show *what* is wrong and *where*. `score_text` runs the rows of
`registry.DETECTORS` on the part of the text each reads and decides whether the text is degenerate.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from k26ctl.smoke.detectors.registry import BY_NAME, DETECTORS, FAMILY_OF_FINDING, Detector
from k26ctl.smoke.finding import Finding
from k26ctl.smoke.kinds import KindProfile, profile_for
from k26ctl.smoke.markup import preload as preload_word_lists


@dataclass(frozen=True)
class TextVerdict:
    degenerate: bool
    findings: list[Finding] = field(default_factory=list)
    kind: str = "prose"

    @property
    def reasons(self) -> list[str]:
        return [f.reason() for f in self.findings if f.severity == "fail"]

    def to_json(self) -> dict[str, Any]:
        return {
            "degenerate": self.degenerate,
            "kind": self.kind,
            "reasons": self.reasons,
            "findings": [_with_family(f.to_json()) for f in self.findings],
        }


def _with_family(finding: dict[str, Any]) -> dict[str, Any]:
    """A finding's JSON with the family of the detector that gave it (from the registry)."""
    finding["family"] = FAMILY_OF_FINDING.get(finding["detector"], "scoring")
    return finding


# Degeneration shows at the end of a text; analysing more than this tail only costs time (a server that
# ignores max_tokens can send megabytes). Cheap regex checks cover much more: the whole text up to
# twice MAX_SCANNED_EDGE characters (far past any answer within max_tokens), beyond that its head and
# its tail, this many characters of each (a 4 MiB answer took 0.5 s of CPU when they read all of it).
MAX_ANALYSED_CHARS = 24_000
MAX_SCANNED_EDGE = 128_000
_SEAM = "\n\n"  # between the head and the tail of a long text


def _scanned(text: str) -> str:
    """What the cheap whole-text checks read: the text, or its head and tail joined by _SEAM."""
    if len(text) <= 2 * MAX_SCANNED_EDGE:
        return text
    return text[:MAX_SCANNED_EDGE] + _SEAM + text[-MAX_SCANNED_EDGE:]


def _spans_in_text(findings: list[Finding], scanned: str, text: str) -> list[Finding]:
    """Findings on `_scanned(text)`, their spans moved to where they are in `text`."""
    if scanned is text or not findings:
        return findings
    tail_at = MAX_SCANNED_EDGE + len(_SEAM)
    shift = len(text) - MAX_SCANNED_EDGE - tail_at

    def at(i: int) -> int:
        return i if i <= MAX_SCANNED_EDGE else max(i, tail_at) + shift

    return [dataclasses.replace(f, span=(at(f.span[0]), at(f.span[1]))) for f in findings]


def preload() -> None:
    """Read the word lists and imports that `score_text` would otherwise read on first use (about
    0.5 s). A process that forks scoring workers calls it first: the workers share what it read
    (copy-on-write) instead of each paying for it again."""
    preload_word_lists()


def _long_text_note(length: int) -> str:
    note = f"{length} characters: only the last {MAX_ANALYSED_CHARS} were analysed"
    if length > 2 * MAX_SCANNED_EDGE:
        note += f", and the first and last {MAX_SCANNED_EDGE} checked for tokens and control characters"
    return note


PROMPT_ECHO_CHARS = 20_000  # the prompt is looked for at the start of the answer


@dataclass(frozen=True)
class _Inputs:
    text: str
    view: str  # the analysis window: the last MAX_ANALYSED_CHARS characters
    offset: int  # where the view starts in the text
    scanned: str
    profile: KindProfile
    prompt: str | None
    finish_reason: str | None


def _run(row: Detector, given: _Inputs, thresholds: Mapping[str, float] | None = None) -> list[Finding]:
    """One row of the registry on the part of the text it reads, its spans placed in the whole text."""
    if row.reads == "view":
        piece = given.view
    elif row.reads == "scanned":
        piece = given.scanned
    else:
        piece = given.text if row.reads == "text" else given.text[:PROMPT_ECHO_CHARS]
    args = [getattr(given, name) for name in row.inputs]
    found = row.function(piece, *args, **(row.thresholds if thresholds is None else thresholds))
    if row.reads == "view" and given.offset and found:
        shift = given.offset
        return [dataclasses.replace(f, span=(f.span[0] + shift, f.span[1] + shift)) for f in found]
    if row.reads == "scanned":
        return _spans_in_text(found, given.scanned, given.text)
    return found


def _inputs(text: str, prompt: str | None, kind: str | None, finish_reason: str | None) -> _Inputs:
    offset = max(0, len(text) - MAX_ANALYSED_CHARS)
    view = text[offset:]
    return _Inputs(text, view, offset, _scanned(text), profile_for(view, kind), prompt, finish_reason)


def run_detector(
    name: str,
    text: str,
    prompt: str | None = None,
    kind: str | None = None,
    finish_reason: str | None = None,
    thresholds: Mapping[str, float] | None = None,
) -> list[Finding]:
    """The findings of one detector of the registry, given what `score_text` would give it (and other
    thresholds, when named: the cross-validation tries candidates this way)."""
    return _run(BY_NAME[name], _inputs(text, prompt, kind, finish_reason), thresholds)


def score_text(
    text: str, prompt: str | None = None, kind: str | None = None, finish_reason: str | None = None
) -> TextVerdict:
    """Run every detector of the registry with thresholds for the prompt's kind; degenerate if any
    finding fails."""
    given = _inputs(text, prompt, kind, finish_reason)
    findings: list[Finding] = []
    gated = False
    for row in DETECTORS:
        if gated and row.reads != "scanned":
            continue  # nothing visible: the checks of the answer's words have nothing to read
        found = _run(row, given)
        gated = gated or (row.gate and bool(found))
        findings += found
    if given.offset:
        findings.append(
            Finding(
                "long_text",
                float(len(text)),
                float(MAX_ANALYSED_CHARS),
                (0, given.offset),
                "",
                _long_text_note(len(text)),
                severity="warn",
            )
        )
    degenerate = any(f.severity == "fail" for f in findings)
    return TextVerdict(degenerate=degenerate, findings=findings, kind=given.profile.name)
