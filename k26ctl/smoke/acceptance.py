"""Judging a speculative server's accept length: slow is not broken.

A weak drafter (an n-gram table on ordinary text, an EAGLE head trained on other data) accepts little
and makes the server slower than it could be, yet every token it serves is the target model's own:
correctness is judged by the text detectors, the greedy probes and baseline parity. Accept length on
its own fails a run only where it clearly means something is broken:

- it collapsed against what the same configuration (same profile and speculative flags) achieved on
  this host before (`PriorAccept`, from the host's deploy history or the local record of `--url`);
- nothing is accepted at all (about 1.0 token per verify pass) where the configuration is meant to
  accept: the drafter's proposals are all rejected, a broken or untrained drafter;
- the user set a floor (`--min-accept-length`, profile `smoke.min_accept_length`).

Otherwise a low accept length is a warning that names the number and the configuration's expected
range where one is known: steps + 1 for EAGLE-style chains, the block for DFlash/DDTree. NGRAM has
none: its `speculative_num_draft_tokens` is the size of a tree (SGLang sets eagle_topk 10, num_steps 0),
not a chain depth, and what it accepts depends on how much the text repeats itself. Which algorithm is
which kind, and where its range is read, is the algorithm catalogue's (k26ctl/algorithms.py); an
algorithm the catalogue lacks gets no range and no "accepts nothing" verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from k26ctl.algorithms import Algorithm
from k26ctl.algorithms import algorithm as catalogued
from k26ctl.smoke.finding import Finding

# At or below this accept length nothing is accepted: fewer than one draft token in 20 verify passes.
NOTHING_ACCEPTED = 1.05
# Below this share of the way from 1.0 to the longest accept length, acceptance is low (a warning).
LOW_SHARE = 0.25
LOW_FLOOR = 1.25  # the low mark where no longest accept length is known
# A run has collapsed when it keeps less than this share of the gain over 1.0 achieved before.
COLLAPSE_KEEP = 0.5
# A prior run counts as a reference only where its drafter clearly accepted something.
MIN_PRIOR = 1.25


@dataclass(frozen=True)
class PriorAccept:
    """What the same configuration achieved on this server before (a passing smoke run)."""

    accept_length: float
    when: str
    source: str  # "this host's deploy history", "the local record <path>"

    def collapse_mark(self) -> float | None:
        """At or below this the accept length has collapsed (None: the prior accepted too little)."""
        if self.accept_length < MIN_PRIOR:
            return None
        return 1.0 + COLLAPSE_KEEP * (self.accept_length - 1.0)


@dataclass(frozen=True)
class AcceptRule:
    """How one server's accept length is judged."""

    algorithm: str  # upper case; "" without speculative decoding
    longest: float | None  # the longest accept length the configuration allows, where one is known
    floor: float | None = None  # the user's --min-accept-length
    prior: PriorAccept | None = None

    @property
    def row(self) -> Algorithm | None:
        return catalogued(self.algorithm) if self.algorithm else None

    @property
    def meant_to_accept(self) -> bool:
        """A model drafter (not a lookup table) that should accept something on any text."""
        return self.row is not None and self.row.kind in ("chain", "block")

    @property
    def low_mark(self) -> float:
        if self.longest is None or self.longest < 2:
            return LOW_FLOOR
        return max(LOW_FLOOR, 1.0 + LOW_SHARE * (self.longest - 1.0))

    def expected_range(self) -> str:
        row = self.row
        if self.longest is None:
            if row is not None and row.kind == "lookup":
                return f"no expected range for {self.algorithm}: it drafts from text the request repeats"
            if self.algorithm and row is None:
                return f"no expected range known for {self.algorithm}: k26ctl's algorithm catalogue lacks it"
            return "no expected range known for this configuration"
        how = "steps + 1" if row is not None and row.kind == "chain" else "the draft block"
        return f"expected up to {self.longest:g} ({how}) for {self.algorithm}"

    def to_json(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm or None,
            "longest": self.longest,
            "low_below": round(self.low_mark, 4),
            "nothing_accepted_at": NOTHING_ACCEPTED if self.meant_to_accept else None,
            "floor": self.floor,
            "prior": None
            if self.prior is None
            else {
                "accept_length": self.prior.accept_length,
                "when": self.prior.when,
                "source": self.prior.source,
                "collapse_at": self.prior.collapse_mark(),
            },
        }


def server_args(info: dict[str, Any] | None) -> dict[str, Any]:
    if not info:
        return {}
    nested = info.get("server_args")
    return {**info, **nested} if isinstance(nested, dict) else dict(info)


def algorithm_of(info: dict[str, Any] | None) -> str:
    algorithm = str(server_args(info).get("speculative_algorithm") or "").upper()
    return "" if algorithm == "NONE" else algorithm


def longest_accept(info: dict[str, Any] | None) -> float | None:
    """steps + 1 for EAGLE-style chains; the draft block for DFlash/DDTree (whose depth is block - 1);
    None for NGRAM (its draft-token count is a tree size) and for what is not known."""
    args = server_args(info)
    row = catalogued(algorithm_of(info)) if algorithm_of(info) else None
    value: Any = None
    for source in row.reach if row is not None else ():
        if source == "steps+1":
            steps = args.get("speculative_num_steps")
            value = steps + 1 if isinstance(steps, int) and not isinstance(steps, bool) else None
        else:
            value = args.get(source)
        if value:
            break
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 2:
        return None
    return float(value)


def rule_for(
    info: dict[str, Any] | None, floor: float | None = None, prior: PriorAccept | None = None
) -> AcceptRule:
    return AcceptRule(algorithm_of(info), longest_accept(info), floor, prior)


def request_findings(value: float, rule: AcceptRule) -> list[Finding]:
    """One request's accept length: only the user's floor fails it (a short answer varies too much for
    anything else); a request that accepted nothing is a warning."""
    if rule.floor is not None and value < rule.floor:
        return [
            _finding(
                "accept_floor",
                value,
                rule.floor,
                f"accept length {value:.2f} below the floor {rule.floor:.2f}",
            )
        ]
    if rule.meant_to_accept and value <= NOTHING_ACCEPTED:
        return [
            _finding(
                "accept_none",
                value,
                NOTHING_ACCEPTED,
                f"accept length {value:.2f}: no draft token accepted in this request",
                severity="warn",
            )
        ]
    return []


def suite_findings(value: float, rule: AcceptRule) -> list[Finding]:
    """The run's own accept length (completion_tokens / spec_verify_ct): at most one finding."""
    label = f"accept length {value:.2f} over this run's requests"
    if rule.floor is not None and value < rule.floor:
        return [
            _finding(
                "measured_accept_floor", value, rule.floor, f"{label} is below the floor {rule.floor:.2f}"
            )
        ]
    prior = rule.prior
    mark = prior.collapse_mark() if prior is not None else None
    if prior is not None and mark is not None and value <= mark:
        return [
            _finding(
                "measured_accept_collapse",
                value,
                mark,
                f"{label} collapsed from {prior.accept_length:.2f}, which the same configuration "
                f"achieved on this server before ({prior.source}, {prior.when}): drafts that used to be "
                "accepted are now rejected, which points at the verify step",
            )
        ]
    if rule.meant_to_accept and value <= NOTHING_ACCEPTED:
        return [
            _finding(
                "drafter_accepts_nothing",
                value,
                NOTHING_ACCEPTED,
                f"{label}: the drafter accepts nothing ({rule.expected_range()}); every draft is "
                "rejected, so speculation only costs time: a broken or untrained drafter (wrong draft "
                "model, wrong target layers, random weights; sgl-project/sglang#27829)",
            )
        ]
    if value < rule.low_mark:
        return [
            _finding(
                "measured_accept_low",
                value,
                rule.low_mark,
                f"{label} is low ({rule.expected_range()}): the server is slower than it could be, "
                "not wrong; set --min-accept-length to fail on it",
                severity="warn",
            )
        ]
    return []


def _finding(code: str, value: float, threshold: float, message: str, severity: str = "fail") -> Finding:
    return Finding(
        code, value, threshold, (0, 0), "", message, severity="warn" if severity == "warn" else "fail"
    )
