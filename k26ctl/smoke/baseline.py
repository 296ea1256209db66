"""Greedy-output parity against a recorded baseline.

Speculative decoding is lossless: at temperature 0 it must reproduce the non-speculative output.
A baseline file stores the temperature-0 answers of a trusted server (for example the same model with
speculative decoding off) with that server's identity; a later run is compared prompt by prompt.
SGLang's CI demands every prompt to match; vLLM's accepts 66 %: the pass rule is a parameter.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

FORMAT = "k26ctl-smoke-baseline/1"


@dataclass(frozen=True)
class BaselineEntry:
    prompt_id: str
    text: str
    reasoning: str = ""
    max_tokens: int | None = None


@dataclass
class Baseline:
    identity: dict[str, Any]
    suite: str
    entries: dict[str, BaselineEntry]
    created: str = field(
        default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    )

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "created": self.created,
            "suite": self.suite,
            "identity": self.identity,
            "outputs": [asdict(e) for e in self.entries.values()],
        }

    def save(self, path: str | Path) -> None:
        from k26ctl.outputs import write_atomic
        from k26ctl.termsafe import json_text

        write_atomic(path, json_text(self.to_json(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Baseline:
        """A baseline file as `save` writes it: any damage is one error naming the file and the field."""
        from k26ctl import inputs, statefile

        source = Path(path)
        hint = "record it again with --record-baseline FILE"
        raw = inputs.read_bytes(source, what="baseline", max_bytes=inputs.MAX_DATA_BYTES, hint=hint)
        shape = statefile.parse_document(raw, _BaselineShape, what="baseline", where=source, hint=hint)
        entries = {
            o.prompt_id: BaselineEntry(o.prompt_id, o.text, o.reasoning, o.max_tokens) for o in shape.outputs
        }
        return cls(shape.identity, shape.suite, entries, shape.created)


class _EntryShape(BaseModel):
    model_config = ConfigDict(extra="ignore")

    prompt_id: str
    text: str
    reasoning: str = ""
    max_tokens: int | None = None


class _BaselineShape(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    format: Literal["k26ctl-smoke-baseline/1"]
    created: str
    suite: str = ""
    identity: dict[str, Any] = Field(default_factory=dict)
    outputs: list[_EntryShape]


def joined(text: str, reasoning: str = "") -> str:
    """The compared form of one answer: content, then the reasoning text if any."""
    return text + ("\n" + reasoning if reasoning else "")


def first_divergence(a: str, b: str) -> int | None:
    """Index of the first differing character, or None when the texts are equal."""
    if a == b:
        return None
    for i, (x, y) in enumerate(zip(a, b)):  # noqa: B905 - lengths differ on purpose
        if x != y:
            return i
    return min(len(a), len(b))


@dataclass(frozen=True)
class PromptParity:
    prompt_id: str
    match: bool
    first_divergence: int | None
    baseline_excerpt: str = ""
    current_excerpt: str = ""
    missing: bool = False


@dataclass(frozen=True)
class BaselineComparison:
    exact_match_rate: float
    min_exact_match: float
    prompts: list[PromptParity]
    baseline_identity: dict[str, Any]
    # prompts whose answer differs from the baseline but passed its checks and its self-consistency
    # probes: a near tie went the other way on this server (not counted when the server is deterministic)
    self_consistent: tuple[str, ...] = ()

    @property
    def accepted_rate(self) -> float:
        if not self.prompts:
            return 0.0
        matched = sum(p.match for p in self.prompts)
        return (matched + len(self.self_consistent)) / len(self.prompts)

    @property
    def passed(self) -> bool:
        return self.accepted_rate >= self.min_exact_match - 1e-9

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "exact_match_rate": round(self.exact_match_rate, 4),
            "self_consistent": list(self.self_consistent),
            "min_exact_match": self.min_exact_match,
            "baseline_identity": self.baseline_identity,
            "prompts": [asdict(p) for p in self.prompts],
        }


def _around(text: str, index: int, width: int = 24) -> str:
    return text[max(0, index - 8) : index + width]


def compare(baseline: Baseline, current: dict[str, str], min_exact_match: float = 1.0) -> BaselineComparison:
    """Compare temperature-0 outputs (prompt id -> text, content and reasoning joined) to a baseline.
    Prompts absent from the baseline are not counted; baseline prompts absent now count as misses."""
    results: list[PromptParity] = []
    for prompt_id, entry in baseline.entries.items():
        expected = joined(entry.text, entry.reasoning)
        got = current.get(prompt_id)
        if got is None:
            results.append(PromptParity(prompt_id, False, None, missing=True))
            continue
        where = first_divergence(expected, got)
        if where is None:
            results.append(PromptParity(prompt_id, True, None))
        else:
            results.append(
                PromptParity(prompt_id, False, where, _around(expected, where), _around(got, where))
            )
    rate = sum(p.match for p in results) / len(results) if results else 0.0
    return BaselineComparison(rate, min_exact_match, results, baseline.identity)
