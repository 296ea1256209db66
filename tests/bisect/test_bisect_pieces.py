"""Verdict rules, candidate lists and profile diffs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from k26ctl.bisect.candidates import build_candidates
from k26ctl.bisect.setdiff import differing_keys
from k26ctl.bisect.verdict import AbortSearch, combine_tries, tries_needed, verdict_from_exit_code
from k26ctl.errors import ConfigError, UsageError
from k26ctl.profile import LoadedProfile, load_profile
from k26ctl.search.assignment import flatten, with_assignment
from k26ctl.search.verdict import Verdict

G, B, S = Verdict.GOOD, Verdict.BAD, Verdict.SKIP


@pytest.mark.parametrize(
    ("code", "verdict"), [(0, G), (1, B), (2, B), (124, B), (125, S), (126, B), (127, B)]
)
def test_git_bisect_run_exit_codes(code: int, verdict: Verdict) -> None:
    assert verdict_from_exit_code(code) is verdict


@pytest.mark.parametrize("code", [128, 129, 255, -9, -2])
def test_exit_codes_from_128_and_signals_abort(code: int) -> None:
    with pytest.raises(AbortSearch) as caught:
        verdict_from_exit_code(code, "check.sh")
    assert str(code) in caught.value.message and "check.sh" in caught.value.message


def test_tries_rule_bad_wins_good_needs_all() -> None:
    assert combine_tries([G, G, G]) is G
    assert combine_tries([G, B, G]) is B
    assert combine_tries([G, S, G]) is S
    assert combine_tries([S, B]) is B
    assert tries_needed([G, G], 3) and not tries_needed([G, B], 3) and not tries_needed([G, G, G], 3)


def test_integer_range_and_listed_values() -> None:
    assert build_candidates("7", "16", None) == list(range(7, 17))
    assert build_candidates("16", "7", None) == list(range(16, 6, -1))
    assert build_candidates(None, None, "7,8,12,16") == [7, 8, 12, 16]
    assert build_candidates("8", "16", "7,8,12,16") == [8, 12, 16]
    assert build_candidates("16", "8", "7,8,12,16") == [16, 12, 8]
    assert build_candidates(None, None, "triton, flashinfer") == ["triton", "flashinfer"]


@pytest.mark.parametrize(
    ("good", "bad", "values"),
    [
        ("7", "7", None),
        ("a", "b", None),
        (None, "7", None),
        ("9", None, "7,8"),
        (None, None, "7,7"),
        ("7", "7.5", None),
    ],
)
def test_bad_candidate_input_is_a_usage_error(good: str | None, bad: str | None, values: str | None) -> None:
    with pytest.raises(UsageError):
        build_candidates(good, bad, values)


def test_flatten_keeps_lists_as_leaves() -> None:
    assert flatten({"a": {"b": 1, "c": [1, 2]}, "d": {}}) == {"a.b": 1, "a.c": [1, 2]}


def _lab(tmp_path: Path, text: str, name: str = "p.yaml") -> LoadedProfile:
    path = tmp_path / name
    path.write_text(text)
    return load_profile(path)


def test_differing_keys_between_two_profiles(tmp_path: Path) -> None:
    good_text = "spec: {algorithm: DDTREE, ddtree: {budget: 7}}\nservice: {environment: {A: '1'}}\n"
    good = _lab(tmp_path, good_text, "g.yaml")
    bad = _lab(
        tmp_path,
        "name: other\nspec: {algorithm: DDTREE, ddtree: {budget: 16}}\n"
        "sglang: {context_length: 4096}\nservice: {environment: {B: '2'}}\n",
        "b.yaml",
    )
    changes = {c.key: (c.good, c.bad) for c in differing_keys(good.profile, bad.profile)}
    assert changes == {
        "spec.ddtree.budget": (7, 16),
        "sglang.context_length": (None, 4096),
        "service.environment.A": ("1", None),
        "service.environment.B": (None, "2"),
    }
    # applying every change to the good profile gives the bad one (names aside)
    applied = with_assignment(good, {k: v[1] for k, v in changes.items()})
    assert applied.profile.model_dump(exclude={"name"}) == bad.profile.model_dump(exclude={"name"})
    assert applied.profile.name == good.profile.name


def test_profiles_on_different_hosts_are_refused(tmp_path: Path) -> None:
    good = _lab(tmp_path, "host: {address: a}\n", "g.yaml")
    bad = _lab(tmp_path, "host: {address: b}\n", "b.yaml")
    with pytest.raises(ConfigError):
        differing_keys(good.profile, bad.profile)


def test_with_assignment_validates_the_result(tmp_path: Path) -> None:
    base = _lab(tmp_path, "spec: {algorithm: DDTREE}\n")
    assert with_assignment(base, {"spec.ddtree.budget": 9}).profile.spec.ddtree.budget == 9
    assert with_assignment(base, {"sglang.served_model_name": "on"}).profile.sglang.served_model_name == "on"
    with pytest.raises(ConfigError):
        with_assignment(base, {"sglang.port": 0})


def test_live_is_bad_end_only_when_the_running_unit_and_patches_are_the_bad_ends(tmp_path: Path) -> None:
    from k26ctl.bisect.api import _live_is_bad_end
    from k26ctl.bisect.session import SessionSpec
    from k26ctl.deploy.plan import sha256_text
    from k26ctl.render import render_unit

    base = _lab(tmp_path, "spec: {algorithm: DDTREE, ddtree: {budget: 7}}\n")
    key = "spec.ddtree.budget"

    def unit_sha(budget: int) -> str:
        return sha256_text(render_unit(with_assignment(base, {key: budget}).profile))

    def spec(original: dict[str, Any] | None, **fields: Any) -> SessionSpec:
        return SessionSpec(mode="numeric", param=key, candidates=[7, 8, 16], original=original, **fields)

    live_bad = {"running": True, "unit_sha": unit_sha(16), "patches": []}
    assert _live_is_bad_end(spec(live_bad), base)
    assert not _live_is_bad_end(spec({**live_bad, "running": False}), base)
    assert not _live_is_bad_end(spec({**live_bad, "unit_sha": unit_sha(7)}), base)
    assert not _live_is_bad_end(spec({**live_bad, "patches": ["lab-verify-width-cap"]}), base)
    assert not _live_is_bad_end(spec(live_bad, verify_ends=False), base)
    assert not _live_is_bad_end(spec(None), base)


def test_time_left_comes_from_the_steps_that_restarted() -> None:
    from k26ctl.bisect.engine import _eta
    from k26ctl.bisect.session import StepRecord

    def step(number: int, seconds: float, restarted: bool) -> StepRecord:
        return StepRecord(number, {}, Verdict.GOOD, seconds, restarted, ["good"], "")

    live_end = step(1, 5.6, False)  # the bad end the host already ran: smoke only
    assert _eta([live_end], 5) is None
    assert _eta([live_end, step(2, 67.0, True)], 4) == 4 * 67.0
    assert _eta([live_end, step(2, 60.0, True), step(3, 70.0, True)], 2) == 2 * 65.0
    assert _eta([step(1, 2.0, False), step(2, 4.0, False)], 3) == 9.0  # --run without deploys
