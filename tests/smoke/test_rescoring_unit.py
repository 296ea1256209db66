"""The rescoring probes' arithmetic on synthetic answers: draws from the target pass, draws that keep
taking the runner-up fail on surprise, impossible tokens fail on the Poisson bound, decode values off
the prefill fail per answer; SGLang's logprob shapes parse; a missing piece is a named reason."""

from __future__ import annotations

import math
import random

import pytest

from k26ctl.smoke.client import token_logprobs, top_lists
from k26ctl.smoke.rescoring import (
    RescoreReport,
    RescoreRule,
    SampledAnswer,
    freedman_tail,
    poisson_tail,
    run_rescoring,
    score_answer,
    skipped,
)

VOCAB = 12
T = 0.7


def _raw_rows(rng: random.Random, n: int) -> list[list[float]]:
    """Per position, raw log-probabilities of a peaked distribution over VOCAB tokens."""
    rows = []
    for _ in range(n):
        logits = [rng.gauss(0, 2.5) for _ in range(VOCAB)]
        lse = math.log(sum(math.exp(v) for v in logits))
        rows.append([v - lse for v in logits])
    return rows


def _scaled(row: list[float]) -> list[float]:
    lse = math.log(sum(math.exp(v / T) for v in row))
    return [v / T - lse for v in row]


Rescored = list[tuple[float | None, list[tuple[float, int]] | None]]


def _answer(rng: random.Random, n: int, pick: str) -> tuple[SampledAnswer, Rescored]:
    rows = _raw_rows(rng, n)
    out: list[int] = []
    decode: list[float | None] = []
    for row in rows:
        p = [math.exp(v) for v in _scaled(row)]
        if pick == "sample":
            token = rng.choices(range(VOCAB), weights=p)[0]
        elif pick == "runner-up":
            token = sorted(range(VOCAB), key=lambda i: -p[i])[1]
        else:  # the least likely token
            token = min(range(VOCAB), key=lambda i: p[i])
        out.append(token)
        decode.append(_scaled(row)[token])
    rescored: Rescored = [
        (row[t], [(v, i) for i, v in enumerate(row)]) for row, t in zip(rows, out, strict=True)
    ]
    return SampledAnswer("p", 0, T, [1, 2, 3], out, decode), rescored


def _report(parts: list[tuple[SampledAnswer, Rescored]]) -> RescoreReport:
    rule = RescoreRule()
    return RescoreReport(supported=True, flushed=True, answers=[score_answer(a, r, rule) for a, r in parts])


def test_correct_draws_pass_and_decode_agrees() -> None:
    rng = random.Random(7)
    report = _report([_answer(rng, 200, "sample") for _ in range(10)])
    assert report.verdict == "pass", report.summary()
    assert all(a.max_diff < 1e-9 for a in report.answers)
    assert -4.0 < report.surprise_z < 4.0


def test_always_the_runner_up_fails_on_surprise_not_on_unlikely_tokens() -> None:
    rng = random.Random(8)
    report = _report([_answer(rng, 200, "runner-up")])
    assert report.surprise_fails and report.verdict == "fail"
    assert report.answers[0].surprise_tail(abs(RescoreRule().floor)) < RescoreRule().alpha


def test_impossible_tokens_fail_on_the_poisson_bound() -> None:
    rng = random.Random(9)
    report = _report([_answer(rng, 100, "worst")])
    assert report.low_tokens > 0 and report.low_tail < RescoreRule().alpha
    assert report.verdict == "fail"


def test_decode_values_off_the_prefill_fail_that_answer() -> None:
    rng = random.Random(10)
    answer, rescored = _answer(rng, 50, "sample")
    shifted = [None if v is None else v - 2.0 for v in (answer.decode_logprobs or [])]
    bad = SampledAnswer("p", 0, T, answer.prompt_ids, answer.output_ids, shifted)
    report = _report([(bad, rescored)])
    assert report.diff_failures() and report.verdict == "fail"
    unreported = SampledAnswer("p", 0, T, answer.prompt_ids, answer.output_ids, None)
    assert not score_answer(unreported, rescored, RescoreRule()).decode_reported


def test_poisson_tail() -> None:
    assert poisson_tail(0, 0.3) == 1.0
    assert poisson_tail(1, 0.1) == pytest.approx(1 - math.exp(-0.1))
    assert 0 < poisson_tail(40, 0.1) < 1e-60  # a tiny tail keeps its digits
    assert poisson_tail(3, 0.0) == 0.0


def test_sglang_logprob_shapes_parse_and_bad_ones_are_refused() -> None:
    meta = {
        "input_token_logprobs": [[None, 5, None], [-0.5, 6, None]],
        "input_top_logprobs": [None, [[-0.5, 6, None], [-1.2, 9, None]]],
    }
    assert token_logprobs(meta, "input_token_logprobs") == [(None, 5), (-0.5, 6)]
    assert top_lists(meta, "input_top_logprobs") == [None, [(-0.5, 6), (-1.2, 9)]]
    assert token_logprobs({"input_token_logprobs": [["x", 1]]}, "input_token_logprobs") is None
    assert token_logprobs({}, "input_token_logprobs") is None


class _Refusing:
    def flush_cache(self, timeout: float = 0.0) -> tuple[bool, str]:
        return False, "pending requests"

    def prompt_logprobs(self, ids: list[int], start: int, top: int) -> Rescored:
        return [(None, None)] + [(-0.1, [(-0.1, t)]) for t in ids[start + 1 :]]


def test_no_answers_or_no_logprobs_is_a_named_skip_never_a_pass() -> None:
    assert skipped("the server does not return log-probabilities").verdict == "skipped"
    assert "does not return" in skipped("the server does not return log-probabilities").summary()
    report = run_rescoring(_Refusing(), [], concurrency=2)
    assert report.verdict == "skipped" and not report.flushed and "refused" in (report.note or "")


def _sure_rows(rng: random.Random, n: int) -> list[list[float]]:
    """Positions where the target is mostly sure: a top token, a runner-up 1-8 logits below it, the rest
    far below (the shape of a small trained model's rows)."""
    rows = []
    for _ in range(n):
        logits = [0.0, -rng.uniform(1.0, 8.0)] + [-rng.uniform(9.0, 14.0) for _ in range(VOCAB - 2)]
        lse = math.log(sum(math.exp(v) for v in logits))
        rows.append([v - lse for v in logits])
    return rows


def _sure_answer(rng: random.Random, n: int, fault_every: int) -> tuple[SampledAnswer, Rescored]:
    """Correct draws, except that every `fault_every`-th position whose top two are within 4 logits
    commits the runner-up (the lab's second-request fault; 0: never)."""
    rows = _sure_rows(rng, n)
    out: list[int] = []
    near = 0
    for row in rows:
        p = [math.exp(v) for v in _scaled(row)]
        token = rng.choices(range(VOCAB), weights=p)[0]
        if fault_every and row[0] - row[1] < 4.0:
            near += 1
            token = 1 if near % fault_every == 0 else token
        out.append(token)
    decode: list[float | None] = [_scaled(row)[t] for row, t in zip(rows, out, strict=True)]
    rescored: Rescored = [
        (row[t], [(v, i) for i, v in enumerate(row)]) for row, t in zip(rows, out, strict=True)
    ]
    return SampledAnswer("p", 0, T, [1, 2, 3], out, decode), rescored


def test_sure_positions_left_by_a_correct_sampler_stay_within_the_bound() -> None:
    for seed in range(5):
        rng = random.Random(100 + seed)
        report = _report([_sure_answer(rng, 300, 0) for _ in range(10)])
        assert report.departures_expected > 5.0  # the test has something to count
        assert report.departure_tail >= RescoreRule().alpha, report.summary()
        assert report.verdict == "pass", report.summary()


def test_a_runner_up_now_and_then_at_sure_positions_fails_on_departures() -> None:
    rng = random.Random(11)
    report = _report([_sure_answer(rng, 300, 4) for _ in range(10)])
    assert report.departures > report.departures_expected
    assert report.departure_tail < RescoreRule().alpha, report.summary()
    assert report.low_tail >= RescoreRule().alpha  # no token is anywhere near impossible
    assert report.verdict == "fail"
    assert report.to_json()["departures"] == report.departures


def test_freedman_tail() -> None:
    assert freedman_tail(0.0, 1.0, 6.9) == 1.0 and freedman_tail(-3.0, 1.0, 6.9) == 1.0
    assert freedman_tail(6.3, 1.9, 6.9) > 0.1  # one honest rare token in a nearly sure answer
    assert freedman_tail(60.0, 1.0, 6.9) < 1e-5
    # with steps of size 0 it is the normal-shaped exp(-s^2 / 2V)
    assert freedman_tail(4.0, 1.0, 0.0) == pytest.approx(math.exp(-8.0))


def test_one_honest_rare_token_in_a_nearly_sure_answer_is_no_surprise() -> None:
    """200 positions, most sure (runner-up 7-12 logits down), a few uncertain; at one sure-ish position
    (runner-up 4.5 logits down, p_T about 1.6e-3) the runner-up was drawn, as a correct sampler does
    about once in 600 such positions."""
    rng = random.Random(12)
    rows = []
    for i in range(200):
        gap = 4.5 if i == 100 else (rng.uniform(1.0, 2.0) if i % 100 == 0 else rng.uniform(7.0, 12.0))
        logits = [0.0, -gap] + [-20.0] * (VOCAB - 2)
        lse = math.log(sum(math.exp(v) for v in logits))
        rows.append([v - lse for v in logits])
    out = [1 if i == 100 else 0 for i in range(200)]
    rescored: Rescored = [
        (row[t], [(v, i) for i, v in enumerate(row)]) for row, t in zip(rows, out, strict=True)
    ]
    report = _report([(SampledAnswer("p", 0, T, [1, 2, 3], out, None), rescored)])
    assert report.answers[0].z < -4.0, report.answers[0]  # a normal tail would call this very unlikely
    assert not report.surprise_fails, report.summary()
