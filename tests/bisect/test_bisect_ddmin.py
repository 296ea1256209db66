"""Delta debugging over changed keys, then bisection of numeric culprits."""

from __future__ import annotations

import itertools
import random

import pytest

from k26ctl.bisect.ddmin import SetSearch, ddmin
from k26ctl.bisect.plan import Change, EndCheckFailed, SetOutcome
from k26ctl.search.verdict import Verdict
from tests.bisect.bisect_helpers import drive

CHANGES = [
    Change("sglang.context_length", 131072, 65536),
    Change("sglang.served_model_name", "kimi-k2.6", "k26-lab"),
    Change("spec.ddtree.budget", 7, 16),
]


def budget_breaks(a: dict) -> Verdict:
    return Verdict.BAD if a.get("spec.ddtree.budget", 7) >= 8 else Verdict.GOOD


def test_finds_the_budget_among_three_changes_and_bisects_it() -> None:
    outcome, probes = drive(SetSearch(CHANGES), budget_breaks)
    assert isinstance(outcome, SetOutcome)
    assert [c.key for c in outcome.culprits] == ["spec.ddtree.budget"]
    refined = outcome.refined["spec.ddtree.budget"]
    assert (refined.status, refined.first_bad, refined.last_good) == ("found", 8, 7)
    assert probes[0].assignment == {} and probes[1].purpose == "verify-bad"
    # the refinement only deploys the budget, the other keys stay at their good values
    for probe in probes:
        if "spec.ddtree.budget" in probe.assignment and probe.assignment["spec.ddtree.budget"] not in (7, 16):
            assert set(probe.assignment) == {"spec.ddtree.budget"}


def test_without_refinement_stops_at_the_culprit_set() -> None:
    outcome, probes = drive(SetSearch(CHANGES, refine=False), budget_breaks)
    assert isinstance(outcome, SetOutcome) and outcome.refined == {}
    assert len(probes) <= 2 + 2 * 2


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13, 20])
def test_single_culprit_at_every_position(size: int) -> None:
    changes = [Change(f"k{i}", 0, 1) for i in range(size)]
    for culprit in range(size):
        oracle = lambda a, c=culprit: Verdict.BAD if f"k{c}" in a else Verdict.GOOD  # noqa: E731
        outcome, probes = drive(SetSearch(changes, refine=False), oracle)
        assert isinstance(outcome, SetOutcome)
        assert [c.key for c in outcome.culprits] == [f"k{culprit}"]
        assert len(probes) <= 2 + 2 * max(1, (size - 1).bit_length())


@pytest.mark.parametrize("size", [2, 3, 4, 6, 9])
def test_pair_culprits_that_only_fail_together(size: int) -> None:
    changes = [Change(f"k{i}", 0, 1) for i in range(size)]
    for a, b in itertools.combinations(range(size), 2):
        oracle = lambda x, a=a, b=b: Verdict.BAD if {f"k{a}", f"k{b}"} <= set(x) else Verdict.GOOD  # noqa: E731
        outcome, _ = drive(SetSearch(changes, refine=False), oracle)
        assert isinstance(outcome, SetOutcome)
        assert {c.key for c in outcome.culprits} == {f"k{a}", f"k{b}"}


def test_result_is_one_minimal_for_random_monotone_failures() -> None:
    rng = random.Random(3)
    for _ in range(150):
        size = rng.randint(1, 12)
        items = tuple(range(size))
        # fails when any of a few random "bad groups" is fully present
        count = rng.randint(1, 3)
        groups = [frozenset(rng.sample(items, rng.randint(1, min(3, size)))) for _ in range(count)]
        fails = lambda s, g=groups: any(grp <= set(s) for grp in g)  # noqa: E731
        found = ddmin(items, fails)
        assert fails(found)
        for i in found:
            assert not fails(tuple(x for x in found if x != i))


def test_a_skip_counts_as_not_bad_and_the_result_still_fails() -> None:
    def oracle(a: dict) -> Verdict:
        if "sglang.context_length" in a and len(a) < 3:
            return Verdict.SKIP
        return budget_breaks(a)

    outcome, _ = drive(SetSearch(CHANGES), oracle)
    assert isinstance(outcome, SetOutcome)
    assert [c.key for c in outcome.culprits] == ["spec.ddtree.budget"]


def test_set_mode_checks_its_ends() -> None:
    outcome, probes = drive(SetSearch(CHANGES), lambda a: Verdict.GOOD)
    assert isinstance(outcome, EndCheckFailed) and outcome.end == "bad"
    assert len(probes) == 2


def test_numeric_culprit_going_down_is_bisected_downwards() -> None:
    changes = [Change("sglang.context_length", 4096, 1000), Change("sglang.log_level", "info", "debug")]
    oracle = lambda a: Verdict.BAD if a.get("sglang.context_length", 4096) < 2048 else Verdict.GOOD  # noqa: E731
    outcome, _ = drive(SetSearch(changes), oracle)
    assert isinstance(outcome, SetOutcome)
    refined = outcome.refined["sglang.context_length"]
    assert (refined.last_good, refined.first_bad) == (2048, 2047)


def test_two_numeric_culprits_are_each_bisected_with_the_other_at_its_bad_value() -> None:
    changes = [Change("a", 0, 10), Change("b", 0, 10), Change("c", "x", "y")]
    oracle = lambda x: Verdict.BAD if x.get("a", 0) >= 4 and x.get("b", 0) >= 6 else Verdict.GOOD  # noqa: E731
    outcome, _ = drive(SetSearch(changes), oracle)
    assert isinstance(outcome, SetOutcome)
    assert {c.key for c in outcome.culprits} == {"a", "b"}
    assert outcome.refined["a"].first_bad == 4 and outcome.refined["b"].first_bad == 6
