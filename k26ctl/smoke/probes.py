"""Greedy self-consistency probes: the server re-checks its own temperature-0 answers.

At temperature 0 a lossless speculative server emits, at every position, the target model's argmax
given the text before it. The first token of any request comes from the plain prefill pass, which no
speculative verify step or tree mask touches. So for position k of an answer, one greedy token
after `prompt_ids + output_ids[:k]` must equal `output_ids[k]`; a verify bug (mask width, stale KV
rows, a wrong accept index) breaks exactly this, often long before the text looks wrong.

The prefix cache must be flushed first: it keeps the KV the answers' own verify passes wrote, and a
probe served from it can agree with a corrupted answer. A refused flush (the server is busy) is
reported and weakens the verdict; it is never passed over in silence.

API: `run_probes(client, answers, concurrency, n_positions) -> ProbeReport`, with `ProbeAnswer`
naming what to check and `PassRule` deciding. See `PassRule` for how the tolerance was set.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

# Early verify steps: with accept lengths of 4-8 tokens per step, 32 positions cover the first 4-8
# steps, where a verify bug shows first (probes.md: first mismatches at positions 1-3).
DEFAULT_POSITIONS = 32
# Probes of one answer are sent as batched /generate requests of at most this many inputs.
_CHUNK = 32
# How long the server may take to become idle before it refuses the flush.
FLUSH_TIMEOUT_S = 10.0
# Mismatches decoded to text per answer (two /v1/detokenize calls each), for the report's token strip;
# the rest are listed by position and token id.
DECODED_PER_ANSWER = 4


class ProbeClient(Protocol):
    """What the probes need from a client (SGLangClient provides it)."""

    def flush_cache(self, timeout: float = 0.0) -> tuple[bool, str]: ...

    def next_tokens(self, prefixes: list[list[int]]) -> list[int]: ...

    def detokenize(self, ids: list[int]) -> str: ...


@dataclass(frozen=True)
class ProbeAnswer:
    """One temperature-0 answer: the prompt ids the server used and the ids it produced.

    `extra_positions` are probed besides the first N (e.g. where two repeats of a request diverged)."""

    prompt_id: str
    prompt_ids: list[int]
    output_ids: list[int]
    attempt: int = 0
    extra_positions: tuple[int, ...] = ()

    def positions(self, n_positions: int) -> list[int]:
        wanted = set(range(min(n_positions, len(self.output_ids))))
        wanted |= {p for p in self.extra_positions if 0 <= p < len(self.output_ids)}
        return sorted(wanted)


@dataclass(frozen=True)
class Mismatch:
    prompt_id: str
    attempt: int
    position: int
    expected_id: int
    got_id: int
    expected: str = ""
    got: str = ""


@dataclass(frozen=True)
class PassRule:
    """When probe mismatches mean a verify bug rather than near-tie numerics.

    A healthy server on GPUs can flip an argmax where the top two logits nearly tie, because the batch
    shape changes the kernels' rounding: in the answer, or in the probe itself. Such flips are rare and
    isolated (each costs one mismatch, since later positions are checked against the flipped text). A
    verify bug corrupts a share of every verify step: many mismatches, from the first steps on.

    The rule fails a run when one answer has more than `max_per_answer` mismatches in its probed
    positions, or when more than `max_share` of all probes mismatch (a bug spread thinly over many
    answers; never fewer mismatches than one answer may have). How it was set, with the lab's near-tie
    switch (benchmarks/probe_calibration.py; figures in benchmarks/README.md, "Self-consistency probes"):
    over 60 healthy lab runs (NONE, budget 7, patched budget 16) with about 0.3 % of greedy tokens
    flipping per pass, one answer never showed more than 3 mismatches and no run more than 1.75 % (a
    first version allowing 2 per answer failed one of them); every broken lab variant had an answer
    far above 3, from token 1 or 2 on.
    """

    max_per_answer: int = 3
    max_share: float = 0.02

    def answer_fails(self, mismatches: int) -> bool:
        return mismatches > self.max_per_answer

    def share_fails(self, mismatches: int, checked: int) -> bool:
        """More than `max_share` of the probes mismatch (and more than one answer may show anyway)."""
        return mismatches > max(self.max_per_answer, self.max_share * checked)

    def describe(self) -> str:
        return f"at most {self.max_per_answer} per answer and {self.max_share:.0%} overall"


@dataclass
class AnswerProbes:
    prompt_id: str
    attempt: int
    checked: int
    mismatches: list[Mismatch] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.prompt_id + (f"#{self.attempt + 1}" if self.attempt else "")


@dataclass
class ProbeReport:
    supported: bool
    flushed: bool
    answers: list[AnswerProbes] = field(default_factory=list)
    rule: PassRule = field(default_factory=PassRule)
    n_positions: int = DEFAULT_POSITIONS
    note: str | None = None  # why the probes did not run, or the server's refusal of the flush
    elapsed: float = 0.0

    @property
    def checked(self) -> int:
        return sum(a.checked for a in self.answers)

    @property
    def mismatches(self) -> list[Mismatch]:
        return [m for a in self.answers for m in a.mismatches]

    @property
    def first_mismatch(self) -> Mismatch | None:
        found = self.mismatches
        return min(found, key=lambda m: m.position) if found else None

    def failing_answers(self) -> list[AnswerProbes]:
        return [a for a in self.answers if self.rule.answer_fails(len(a.mismatches))]

    def answer_clean(self, prompt_id: str, attempt: int) -> bool | None:
        """Whether that answer passed its probes (None: it was not probed)."""
        for a in self.answers:
            if a.prompt_id == prompt_id and a.attempt == attempt:
                return not self.rule.answer_fails(len(a.mismatches))
        return None

    @property
    def passed(self) -> bool:
        """No verify bug seen. A pass without a flush is weaker (see `weak`), never a silent pass."""
        count = len(self.mismatches)
        return not self.failing_answers() and not self.rule.share_fails(count, self.checked)

    @property
    def weak(self) -> bool:
        return self.supported and not self.flushed

    @property
    def verdict(self) -> str:
        if not self.supported:
            return "skipped"
        if not self.passed:
            return "fail"
        return "weak-pass" if self.weak else "pass"

    def summary(self) -> str:
        if not self.supported:
            return f"probes skipped: {self.note}"
        text = f"probes {self.verdict}: {len(self.mismatches)}/{self.checked} mismatches"
        first = self.first_mismatch
        if first is not None:
            text += (
                f", first in {first.prompt_id} at token {first.position}: "
                f"expected {first.expected!r} got {first.got!r}"
            )
        if not self.flushed:
            text += "; prefix cache NOT flushed, so probes may have reused KV the answers wrote"
        return text

    def to_json(self) -> dict[str, Any]:
        first = self.first_mismatch
        return {
            "checked": self.checked,
            "mismatches": len(self.mismatches),
            "flushed": self.flushed,
            "first_mismatch": (
                {
                    "prompt_id": first.prompt_id,
                    "position": first.position,
                    "expected": first.expected,
                    "got": first.got,
                }
                if first
                else None
            ),
            "supported": self.supported,
            "verdict": self.verdict,
            "positions": self.n_positions,
            "rule": {"max_per_answer": self.rule.max_per_answer, "max_share": self.rule.max_share},
            "note": self.note,
            "elapsed_s": round(self.elapsed, 3),
            "answers": [
                {
                    "prompt_id": a.prompt_id,
                    "attempt": a.attempt,
                    "checked": a.checked,
                    "mismatch_positions": [m.position for m in a.mismatches],
                    "mismatch_tokens": [
                        {
                            "position": m.position,
                            "expected_id": m.expected_id,
                            "got_id": m.got_id,
                            **({"expected": m.expected, "got": m.got} if m.expected or m.got else {}),
                        }
                        for m in a.mismatches
                    ],
                }
                for a in self.answers
            ],
        }


def skipped(note: str, n_positions: int = DEFAULT_POSITIONS) -> ProbeReport:
    return ProbeReport(supported=False, flushed=False, n_positions=n_positions, note=note)


def _decode(client: ProbeClient, token: int) -> str:
    try:
        return client.detokenize([token])
    except Exception:  # the text is for the reader only; the ids decided the verdict
        return f"<token {token}>"


def _decoded(client: ProbeClient, m: Mismatch) -> Mismatch:
    expected, got = _decode(client, m.expected_id), _decode(client, m.got_id)
    return Mismatch(m.prompt_id, m.attempt, m.position, m.expected_id, m.got_id, expected, got)


def run_probes(
    client: ProbeClient,
    answers: Iterable[ProbeAnswer],
    concurrency: int,
    n_positions: int = DEFAULT_POSITIONS,
    rule: PassRule | None = None,
    flush: bool = True,
    flush_timeout: float = FLUSH_TIMEOUT_S,
) -> ProbeReport:
    """Flush the prefix cache, then check each answer's first `n_positions` tokens (and its extra
    positions) with one greedy token each, `concurrency` batched requests in flight.

    Transport failures raise (UnreachableError from the client); an HTTP error on a probe raises
    the client's ResponseError. `flush=False` exists to show what an unflushed probe misses; the
    server may wait up to `flush_timeout` seconds for running requests before refusing the flush."""
    started = time.monotonic()
    answers = [a for a in answers if a.output_ids]
    report = ProbeReport(supported=True, flushed=False, rule=rule or PassRule(), n_positions=n_positions)
    if flush:
        report.flushed, message = client.flush_cache(flush_timeout)
        if not report.flushed:
            report.note = f"the server refused to flush its prefix cache: {message}"
    else:
        report.note = "the prefix cache was not flushed (flush disabled)"

    def probe_answer(index: int) -> tuple[int, list[tuple[int, int]]]:
        # Ascending chunks, one after the other: after the flush, each chunk finds the previous one's
        # prefixes in the prefix cache (KV written by the plain prefill of probes, not by verify) and
        # computes only the few tokens past them. The first chunk is the prompt alone.
        answer = answers[index]
        positions = answer.positions(n_positions)
        chunks = [positions[:1]] + [positions[i : i + _CHUNK] for i in range(1, len(positions), _CHUNK)]
        found: list[tuple[int, int]] = []
        for chunk in chunks:
            if chunk:
                prefixes = [answer.prompt_ids + answer.output_ids[:k] for k in chunk]
                found += list(zip(chunk, client.next_tokens(prefixes), strict=True))
        return index, found

    results: dict[int, list[tuple[int, int]]] = {}
    with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="probe") as pool:
        for index, found in pool.map(probe_answer, range(len(answers))):
            results[index] = found

    for index, answer in enumerate(answers):
        entry = AnswerProbes(answer.prompt_id, answer.attempt, len(results[index]))
        for position, got in sorted(results[index]):
            expected = answer.output_ids[position]
            if got != expected:
                entry.mismatches.append(Mismatch(answer.prompt_id, answer.attempt, position, expected, got))
        report.answers.append(entry)
    for entry in report.answers:
        entry.mismatches = [
            _decoded(client, m) if n < DECODED_PER_ANSWER else m for n, m in enumerate(entry.mismatches)
        ]
    report.elapsed = time.monotonic() - started
    return report
