"""The one-line result of `k26ctl bisect-config` (without --json), drawn by cli/present/bisect.py."""

from __future__ import annotations

from k26ctl.bisect.engine import SearchResult
from k26ctl.bisect.plan import Change, NumericOutcome, SetOutcome
from k26ctl.bisect.session import StepRecord
from k26ctl.cli.present.bisect import search_summary
from k26ctl.search.verdict import Verdict

KEY = "spec.ddtree.budget"


def _steps(*restarted: bool) -> list[StepRecord]:
    return [
        StepRecord(i + 1, {KEY: i}, Verdict.GOOD, 1.0, r, tries=["good"], detail="")
        for i, r in enumerate(restarted)
    ]


def test_numeric_found_and_inconclusive() -> None:
    found = SearchResult("default", NumericOutcome(KEY, "found", 7, 8), _steps(True, True, False), 10, 6)
    assert search_summary(found) == f"first bad {KEY}=8, last good 7 (3 steps, 2 restarts)"
    blocked = NumericOutcome(KEY, "inconclusive", 7, 12, suspects=[9, 10, 12])
    assert search_summary(SearchResult("default", blocked, _steps(True), 10, 6)) == (
        f"{KEY}: skipped values block the search; first bad is one of 9, 10, 12 (1 steps, 1 restarts)"
    )


def test_set_mode_names_the_culprits_and_their_refined_values() -> None:
    changes = [Change(KEY, 7, 16), Change("spec.ddtree.max_topk", 1, 4), Change("sglang.page_size", 1, 16)]
    outcome = SetOutcome(
        changes,
        [changes[0], changes[1]],
        {KEY: NumericOutcome(KEY, "found", 7, 8), "spec.ddtree.max_topk": NumericOutcome(
            "spec.ddtree.max_topk", "inconclusive", 1, 4, suspects=[2, 4])},
    )  # fmt: skip
    assert search_summary(SearchResult("s", outcome, _steps(True, False), 3, None)) == (
        f"culprit keys: {KEY}, spec.ddtree.max_topk (of 3 changed); {KEY}: first bad 8, last good 7; "
        "spec.ddtree.max_topk: first bad is one of [2, 4] (2 steps, 1 restarts)"
    )
