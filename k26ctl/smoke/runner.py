"""Run a smoke suite against a live server and judge every answer.

Each prompt runs at every temperature of the suite; temperature-0 requests run twice (determinism).
Requests are sent from a thread pool so that at least two are in flight at once: one variant of the
speculative-verify mask bug only corrupts the second request of a batch.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from k26ctl.errors import ConfigError, UnreachableError
from k26ctl.smoke.baseline import (
    Baseline,
    BaselineComparison,
    BaselineEntry,
    compare,
    first_divergence,
    joined,
)
from k26ctl.smoke.checks import run_checks
from k26ctl.smoke.client import ResponseError, SGLangClient, avg_accept_length, server_identity
from k26ctl.smoke.detectors import Finding, score_text
from k26ctl.smoke.report import RequestResult, SmokeReport
from k26ctl.smoke.suite import PromptSpec, Suite, load_suite

# Below this many generated tokens an accept length says little (a short answer may end in one step).
_MIN_TOKENS_FOR_ACCEPT = 16


@dataclass(frozen=True)
class SmokeTarget:
    base_url: str
    model: str | None = None
    api_key: str | None = None


@dataclass
class SmokeOptions:
    # A GPU server batches 8 short requests at little extra cost, so the whole suite takes about as long
    # as its longest request; 2 is the floor (one variant of the mask bug needs 2 in flight).
    concurrency: int = 8
    baseline: Baseline | str | Path | None = None
    min_accept_length: float | None = None
    timeout: float = 120.0
    min_exact_match: float = 1.0
    record_baseline: str | Path | None = None
    expectations: bool = True
    determinism: bool | None = None  # None: as the suite says
    # An accept length at or below this is a collapse (drafts are almost all rejected). None: a quarter
    # of the way from 1.0 to the longest possible accept length the server reports (at least 1.25).
    accept_collapse: float | None = None
    on_result: Callable[[RequestResult], None] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class _Job:
    prompt: PromptSpec
    temperature: float
    attempt: int


def _plan(suite: Suite, determinism: bool) -> list[_Job]:
    jobs: list[_Job] = []
    for prompt in suite.prompts:
        for temperature in suite.temperatures_for(prompt):
            jobs.append(_Job(prompt, temperature, 0))
            if determinism and temperature == 0:
                jobs.append(_Job(prompt, temperature, 1))
    # Longest requests first, so the pool is not left waiting on one long generation at the end.
    return sorted(jobs, key=lambda j: -j.prompt.max_tokens)


def _prefixed(findings: list[Finding], prefix: str) -> list[Finding]:
    return [dataclasses.replace(f, detector=f"{prefix}{f.detector}") for f in findings]


def _judge(result: RequestResult, job: _Job, suite: Suite, options: SmokeOptions, collapse: float) -> None:
    prompt = job.prompt
    findings: list[Finding] = []
    prompt_text = prompt.prompt_text()
    thinking_ran_out = (
        not result.text.strip() and bool(result.reasoning.strip()) and result.finish_reason == "length"
    )
    verdict = score_text(
        result.text, prompt=prompt_text, kind=prompt.kind, finish_reason=result.finish_reason
    )
    for f in verdict.findings:
        if f.detector == "empty" and thinking_ran_out:
            f = dataclasses.replace(
                f, severity="warn", message="no answer: thinking used the whole token limit"
            )
        findings.append(f)
    if prompt.check_reasoning and result.reasoning.strip():
        reasoning_finish = result.finish_reason if thinking_ran_out else None
        rv = score_text(
            result.reasoning, prompt=prompt_text, kind="reasoning", finish_reason=reasoning_finish
        )
        findings += _prefixed(rv.findings, "reasoning.")
    if suite.expectations and options.expectations and prompt.expect:
        findings += run_checks(prompt.expect, result.text, result.completion_tokens)
    findings += _speculative_findings(result, options, collapse)
    findings += _length_findings(result, prompt.max_tokens)
    ignored = set(prompt.ignore)
    result.findings = [f for f in findings if f.detector.removeprefix("reasoning.") not in ignored]


# No tokenizer produces more characters per token than this for text a model would write.
_MAX_CHARS_PER_TOKEN = 64


def _length_findings(result: RequestResult, max_tokens: int) -> list[Finding]:
    """A server that ignores max_tokens is broken too (and can flood the client)."""
    size = len(result.text) + len(result.reasoning)
    tokens = result.completion_tokens
    if (tokens is not None and tokens > max_tokens) or size > max_tokens * _MAX_CHARS_PER_TOKEN:
        shown = f"{tokens} tokens" if tokens is not None and tokens > max_tokens else f"{size} characters"
        return [
            Finding(
                "over_length",
                float(tokens or size),
                float(max_tokens),
                (0, size),
                "",
                f"{shown} returned for max_tokens={max_tokens}: the limit was not honoured",
            )
        ]
    return []


_MIN_COLLAPSE = 1.25
_COLLAPSE_SHARE = 0.25
_STEP_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "MTP")


def _server_args(info: dict[str, Any] | None) -> dict[str, Any]:
    if not info:
        return {}
    nested = info.get("server_args")
    return {**info, **nested} if isinstance(nested, dict) else dict(info)


def is_speculative(info: dict[str, Any] | None) -> bool:
    algorithm = str(_server_args(info).get("speculative_algorithm") or "").upper()
    return algorithm not in ("", "NONE")


def collapse_threshold(info: dict[str, Any] | None) -> float:
    """Accept length below which speculation has collapsed: a quarter of the way from 1.0 (nothing
    accepted) to the longest accept length the configuration allows (steps + 1 for EAGLE-style
    chains; the draft block for DFlash/DDTree, whose depth is block size - 1)."""
    args = _server_args(info)
    algorithm = str(args.get("speculative_algorithm") or "").upper()
    longest: Any = None
    if algorithm in _STEP_ALGORITHMS and isinstance(args.get("speculative_num_steps"), int):
        longest = args["speculative_num_steps"] + 1
    else:
        longest = args.get("speculative_num_draft_tokens") or args.get("speculative_dflash_block_size")
    if not isinstance(longest, (int, float)) or longest < 2:
        return _MIN_COLLAPSE
    return max(_MIN_COLLAPSE, 1.0 + _COLLAPSE_SHARE * (float(longest) - 1.0))


def _speculative_findings(result: RequestResult, options: SmokeOptions, collapse: float) -> list[Finding]:
    accept = result.accept_length
    if accept is None or (result.completion_tokens or 0) < _MIN_TOKENS_FOR_ACCEPT:
        return []
    return _accept_findings(
        accept, collapse, options.min_accept_length, "", "accept length", ": drafts are almost all rejected"
    )


def _accept_findings(
    value: float, collapse: float, floor: float | None, code_prefix: str, label: str, collapse_note: str = ""
) -> list[Finding]:
    """At most one finding for an accept length: collapsed (at or below `collapse`), else under `floor`."""
    if value <= collapse:
        return [
            Finding(
                f"{code_prefix}accept_collapse",
                value,
                collapse,
                (0, 0),
                "",
                f"{label} {value:.2f} (collapse below {collapse:.2f}){collapse_note}",
            )
        ]
    if floor is not None and value < floor:
        return [
            Finding(
                f"{code_prefix}accept_floor",
                value,
                floor,
                (0, 0),
                "",
                f"{label} {value:.2f} below the floor {floor:.2f}",
            )
        ]
    return []


def _send(client: SGLangClient, job: _Job, suite: Suite, model: str) -> RequestResult:
    prompt = job.prompt
    result = RequestResult(prompt.id, prompt.kind, prompt.api, job.temperature, job.attempt)
    kwargs = {**suite.chat_template_kwargs, **(prompt.chat_template_kwargs or {})}
    try:
        if prompt.api == "generate":
            c = client.generate(
                prompt.prompt or "",
                temperature=job.temperature,
                max_new_tokens=prompt.max_tokens,
                top_p=suite.top_p if job.temperature > 0 else None,
                seed=suite.seed if job.temperature > 0 else None,
            )
        else:
            c = client.chat(
                prompt.chat_messages(),
                model=model,
                temperature=job.temperature,
                max_tokens=prompt.max_tokens,
                top_p=suite.top_p if job.temperature > 0 else None,
                seed=suite.seed if job.temperature > 0 else None,
                chat_template_kwargs=kwargs or None,
            )
    except ResponseError as exc:
        result.error = str(exc)
        return result
    result.text, result.reasoning = c.text, c.reasoning
    result.finish_reason, result.completion_tokens, result.elapsed = (
        c.finish_reason,
        c.completion_tokens,
        c.elapsed,
    )
    if c.verify_ct:  # zero or absent: the server does not decode speculatively
        result.accept_length, result.verify_ct = c.accept_length, c.verify_ct
    return result


def _run_jobs(
    client: SGLangClient,
    jobs: list[_Job],
    suite: Suite,
    model: str,
    options: SmokeOptions,
    concurrency: int,
    collapse: float,
) -> list[tuple[_Job, RequestResult]]:
    done: list[tuple[_Job, RequestResult]] = []
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="smoke") as pool:
        futures: dict[Future[RequestResult], _Job] = {
            pool.submit(_send, client, j, suite, model): j for j in jobs
        }
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                exc = future.exception()
                if isinstance(exc, UnreachableError):
                    for other in pending:
                        other.cancel()
                    raise UnreachableError(
                        f"server stopped answering during the suite "
                        f"after {len(done)} of {len(jobs)} requests: {exc.message}",
                        exc.hint,
                    ) from None
                if exc is not None:
                    for other in pending:
                        other.cancel()
                    raise exc
                result = future.result()
                _judge(result, futures[future], suite, options, collapse)
                done.append((futures[future], result))
                if options.on_result is not None:
                    options.on_result(result)
    return done


def _determinism_findings(pairs: list[tuple[_Job, RequestResult]]) -> None:
    """Attach a finding to the second temperature-0 answer when it differs from the first."""
    first: dict[str, RequestResult] = {}
    second: dict[str, RequestResult] = {}
    for job, result in pairs:
        if job.temperature == 0 and result.error is None:
            (first if job.attempt == 0 else second)[job.prompt.id] = result
    for prompt_id, again in second.items():
        original = first.get(prompt_id)
        if original is None:
            continue
        a, b = joined(original.text, original.reasoning), joined(again.text, again.reasoning)
        where = first_divergence(a, b)
        if where is not None:
            again.findings.append(
                Finding(
                    "nondeterministic",
                    float(where),
                    0.0,
                    (where, where + 1),
                    b[max(0, where - 10) : where + 20],
                    f"the same temperature-0 request answered differently from character {where}",
                )
            )


def _load_baseline(value: Baseline | str | Path | None) -> Baseline | None:
    if value is None or isinstance(value, Baseline):
        return value
    return Baseline.load(value)


def run_smoke(
    target: SmokeTarget, suite: Suite | None = None, *, options: SmokeOptions | None = None
) -> SmokeReport:
    """Run `suite` (default: the shipped default suite) against `target`.

    Raises UnreachableError when the server cannot be reached or stops answering mid-suite, and
    ConfigError for a bad baseline file. Every other problem is a finding in the report.
    """
    options = options or SmokeOptions()
    suite = suite or load_suite("default")
    baseline = _load_baseline(options.baseline)
    if options.record_baseline is not None and baseline is not None:
        raise ConfigError(
            "--baseline and --record-baseline cannot be used together", "record first, compare later"
        )
    concurrency = max(2, options.concurrency)
    determinism = suite.determinism if options.determinism is None else options.determinism
    started = time.monotonic()
    with SGLangClient(target.base_url, target.api_key, options.timeout) as client:
        model = target.model
        if model is None:
            try:
                names = client.model_names()
            except ResponseError as exc:
                raise UnreachableError(
                    f"{target.base_url}: cannot read the model name from /v1/models ({exc})",
                    "pass --model NAME, or check that the server finished loading",
                ) from None
            if not names:
                raise UnreachableError(f"{target.base_url}/v1/models lists no model", "is the model loaded?")
            model = names[0]
        info_before = client.server_info()
        collapse = options.accept_collapse or collapse_threshold(info_before)
        jobs = _plan(suite, determinism)
        pairs = _run_jobs(client, jobs, suite, model, options, concurrency, collapse)
        try:
            info_after = client.server_info()
        except UnreachableError as exc:
            raise UnreachableError(
                f"server stopped answering after the suite's {len(jobs)} answers: {exc.message}",
                exc.hint,
            ) from None
    _determinism_findings(pairs)
    keys = [(p.id, t) for p in suite.prompts for t in suite.temperatures_for(p)]
    order = {key: i for i, key in enumerate(keys)}
    pairs.sort(key=lambda jr: (order[(jr[0].prompt.id, jr[0].temperature)], jr[0].attempt))
    results = [r for _, r in pairs]

    report = SmokeReport(
        base_url=target.base_url,
        model=model,
        suite=suite.name,
        concurrency=concurrency,
        results=results,
        server_identity=server_identity(info_after or info_before, model),
        server_accept_before=avg_accept_length(info_before),
        server_accept_after=avg_accept_length(info_after),
        min_accept_length=options.min_accept_length,
    )
    if is_speculative(info_after or info_before) or report.server_accept_after:
        report.suite_findings += _server_accept_findings(report, options, collapse)
    greedy = {
        job.prompt.id: r for job, r in pairs if job.temperature == 0 and job.attempt == 0 and r.error is None
    }
    if baseline is not None:
        report.baseline = _compare_baseline(baseline, greedy, options, report)
    report.wall_seconds = time.monotonic() - started
    if options.record_baseline is not None:
        _record_baseline(report, greedy, suite, options.record_baseline)
    return report


def _server_accept_findings(report: SmokeReport, options: SmokeOptions, collapse: float) -> list[Finding]:
    avg = report.server_accept_after
    if avg is None or avg <= 0:  # 0.0: the server has not verified any draft (or does not speculate)
        return []
    return _accept_findings(
        avg, collapse, options.min_accept_length, "server_", "/server_info avg_spec_accept_length"
    )


def _compare_baseline(
    baseline: Baseline, greedy: dict[str, RequestResult], options: SmokeOptions, report: SmokeReport
) -> BaselineComparison:
    current = {pid: joined(r.text, r.reasoning) for pid, r in greedy.items()}
    comparison = compare(baseline, current, options.min_exact_match)
    recorded_model = baseline.identity.get("model")
    if recorded_model and recorded_model != report.model:
        report.suite_findings.append(
            Finding(
                "baseline_identity",
                0.0,
                0.0,
                (0, 0),
                "",
                f"baseline was recorded on model {recorded_model!r}, this server runs {report.model!r}",
                severity="warn",
            )
        )
    if not comparison.passed:
        report.suite_findings.append(
            Finding(
                "baseline_parity",
                comparison.exact_match_rate,
                comparison.min_exact_match,
                (0, 0),
                "",
                f"{comparison.exact_match_rate:.0%} of temperature-0 answers match the baseline exactly "
                f"(need {comparison.min_exact_match:.0%})",
            )
        )
    return comparison


def _record_baseline(
    report: SmokeReport, greedy: dict[str, RequestResult], suite: Suite, path: str | Path
) -> None:
    if not report.passed:
        report.suite_findings.append(
            Finding(
                "baseline_not_recorded",
                0.0,
                0.0,
                (0, 0),
                "",
                f"the run failed, so no baseline was written to {path}",
                severity="warn",
            )
        )
        return
    max_tokens = {p.id: p.max_tokens for p in suite.prompts}
    entries = {
        pid: BaselineEntry(pid, r.text, r.reasoning, max_tokens.get(pid)) for pid, r in sorted(greedy.items())
    }
    Baseline(report.server_identity, suite.name, entries).save(path)
    report.baseline_recorded = str(path)
