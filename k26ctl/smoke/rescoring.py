"""Rescoring probes: the server re-checks its own sampled answers with one prefill pass each.

At temperature 0 the greedy probes (smoke/probes.py) check that each token is the target's argmax. A
sampled token has no such identity, but it has a probability: a correct sampler at temperature T draws
token x with the target's probability p_T(x) = softmax(logits / T)(x) (cut to the top-p nucleus). The
first token of a request, and every input token of a prefill, comes from the plain extend pass that no
speculative verify step touches. So after a sampled answer, one prefill of `prompt + answer` with
`return_logprob` and `logprob_start_len = len(prompt) - 1` gives the target's log-probability of every
answer token (raw: SGLang's input log-probabilities are the plain log-softmax, logits_processor.py
`process_input_logprobs`), and `top_logprobs_num` K gives the K best per position, from which p_T
follows: log p_T(x) = l(x) / T - logsumexp(l / T). The sum over the K best and x is a lower bound; the
unseen tokens' share at T is bounded from the raw tail mass (`_tail_bound`), so every log p_T is known
within an interval, and each test below takes the side of that interval that favours the server.

Three pieces of evidence, per answer and for the whole run:

1. Decode against rescore. SGLang reports a sampled token's decode log-probability as
   log softmax(logits / T) at the step that emitted it (sampler.py; for speculative workers
   layers/utils/logprob.py `compute_spec_v2_logprobs`, from the verify pass's target rows). A broken
   verify computes those rows wrong, so they disagree with the prefill. SGLang's own speculative tests
   bound the difference by 0.5 nats in bf16; `max_token_diff` is that bound, and an answer fails when
   more than `max_diff_tokens` tokens exceed it.

2. Tokens the target would almost never draw. For one step, the probability that a correct sampler
   draws any token of p_T below `epsilon` is at most the mass of such tokens, which the rescoring
   bounds from above per position: the top-K tokens below epsilon plus everything outside the top K
   (1 - their sum). Summed over the answer this is lambda, the expected count of such tokens on a
   correct server; the observed count N is a sum of independent-enough Bernoulli draws with that mean,
   so P(N >= n) <= the Poisson tail at lambda (a sum of Bernoullis is dominated by the Poisson of the
   same mean in its upper tail, Hoeffding 1956). The run fails when that tail is below `alpha`.

3. Systematic surprise. A fault that keeps picking the runner-up, or relaxed accept thresholds, emits
   tokens that are each plausible but, together, less likely than a correct sampler's. With
   f(x) = max(log p_T(x), floor), S = sum over tokens of f(x_t) - E_t[f] has mean 0 under a correct
   sampler and variance V = sum of Var_t[f] (E_t and Var_t from the top K; the tail is counted at the
   floor, which can only raise E_t, so S is biased low by at most tail mass x |floor| per step, added
   back as `slack`). S is a martingale whose steps down are at most b = |floor| (f <= 0, so
   E_t[f] - f(x_t) <= -floor), and Freedman's inequality bounds its lower tail by
   P(S + slack <= -s) <= exp(-s^2 / (2 (V + b s / 3))), taken at the observed V. An answer fails when
   that bound is under `alpha` / (the number of answers), the run when the bound over all its sampled
   tokens is under `alpha`. A normal tail would be tighter, but it is wrong where V is small: an answer
   of a few uncertain positions (V = 1.9 at T = 0.5) with one honestly drawn token of p_T 3e-3 has
   z = -4.5, a normal P of 3e-6; Freedman's bound gives it 0.3. z = (S + slack) / sqrt(V) is still
   reported, as the readable size of the shift.

4. Departures from a sure choice. Where the target is fairly sure at temperature T (its top token has
   p_T(top) > 1 - `delta`, delta = 0.2), a correct sampler leaves that top token with probability
   1 - p_T(top) < delta.
   Over the positions of a run that are sure in this sense, the count D of tokens that are not the
   top one is again a sum of Bernoullis, of mean at most mu = the sum of their 1 - p_T(top) (read at
   the bound that favours the server), and the run fails when P(Poisson(mu) >= D) < `alpha`. A fault
   that commits a runner-up where the top two are a few logits apart (the lab's second-request fault:
   within 4 logits, so p_T(runner-up) down to about 0.3 % at T = 0.7) leaves such a sure position
   every time it strikes; a correct sampler does so with probability under delta. Test 3 sees these
   tokens too, but spreads them over the variance of every uncertain position of the answer.

A server that cannot return log-probabilities (DFlash and DDTree refuse `return_logprob` in 0.5.15)
gets a named reason and no verdict, never a silent pass.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

TOP_K = 40  # best log-probabilities asked per rescored position
FLUSH_TIMEOUT_S = 10.0


class RescoreClient(Protocol):
    def flush_cache(self, timeout: float = 0.0) -> tuple[bool, str]: ...

    def prompt_logprobs(
        self, ids: list[int], start: int, top: int
    ) -> list[tuple[float | None, list[tuple[float, int]] | None]]: ...


@dataclass(frozen=True)
class SampledAnswer:
    """One sampled answer: the ids the server used, the ids it drew, and its decode log-probabilities."""

    prompt_id: str
    attempt: int
    temperature: float
    prompt_ids: list[int]
    output_ids: list[int]
    decode_logprobs: list[float | None] | None = None  # None: the server did not report them


@dataclass(frozen=True)
class RescoreRule:
    max_token_diff: float = 0.5  # nats; SGLang's speculative test kit, bf16
    max_diff_tokens: int = 3  # per answer, tokens over max_token_diff
    epsilon: float = 1e-4  # "very low probability" at the answer's temperature
    floor: float = math.log(1e-3)  # where the surprise score is clipped
    # each test fails a run of a correct sampler with at most this probability (test 3: per answer
    # alpha / answers, and alpha over the run)
    alpha: float = 1e-4
    delta: float = 0.2  # test 4: a position is sure when its top token has p_T > 1 - delta

    def describe(self) -> str:
        return (
            f"decode vs rescore within {self.max_token_diff:g} nats (at most {self.max_diff_tokens} over "
            f"per answer); tokens under p={self.epsilon:g} at most {self.alpha:g} likely from a correct "
            f"sampler; surprise (Freedman) at most {self.alpha:g} likely per run and over the answers; "
            f"departures from a top token over p={1 - self.delta:g} at most {self.alpha:g} likely"
        )


@dataclass
class AnswerRescore:
    prompt_id: str
    attempt: int
    temperature: float
    tokens: int = 0
    diff_tokens: int = 0  # decode vs rescore over max_token_diff
    max_diff: float = 0.0
    low_tokens: int = 0  # rescored p_T under epsilon
    low_expected: float = 0.0  # lambda: the most a correct sampler would draw on average
    surprise: float = 0.0  # S (negative: less likely tokens than a correct sampler draws)
    variance: float = 0.0  # V
    slack: float = 0.0
    first_low: int | None = None  # position of the first very unlikely token
    departures: int = 0  # tokens other than the top one where the top has p_T > 1 - delta
    departures_expected: float = 0.0  # mu: the most a correct sampler would draw there on average
    first_departure: int | None = None
    decode_reported: bool = True

    @property
    def name(self) -> str:
        return self.prompt_id + (f"#{self.attempt + 1}" if self.attempt else "")

    @property
    def z(self) -> float:
        """(S + slack) / sqrt(V): how far below a correct sampler's the tokens' likelihood is."""
        return (self.surprise + self.slack) / math.sqrt(self.variance) if self.variance > 0 else 0.0

    def surprise_tail(self, bound: float) -> float:
        """Freedman's bound on how likely a correct sampler's answer is this surprising (or more)."""
        return freedman_tail(-(self.surprise + self.slack), self.variance, bound)


def freedman_tail(s: float, variance: float, bound: float) -> float:
    """exp(-s^2 / (2 (V + b s / 3))): Freedman's bound on P(a martingale with steps down at most b and
    predictable variance V falls by s or more); 1 for s <= 0."""
    if s <= 0:
        return 1.0
    return math.exp(-(s * s) / (2.0 * (variance + bound * s / 3.0)))


def poisson_tail(n: int, lam: float) -> float:
    """P(N >= n) for N ~ Poisson(lam), summed term by term from n up (so a tiny tail keeps its digits)."""
    if n <= 0:
        return 1.0
    if lam <= 0:
        return 0.0
    term = math.exp(-lam + n * math.log(lam) - math.lgamma(n + 1))
    total = 0.0
    k = n
    while term > total * 1e-16 and k < n + 10_000:
        total += term
        k += 1
        term *= lam / k
    return min(1.0, total)


# for temperatures of 1 or more the tail bound needs the vocabulary's size: this covers every model
# k26ctl serves (Kimi K2 163,840 tokens; Qwen3 151,936; Llama 3 128,256)
MAX_VOCAB = 262_144


def _tail_bound(known: dict[int, float], t: float, log_z: float) -> float:
    """An upper bound on the share, at temperature t, of the tokens outside `known` (raw log-probs).

    Their raw mass is m = 1 - sum(known); each has raw probability at most q = the smallest known. At
    t < 1 their scaled weight sum(p^(1/t)) is at most m q^(1/t - 1); at t >= 1 (p^(1/t) concave) at most
    m^(1/t) n^(1 - 1/t) for n <= MAX_VOCAB tokens. Divided by the known tokens' own sum Z (itself a lower
    bound on the whole sum), that bounds their share."""
    mass = max(0.0, 1.0 - sum(math.exp(v) for v in known.values()))
    if mass <= 0.0:
        return 0.0
    if t < 1.0:
        smallest = min(known.values())
        log_weight = math.log(mass) + (1.0 / t - 1.0) * smallest
    else:
        log_weight = math.log(mass) / t + (1.0 - 1.0 / t) * math.log(MAX_VOCAB)
    return min(1.0, math.exp(log_weight - log_z))


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def score_answer(
    answer: SampledAnswer,
    rescored: list[tuple[float | None, list[tuple[float, int]] | None]],
    rule: RescoreRule,
) -> AnswerRescore:
    """Judge one answer from its rescoring: `rescored[k]` is (raw log-probability of output token k,
    the top K raw (logprob, id) at its position)."""
    t = answer.temperature
    out = AnswerRescore(
        answer.prompt_id, answer.attempt, t, decode_reported=answer.decode_logprobs is not None
    )
    log_eps = math.log(rule.epsilon)
    bound = abs(rule.floor)
    for k, (raw, top) in enumerate(rescored):
        if raw is None or not top or k >= len(answer.output_ids):
            continue
        token = answer.output_ids[k]
        known = dict((i, v) for v, i in top)
        known.setdefault(token, raw)
        lse = _logsumexp([v / t for v in known.values()])  # log Z over the known tokens
        tail = _tail_bound(known, t, lse)  # the most the unseen tokens can weigh at temperature T
        logp = {i: v / t - lse for i, v in known.items()}  # an upper bound on each log p_T
        lower = math.log1p(-tail) if tail < 1.0 else -math.inf  # log p_T lies in [logp + lower, logp]
        mine = logp[token]
        out.tokens += 1
        if answer.decode_logprobs is not None and k < len(answer.decode_logprobs):
            decoded = answer.decode_logprobs[k]
            if decoded is not None:  # the distance from the decode value to the rescored interval
                diff = max(0.0, decoded - mine, (mine + lower) - decoded)
                out.max_diff = max(out.max_diff, diff)
                out.diff_tokens += diff > rule.max_token_diff
        # very unlikely tokens (surely: even the upper bound is under epsilon), against the most a
        # correct sampler would draw of them here (every known token that may be under epsilon, at its
        # upper bound, and the whole tail)
        out.low_expected += tail + sum(math.exp(v) for v in logp.values() if v + lower < log_eps)
        if mine < log_eps:
            out.low_tokens += 1
            out.first_low = k if out.first_low is None else out.first_low
        # departures from a sure top token: the top's p_T at its lower bound, so 1 - p_T(top) (the
        # chance a correct sampler leaves it) at its upper bound; a position is sure on that bound
        top_token = max(logp, key=lambda i: logp[i])
        leave = 1.0 - math.exp(logp[top_token] + lower)
        if leave < rule.delta:
            out.departures_expected += leave
            if token != top_token and logp[token] < logp[top_token]:
                out.departures += 1
                out.first_departure = k if out.first_departure is None else out.first_departure
        # clipped surprise over the known tokens renormalised to 1 - tail; the tail at the floor, which
        # can only raise the expectation (S is biased low by at most tail x |floor|: the slack)
        weights = {i: math.exp(v) * (1.0 - tail) for i, v in logp.items()}
        clipped = {i: max(v, rule.floor) for i, v in logp.items()}
        mean = sum(weights[i] * c for i, c in clipped.items()) + tail * rule.floor
        second = sum(weights[i] * c * c for i, c in clipped.items()) + tail * rule.floor**2
        out.surprise += clipped[token] - mean
        out.variance += max(0.0, second - mean * mean)
        out.slack += tail * bound
    return out


@dataclass
class RescoreReport:
    supported: bool
    flushed: bool = False
    answers: list[AnswerRescore] = field(default_factory=list)
    rule: RescoreRule = field(default_factory=RescoreRule)
    note: str | None = None
    elapsed: float = 0.0  # flush and rescoring
    redrawn: int = 0  # of the answers, how many the probes drew themselves (paired redraws)
    redraw_seconds: float = 0.0

    @property
    def tokens(self) -> int:
        return sum(a.tokens for a in self.answers)

    @property
    def low_tokens(self) -> int:
        return sum(a.low_tokens for a in self.answers)

    @property
    def low_expected(self) -> float:
        return sum(a.low_expected for a in self.answers)

    @property
    def low_tail(self) -> float:
        """How likely a correct sampler draws this many very unlikely tokens (or more)."""
        return poisson_tail(self.low_tokens, self.low_expected)

    @property
    def departures(self) -> int:
        return sum(a.departures for a in self.answers)

    @property
    def departures_expected(self) -> float:
        return sum(a.departures_expected for a in self.answers)

    @property
    def departure_tail(self) -> float:
        """How likely a correct sampler leaves a sure top token this often (or more)."""
        return poisson_tail(self.departures, self.departures_expected)

    @property
    def surprise_z(self) -> float:
        """The run's z over all its sampled tokens."""
        variance = sum(a.variance for a in self.answers)
        total = sum(a.surprise + a.slack for a in self.answers)
        return total / math.sqrt(variance) if variance > 0 else 0.0

    @property
    def surprise_run_tail(self) -> float:
        """Freedman's bound over all sampled tokens of the run."""
        variance = sum(a.variance for a in self.answers)
        total = sum(a.surprise + a.slack for a in self.answers)
        return freedman_tail(-total, variance, abs(self.rule.floor))

    @property
    def surprise_answer_tail(self) -> float:
        """The smallest per-answer Freedman bound."""
        return min((a.surprise_tail(abs(self.rule.floor)) for a in self.answers), default=1.0)

    def diff_failures(self) -> list[AnswerRescore]:
        return [a for a in self.answers if a.diff_tokens > self.rule.max_diff_tokens]

    def surprise_failures(self) -> list[AnswerRescore]:
        per_answer = self.rule.alpha / max(1, len(self.answers))
        return [a for a in self.answers if a.surprise_tail(abs(self.rule.floor)) < per_answer]

    @property
    def surprise_fails(self) -> bool:
        return bool(self.surprise_failures()) or self.surprise_run_tail < self.rule.alpha

    @property
    def passed(self) -> bool:
        return (
            not self.diff_failures()
            and self.low_tail >= self.rule.alpha
            and not self.surprise_fails
            and self.departure_tail >= self.rule.alpha
        )

    @property
    def verdict(self) -> str:
        if not self.supported:
            return "skipped"
        if not self.answers or not self.tokens:
            return "skipped"
        if not self.passed:
            return "fail"
        return "pass" if self.flushed else "weak-pass"

    def summary(self) -> str:
        if self.verdict == "skipped":
            return f"rescoring skipped: {self.note or 'no sampled answer to rescore'}"
        return (
            f"rescoring {self.verdict}: {self.tokens} sampled tokens, {self.low_tokens} under "
            f"p={self.rule.epsilon:g} (a correct sampler: {self.low_expected:.2f} expected, "
            f"P={self.low_tail:.2g}), surprise z {self.surprise_z:.1f} (P={self.surprise_run_tail:.2g}; "
            f"lowest answer {min((a.z for a in self.answers), default=0.0):.1f}, "
            f"P={self.surprise_answer_tail:.2g}), {self.departures} departures from a "
            f"top token over p={1 - self.rule.delta:g} ({self.departures_expected:.2f} expected, "
            f"P={self.departure_tail:.2g}), "
            f"{sum(a.diff_tokens for a in self.answers)} decode/rescore differences over "
            f"{self.rule.max_token_diff:g} nats"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "supported": self.supported,
            "verdict": self.verdict,
            "flushed": self.flushed,
            "note": self.note,
            "tokens": self.tokens,
            "low_tokens": self.low_tokens,
            "low_expected": round(self.low_expected, 4),
            "low_tail": self.low_tail,
            "surprise_z": round(self.surprise_z, 3),
            "surprise_run_tail": self.surprise_run_tail,
            "surprise_answer_tail": self.surprise_answer_tail,
            "departures": self.departures,
            "departures_expected": round(self.departures_expected, 4),
            "departure_tail": self.departure_tail,
            "elapsed_s": round(self.elapsed, 3),
            "redrawn": self.redrawn,
            "redraw_s": round(self.redraw_seconds, 3),
            "rule": {
                "max_token_diff": self.rule.max_token_diff,
                "max_diff_tokens": self.rule.max_diff_tokens,
                "epsilon": self.rule.epsilon,
                "floor": round(self.rule.floor, 4),
                "alpha": self.rule.alpha,
                "delta": self.rule.delta,
            },
            "answers": [
                {
                    "prompt_id": a.prompt_id,
                    "attempt": a.attempt,
                    "temperature": a.temperature,
                    "tokens": a.tokens,
                    "diff_tokens": a.diff_tokens,
                    "max_diff": round(a.max_diff, 4),
                    "decode_reported": a.decode_reported,
                    "low_tokens": a.low_tokens,
                    "low_expected": round(a.low_expected, 4),
                    "first_low": a.first_low,
                    "departures": a.departures,
                    "departures_expected": round(a.departures_expected, 4),
                    "first_departure": a.first_departure,
                    "surprise": round(a.surprise, 3),
                    "variance": round(a.variance, 3),
                    "z": round(a.z, 3),
                    "surprise_tail": a.surprise_tail(abs(self.rule.floor)),
                }
                for a in self.answers
            ],
        }


def skipped(note: str) -> RescoreReport:
    return RescoreReport(supported=False, note=note)


def run_rescoring(
    client: RescoreClient,
    answers: Sequence[SampledAnswer],
    concurrency: int,
    rule: RescoreRule | None = None,
    flush: bool = True,
    flush_timeout: float = FLUSH_TIMEOUT_S,
) -> RescoreReport:
    """Flush the prefix cache, then rescore every sampled answer with one prefill request."""
    started = time.monotonic()
    report = RescoreReport(supported=True, rule=rule or RescoreRule())
    answers = [a for a in answers if a.output_ids and a.prompt_ids]
    if flush:
        report.flushed, message = client.flush_cache(flush_timeout)
        if not report.flushed:
            report.note = f"the server refused to flush its prefix cache: {message}"
    else:
        report.note = "the prefix cache was not flushed"

    def rescore(answer: SampledAnswer) -> AnswerRescore:
        ids = answer.prompt_ids + answer.output_ids
        got = client.prompt_logprobs(ids, len(answer.prompt_ids) - 1, TOP_K)
        # entry 0 is the last prompt token (no log-probability); entry k + 1 is output token k
        return score_answer(answer, got[1:], report.rule)

    with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="rescore") as pool:
        report.answers = list(pool.map(rescore, answers))
    report.elapsed = time.monotonic() - started
    return report
