"""Greedy-output parity against a recorded baseline.

Speculative decoding is lossless: at temperature 0 it must reproduce the non-speculative output.
A baseline file stores the temperature-0 answers of a trusted server (for example the same model with
speculative decoding off) with that server's identity; a later run is compared prompt by prompt.
SGLang's CI demands every prompt to match; vLLM's accepts 66 %: the pass rule is a parameter.

A baseline recorded from token ids also keeps, for every output token, the baseline's top-1 minus
top-2 log-probability (SGLang's `return_logprob` with `top_logprobs_num` 2). Where a later answer first
differs from the baseline by token, that margin tells a near tie (two tokens almost equally likely:
other kernels may round either way, as GPUs do) from a clear choice (a break). A divergence at a near
tie is tolerated and reported; one at a clear choice fails.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

FORMAT = "k26ctl-smoke-baseline/1"
# A first differing token whose baseline top-2 log-probabilities lie within this many nats is a near tie.
NEAR_TIE_MARGIN = 0.25


@dataclass(frozen=True)
class BaselineEntry:
    prompt_id: str
    text: str
    reasoning: str = ""
    max_tokens: int | None = None
    output_ids: list[int] | None = None  # the raw output tokens (recorded from token ids)
    margins: list[float | None] | None = None  # top-1 minus top-2 log-probability of each of them


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
        from k26ctl.documents import tagged
        from k26ctl.outputs import write_atomic
        from k26ctl.termsafe import json_text

        write_atomic(path, json_text(tagged("smoke-baseline", self.to_json()), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Baseline:
        """A baseline file as `save` writes it: any damage is one error naming the file and the field."""
        from k26ctl import inputs, statefile

        source = Path(path)
        hint = "record it again with --record-baseline FILE"
        raw = inputs.read_bytes(source, what="baseline", max_bytes=inputs.MAX_DATA_BYTES, hint=hint)
        shape = statefile.parse_document(raw, _BaselineShape, what="baseline", where=source, hint=hint)
        entries = {
            o.prompt_id: BaselineEntry(
                o.prompt_id, o.text, o.reasoning, o.max_tokens, o.output_ids, o.margins
            )
            for o in shape.outputs
        }
        return cls(shape.identity, shape.suite, entries, shape.created)


class _EntryShape(BaseModel):
    model_config = ConfigDict(extra="ignore")

    prompt_id: str
    text: str
    reasoning: str = ""
    max_tokens: int | None = None
    output_ids: list[int] | None = None  # recorded by token ids
    margins: list[float | None] | None = None  # each token's top-2 log-probability margin


class _BaselineShape(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    format: Literal["k26ctl-smoke-baseline/1"]
    created: str
    suite: str = ""
    identity: dict[str, Any] = Field(default_factory=dict)
    outputs: list[_EntryShape]


def first_token_divergence(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):  # noqa: B905 - lengths differ on purpose
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


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
    first_token: int | None = None  # first differing output token (both answers by token ids)
    baseline_margin: float | None = None  # the baseline's top-1 minus top-2 log-probability there
    near_tie: bool = False  # that margin is within the near-tie margin: tolerated


@dataclass(frozen=True)
class BaselineComparison:
    exact_match_rate: float
    min_exact_match: float
    prompts: list[PromptParity]
    baseline_identity: dict[str, Any]
    # prompts whose answer differs from the baseline but passed its checks and its self-consistency
    # probes: a near tie went the other way on this server (not counted when the server is deterministic)
    self_consistent: tuple[str, ...] = ()
    near_tie_margin: float = NEAR_TIE_MARGIN

    @property
    def near_ties(self) -> tuple[str, ...]:
        """Prompts whose first differing token was a near tie in the baseline: tolerated."""
        return tuple(p.prompt_id for p in self.prompts if p.near_tie)

    @property
    def accepted_rate(self) -> float:
        if not self.prompts:
            return 0.0
        matched = sum(p.match for p in self.prompts)
        tolerated = set(self.self_consistent) | set(self.near_ties)
        return (matched + len(tolerated)) / len(self.prompts)

    @property
    def passed(self) -> bool:
        return self.accepted_rate >= self.min_exact_match - 1e-9

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "exact_match_rate": round(self.exact_match_rate, 4),
            "self_consistent": list(self.self_consistent),
            "near_ties": list(self.near_ties),
            "near_tie_margin": self.near_tie_margin,
            "min_exact_match": self.min_exact_match,
            "baseline_identity": self.baseline_identity,
            "prompts": [asdict(p) for p in self.prompts],
        }


def _around(text: str, index: int, width: int = 24) -> str:
    return text[max(0, index - 8) : index + width]


def compare(
    baseline: Baseline,
    current: dict[str, str],
    min_exact_match: float = 1.0,
    current_ids: dict[str, list[int]] | None = None,
    near_tie_margin: float = NEAR_TIE_MARGIN,
) -> BaselineComparison:
    """Compare temperature-0 outputs (prompt id -> text, content and reasoning joined) to a baseline.
    Prompts absent from the baseline are not counted; baseline prompts absent now count as misses.
    With `current_ids` (prompt id -> output token ids) and a baseline that kept its margins, the first
    differing token is found and judged a near tie or a clear choice."""
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
            token, margin = _token_divergence(entry, (current_ids or {}).get(prompt_id))
            results.append(
                PromptParity(
                    prompt_id,
                    False,
                    where,
                    _around(expected, where),
                    _around(got, where),
                    first_token=token,
                    baseline_margin=margin,
                    near_tie=margin is not None and margin <= near_tie_margin,
                )
            )
    rate = sum(p.match for p in results) / len(results) if results else 0.0
    return BaselineComparison(
        rate, min_exact_match, results, baseline.identity, near_tie_margin=near_tie_margin
    )


def _token_divergence(entry: BaselineEntry, ids: list[int] | None) -> tuple[int | None, float | None]:
    """(first differing token, the baseline's top-2 margin there) where both sides have token ids."""
    if ids is None or entry.output_ids is None:
        return None, None
    where = first_token_divergence(entry.output_ids, ids)
    if where is None or entry.margins is None or where >= len(entry.output_ids) or where >= len(ids):
        return where, None  # equal tokens, or one answer simply stopped earlier: no choice to judge
    return where, entry.margins[where] if where < len(entry.margins) else None
