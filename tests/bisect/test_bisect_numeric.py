"""Binary search over ordered candidates, with monotone oracles of many sizes."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest

from k26ctl.bisect.numeric import NumericSearch, max_probes
from k26ctl.bisect.plan import EndCheckFailed, NumericOutcome
from k26ctl.search.assignment import Assignment
from k26ctl.search.verdict import Verdict
from tests.bisect.bisect_helpers import drive

KEY = "spec.ddtree.budget"


def monotone(first_bad: int) -> Callable[[Assignment], Verdict]:
    return lambda a: Verdict.BAD if a[KEY] >= first_bad else Verdict.GOOD


@pytest.mark.parametrize("n", [*range(2, 40), 64, 65, 100, 127, 128, 129, 1000, 1025])
def test_finds_every_boundary_within_the_bound(n: int) -> None:
    candidates = list(range(100, 100 + n))
    positions = range(1, n) if n <= 130 else sorted({1, 2, n // 3, n // 2, n - 2, n - 1})
    for first_bad_index in positions:
        first_bad = candidates[first_bad_index]
        outcome, probes = drive(NumericSearch(KEY, candidates), monotone(first_bad))
        assert isinstance(outcome, NumericOutcome)
        assert (outcome.status, outcome.first_bad, outcome.last_good) == ("found", first_bad, first_bad - 1)
        assert len(probes) <= 2 + math.ceil(math.log2(n)) == max_probes(n)
        assert [p.purpose for p in probes[:2]] == ["verify-good", "verify-bad"]


def test_restart_bound_holds_over_random_scenarios() -> None:
    rng = random.Random(7)
    worst_ratio = 0.0
    for _ in range(400):
        n = rng.randint(2, 5000)
        start = rng.randint(-1000, 1000)
        candidates = list(range(start, start + n))
        first_bad = candidates[rng.randint(1, n - 1)]
        verify = rng.random() < 0.8
        outcome, probes = drive(NumericSearch(KEY, candidates, verify_ends=verify), monotone(first_bad))
        assert isinstance(outcome, NumericOutcome) and outcome.first_bad == first_bad
        bound = (2 if verify else 0) + math.ceil(math.log2(n))
        assert len(probes) <= bound
        worst_ratio = max(worst_ratio, len(probes) / bound)
    assert worst_ratio == 1.0  # the bound is also reached, so it is the tight figure


def test_budget_seven_to_sixteen_takes_six_probes_instead_of_ten() -> None:
    outcome, probes = drive(NumericSearch(KEY, list(range(7, 17))), monotone(8))
    assert isinstance(outcome, NumericOutcome)
    assert (outcome.first_bad, outcome.last_good) == (8, 7)
    assert len(probes) <= 6 < 10
    assert [p.assignment[KEY] for p in probes[:2]] == [7, 16]


def test_descending_and_listed_candidates_follow_the_given_order() -> None:
    candidates = ["fa3", "triton", "flashinfer", "trtllm_mla"]
    bad_from = {"flashinfer", "trtllm_mla"}
    oracle = lambda a: Verdict.BAD if a[KEY] in bad_from else Verdict.GOOD  # noqa: E731
    outcome, _ = drive(NumericSearch(KEY, candidates), oracle)
    assert isinstance(outcome, NumericOutcome)
    assert (outcome.last_good, outcome.first_bad) == ("triton", "flashinfer")


def test_a_skip_tries_the_nearest_neighbour() -> None:
    candidates = list(range(0, 17))
    skipped = {8}

    def oracle(a: dict) -> Verdict:
        if a[KEY] in skipped:
            return Verdict.SKIP
        return Verdict.BAD if a[KEY] >= 11 else Verdict.GOOD

    outcome, probes = drive(NumericSearch(KEY, candidates), oracle)
    assert isinstance(outcome, NumericOutcome) and outcome.status == "found"
    assert (outcome.last_good, outcome.first_bad) == (10, 11)
    values = [p.assignment[KEY] for p in probes]
    assert values[2] == 8 and values[3] == 9  # the skipped middle, then its upper neighbour


def test_skips_that_block_the_boundary_give_the_suspect_range() -> None:
    candidates = list(range(0, 10))

    def oracle(a: dict) -> Verdict:
        if a[KEY] in (4, 5, 6):
            return Verdict.SKIP
        return Verdict.BAD if a[KEY] >= 6 else Verdict.GOOD

    outcome, probes = drive(NumericSearch(KEY, candidates), oracle)
    assert isinstance(outcome, NumericOutcome)
    assert outcome.status == "inconclusive"
    assert (outcome.last_good, outcome.first_bad) == (3, 7)
    assert outcome.suspects == [4, 5, 6, 7]
    assert len(probes) <= len(candidates)


def test_a_skip_next_to_the_boundary_still_converges_when_its_neighbour_decides() -> None:
    candidates = list(range(7, 17))
    oracle = lambda a: Verdict.SKIP if a[KEY] == 11 else (Verdict.BAD if a[KEY] >= 8 else Verdict.GOOD)  # noqa: E731
    outcome, probes = drive(NumericSearch(KEY, candidates), oracle)
    assert isinstance(outcome, NumericOutcome) and outcome.status == "found"
    assert (outcome.last_good, outcome.first_bad) == (7, 8)
    assert any(p.assignment[KEY] == 11 for p in probes)


@pytest.mark.parametrize(
    ("oracle", "end", "verdict"),
    [
        (lambda a: Verdict.BAD, "good", Verdict.BAD),
        (lambda a: Verdict.GOOD, "bad", Verdict.GOOD),
        (lambda a: Verdict.SKIP if a[KEY] == 16 else Verdict.GOOD, "bad", Verdict.SKIP),
        (lambda a: Verdict.SKIP, "good", Verdict.SKIP),
    ],
)
def test_an_end_that_misbehaves_stops_the_search(
    oracle: Callable[[Assignment], Verdict], end: str, verdict: Verdict
) -> None:
    outcome, probes = drive(NumericSearch(KEY, list(range(7, 17))), oracle)
    assert isinstance(outcome, EndCheckFailed)
    assert (outcome.end, outcome.verdict) == (end, verdict)
    assert len(probes) == (1 if end == "good" else 2)
    assert f"{end} end" in outcome.message()


def test_without_end_checks_the_ends_are_never_deployed() -> None:
    outcome, probes = drive(NumericSearch(KEY, list(range(7, 17)), verify_ends=False), monotone(8))
    assert isinstance(outcome, NumericOutcome) and outcome.first_bad == 8
    assert {p.assignment[KEY] for p in probes}.isdisjoint({7, 16})
    assert len(probes) <= math.ceil(math.log2(10))


def test_progress_estimate_never_undercounts_the_probes_left() -> None:
    for n in (2, 3, 10, 33, 200):
        for first_bad in range(1, n, max(1, n // 7)):
            _, probes = drive(NumericSearch(KEY, list(range(n))), monotone(first_bad))
            for done, probe in enumerate(probes):
                assert probe.steps_left >= len(probes) - done


def test_rejects_fewer_than_two_or_repeated_candidates() -> None:
    with pytest.raises(ValueError):
        NumericSearch(KEY, [7])
    with pytest.raises(ValueError):
        NumericSearch(KEY, [7, 8, 7])


def test_bad_end_first_judges_the_live_bad_end_before_the_good_one() -> None:
    search = NumericSearch(KEY, list(range(4, 17)), bad_end_first=True)
    outcome, probes = drive(search, monotone(9))
    assert isinstance(outcome, NumericOutcome)
    assert (outcome.first_bad, outcome.last_good) == (9, 8)
    assert [(p.purpose, p.assignment[KEY]) for p in probes[:2]] == [("verify-bad", 16), ("verify-good", 4)]
    assert len(probes) <= max_probes(13)


def test_bad_end_first_still_stops_when_the_bad_end_is_good() -> None:
    search = NumericSearch(KEY, list(range(4, 17)), bad_end_first=True)
    outcome, probes = drive(search, lambda a: Verdict.GOOD)
    assert isinstance(outcome, EndCheckFailed) and outcome.end == "bad"
    assert len(probes) == 1
