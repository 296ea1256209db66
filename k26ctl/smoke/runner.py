"""Run a smoke suite against a live server and judge every answer.

Each prompt runs at every temperature of the suite; temperature-0 requests run twice (determinism).
Requests are sent from a thread pool so that at least two are in flight at once: one variant of the
speculative-verify mask bug only corrupts the second request of a batch.

When the server speaks token ids (/v1/tokenize and /generate with `input_ids`/`output_ids`), the
temperature-0 requests go through /generate with the chat template's ids, and after the suite the
greedy self-consistency probes (smoke/probes.py) check every such answer against the server's own
plain prefill. Repeated temperature-0 answers may then diverge after a near tie and still pass, when
both are self-consistent and not degenerate; exact equality is demanded only of a server running
--enable-deterministic-inference.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from k26ctl.errors import ConfigError, UnreachableError
from k26ctl.lossy_levers import levers as lossy_levers
from k26ctl.smoke.accept_memory import AcceptMemory
from k26ctl.smoke.acceptance import AcceptRule, PriorAccept, request_findings, rule_for, suite_findings
from k26ctl.smoke.acceptance import server_args as _server_args
from k26ctl.smoke.baseline import (
    NEAR_TIE_MARGIN,
    Baseline,
    BaselineComparison,
    BaselineEntry,
    compare,
    first_divergence,
    joined,
)
from k26ctl.smoke.checks import run_checks, structured_checks
from k26ctl.smoke.client import ResponseError, SGLangClient, avg_accept_length, server_identity
from k26ctl.smoke.detectors import Finding, score_text
from k26ctl.smoke.probes import DEFAULT_POSITIONS, ProbeAnswer, ProbeReport, run_probes, skipped
from k26ctl.smoke.report import RequestResult, SmokeReport
from k26ctl.smoke.rescoring import RescoreReport, SampledAnswer, run_rescoring
from k26ctl.smoke.rescoring import skipped as rescoring_skipped
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
    # baseline parity: a first differing token whose baseline top-2 margin is within this is a near tie
    near_tie_margin: float = NEAR_TIE_MARGIN
    record_baseline: str | Path | None = None
    expectations: bool = True
    determinism: bool | None = None  # None: as the suite says
    # What the same configuration accepted on this server before (deploy: the host's history). A run
    # that collapsed against it fails; without it a low accept length is only a warning.
    prior_accept: PriorAccept | None = None
    # smoke --url: the local record of earlier runs, read for the prior and written after a pass
    accept_memory: AcceptMemory | None = None
    # greedy self-consistency probes after the suite (when the server supports them)
    probes: bool = True
    probe_positions: int = DEFAULT_POSITIONS
    # rescoring probes for sampled answers. None: with the greedy probes, but not asked of a DDTree
    # server (see DDTREE_LOGPROB_NOTE); True asks any server, False never
    rescoring: bool | None = None
    # the rescoring probes draw every sampled prompt this many times more, the copies of a prompt in
    # flight together (0: only the suite's own sampled answers are rescored)
    rescoring_redraws: int = 2
    # lossy-by-design settings the server runs with fail the run instead of warning (smoke.lossless)
    lossless_strict: bool = False
    # the service's environment as the unit sets it (after a deploy), for SGLANG_SIMULATE_ACC_LEN
    unit_environment: dict[str, str] | None = None
    # Asked right before the probes: None (or True) flushes the prefix cache first; a string is why
    # not (a long-running watcher never flushes the cache of a server that is serving others).
    probe_flush: Callable[[], str | None] | None = field(default=None, repr=False)
    on_result: Callable[[RequestResult], None] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class _Structured:
    """How structured prompts are sent and judged on this server (from /server_info)."""

    # why tool calls cannot be checked (None: the server runs a tool-call parser, or did not say)
    no_tool_parser: str | None = None
    # a grammar backend runs and the algorithm accepts constrained requests: send response_format
    grammar: bool = False


def structured_traits(info: dict[str, Any] | None) -> _Structured:
    """A server that says it runs no --tool-call-parser cannot answer tools with tool_calls; one
    without /server_info is asked anyway and judged on what it sends. `response_format` goes only to a
    GPU server with a grammar backend whose algorithm takes constrained requests: DDTree refuses them
    inside its worker (docs/conformance.md), DFlash before 0.5.23 at admission (0.5.15
    speculative/dflash_utils.py:776-792; 0.5.23's check no longer names grammars), `--grammar-backend
    none` turns grammars off, and on the CPU 0.5.15's xgrammar cannot apply its mask: the scheduler
    raises "Unsupported device: cpu" (constrained/xgrammar_backend.py:123) and the server dies (seen
    on the lab's real CPU server)."""
    args = _server_args(info)
    no_parser = None
    if info is not None and not args.get("tool_call_parser"):
        no_parser = "the server runs without --tool-call-parser (sglang.tool_call_parser)"
    backend = str(args.get("grammar_backend") or "none").lower()
    device = str(args.get("device") or "").lower()
    algorithm = _algorithm(info)
    refuses = algorithm == "DDTREE" or (algorithm == "DFLASH" and _release(info) < (0, 5, 23))
    grammar = info is not None and backend != "none" and device != "cpu" and not refuses
    return _Structured(no_parser, grammar)


def _release(info: dict[str, Any] | None) -> tuple[int, ...]:
    """The server's release as numbers ((0,) when unknown: treated as the oldest)."""
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", str((info or {}).get("version") or ""))
    return tuple(int(x) for x in match.groups()) if match else (0,)


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


def _judge(result: RequestResult, job: _Job, suite: Suite, options: SmokeOptions, rule: AcceptRule) -> None:
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
        if f.detector == "empty" and result.tool_calls is not None:
            continue  # the parser found a call section: SGLang keeps only the text before it as content
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
        expected = run_checks(prompt.expect, result.text, result.completion_tokens)
        if result.error is None:
            expected += structured_checks(prompt, result.text, result.tool_calls, result.finish_reason)
        findings += expected if job.temperature == 0 else [_sampled(f, job.temperature) for f in expected]
    findings += _speculative_findings(result, rule)
    findings += _length_findings(result, prompt.max_tokens)
    findings += _unicode_findings(result)
    ignored = set(prompt.ignore)
    result.findings = [f for f in findings if f.detector.removeprefix("reasoning.") not in ignored]


def _sampled(finding: Finding, temperature: float) -> Finding:
    """A sampled answer that misses its expectation is reported, not failed: a real server draws it anew
    on every run (SGLang honours a request's seed only under --enable-deterministic-inference), so such
    a verdict would be chance. Temperature-0 answers carry the expectation; the detectors judge both."""
    if finding.severity != "fail":
        return finding
    note = f" (sampled at temperature {temperature:g}: reported, judged at temperature 0 only)"
    return dataclasses.replace(finding, severity="warn", message=finding.message + note)


def _unicode_findings(result: RequestResult) -> list[Finding]:
    """Lone surrogate escapes ("\\ud800") in an answer: no detokenizer writes them into a complete
    text, so the server (or a proxy before it) is emitting broken Unicode. The decoding layer already
    replaced them by U+FFFD, so the detectors judged the rest of the text as usual."""
    count = result.surrogates_replaced
    if not count:
        return []
    return [
        Finding(
            "invalid_unicode",
            float(count),
            0.0,
            (0, len(result.text)),
            "",
            f"{count} lone surrogate escape{'s' if count != 1 else ''} in the answer's JSON: "
            "not valid Unicode (shown as U+FFFD)",
        )
    ]


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


def is_speculative(info: dict[str, Any] | None) -> bool:
    algorithm = str(_server_args(info).get("speculative_algorithm") or "").upper()
    return algorithm not in ("", "NONE")


def _speculative_findings(result: RequestResult, rule: AcceptRule) -> list[Finding]:
    accept = result.accept_length
    if accept is None or (result.completion_tokens or 0) < _MIN_TOKENS_FOR_ACCEPT:
        return []
    return request_findings(accept, rule)


_THINK_START, _THINK_END = "<think>", "</think>"


def split_think(text: str) -> tuple[str, str]:
    """(reasoning, content) of raw /generate text, in the `<think>...</think>` format of the reasoning
    parsers the profiles use (kimi_k2, qwen3, deepseek-r1). A template that opens the block in the prompt
    leaves only the closing tag in the output."""
    stripped = text.lstrip()
    if stripped.startswith(_THINK_START):
        body = stripped[len(_THINK_START) :]
        end = body.find(_THINK_END)
        return (body, "") if end == -1 else (body[:end], body[end + len(_THINK_END) :])
    end = text.find(_THINK_END)
    if end != -1:
        return text[:end], text[end + len(_THINK_END) :]
    return "", text


@dataclass(frozen=True)
class _TokenMode:
    """How temperature-0 requests are sent when the probes run: by token ids through /generate."""

    reasoning: bool  # the server splits reasoning (a reasoning parser is on): split the raw text too
    top_logprobs: int = 0  # recording a baseline: ask for the top-2 log-probabilities of every token
    # sampled requests go by ids too, with their decode log-probabilities, for the rescoring probes
    sampled: bool = False
    top_p: float | None = None
    seed: int | None = None


def _send_ids(client: SGLangClient, job: _Job, kwargs: dict[str, Any], mode: _TokenMode) -> RequestResult:
    prompt = job.prompt
    result = RequestResult(prompt.id, prompt.kind, prompt.api, job.temperature, job.attempt)
    sampled = job.temperature > 0
    sampling: dict[str, Any] = {
        "temperature": job.temperature,
        "max_new_tokens": prompt.max_tokens,
        "top_logprobs": 0 if sampled else mode.top_logprobs,
        "logprobs": sampled,
        "top_p": mode.top_p if sampled else None,
        # a redraw (attempt n) gets a seed of its own, so its copies are not the same draw
        "seed": mode.seed + job.attempt if sampled and mode.seed is not None else None,
    }
    try:
        if prompt.api == "generate":
            tc = client.generate_tokens(text=prompt.prompt or "", **sampling)
        else:
            tools = [tool.to_request() for tool in prompt.tools] if prompt.tools else None
            ids = client.tokenize_chat(prompt.chat_messages(), kwargs or None, tools)
            tc = client.generate_tokens(input_ids=ids, **sampling)
    except ResponseError as exc:
        result.error = str(exc)
        return result
    c = tc.completion
    reasoning, text = ("", c.text)
    if prompt.api == "chat" and mode.reasoning:
        reasoning, text = split_think(c.text)
    result.text, result.reasoning = text, reasoning
    result.finish_reason, result.completion_tokens, result.elapsed = (
        c.finish_reason,
        c.completion_tokens,
        c.elapsed,
    )
    result.prompt_ids, result.output_ids = tc.prompt_ids, tc.output_ids
    result.surrogates_replaced = c.surrogates_replaced
    result.top2_margins = tc.top2_margins
    result.decode_logprobs = tc.logprobs if sampled else None
    if c.verify_ct:
        result.accept_length, result.verify_ct = c.accept_length, c.verify_ct
    return result


def _send(
    client: SGLangClient,
    job: _Job,
    suite: Suite,
    model: str,
    mode: _TokenMode | None = None,
    structured: _Structured | None = None,
) -> RequestResult:
    prompt = job.prompt
    kwargs = {**suite.chat_template_kwargs, **(prompt.chat_template_kwargs or {})}
    # tools and schemas are the chat endpoint's business (its parsers): never sent by token ids
    if mode is not None and (job.temperature == 0 or mode.sampled) and not prompt.structured:
        return _send_ids(client, job, kwargs, mode)
    result = RequestResult(prompt.id, prompt.kind, prompt.api, job.temperature, job.attempt)
    response_format = None
    if prompt.schema_ is not None and structured is not None and structured.grammar:
        response_format = {
            "type": "json_schema",
            "json_schema": {"name": prompt.id, "schema": prompt.schema_},
        }
        result.constrained = True
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
                tools=[tool.to_request() for tool in prompt.tools] if prompt.tools else None,
                response_format=response_format,
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
    result.surrogates_replaced = c.surrogates_replaced
    result.tool_calls = c.tool_calls
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
    rule: AcceptRule,
    mode: _TokenMode | None = None,
    structured: _Structured | None = None,
) -> list[tuple[_Job, RequestResult]]:
    done: list[tuple[_Job, RequestResult]] = []
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="smoke") as pool:
        futures: dict[Future[RequestResult], _Job] = {
            pool.submit(_send, client, j, suite, model, mode, structured): j for j in jobs
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
                _judge(result, futures[future], suite, options, rule)
                done.append((futures[future], result))
                if options.on_result is not None:
                    options.on_result(result)
    return done


def _greedy_pairs(
    pairs: list[tuple[_Job, RequestResult]],
) -> list[tuple[RequestResult, RequestResult]]:
    """(first, repeat) of every temperature-0 request that was sent twice and answered both times."""
    first: dict[str, RequestResult] = {}
    second: dict[str, RequestResult] = {}
    for job, result in pairs:
        if job.temperature == 0 and result.error is None:
            (first if job.attempt == 0 else second)[job.prompt.id] = result
    return [(first[pid], again) for pid, again in second.items() if pid in first]


def _token_divergence(a: list[int] | None, b: list[int] | None) -> int | None:
    if a is None or b is None:
        return None
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _determinism_findings(
    pairs: list[tuple[_Job, RequestResult]], strict: bool, probes: ProbeReport | None
) -> None:
    """Judge repeated temperature-0 answers that differ (the finding goes on the repeat).

    A server without --enable-deterministic-inference may answer differently after a near tie (batch
    shape, prefix-cache hits): that passes when both answers are self-consistent by the probes and not
    degenerate, and fails when either is not. With deterministic inference any difference fails.
    Without probes the difference cannot be vouched for: a warning says so."""
    for original, again in _greedy_pairs(pairs):
        a, b = joined(original.text, original.reasoning), joined(again.text, again.reasoning)
        where = first_divergence(a, b)
        if where is None:
            continue
        message = f"the same temperature-0 request answered differently from character {where}"
        severity: Literal["fail", "warn"] = "fail"
        if not strict:
            clean = [
                probes.answer_clean(r.prompt_id, r.attempt) if probes and probes.supported else None
                for r in (original, again)
            ]
            degenerate = not original.passed or not again.passed
            if degenerate:
                message += "; one of the answers failed its checks"
            elif None in clean:
                severity = "warn"
                message += " (not verified: the probes did not check both answers)"
            elif all(clean):
                severity = "warn"
                message += "; both continuations are self-consistent (a near tie, not a verify bug)"
            else:
                message += "; an answer is not self-consistent by the probes"
        else:
            message += " although the server runs --enable-deterministic-inference"
        again.findings.append(
            Finding(
                "nondeterministic",
                float(where),
                0.0,
                (where, where + 1),
                b[max(0, where - 10) : where + 20],
                message,
                severity=severity,
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
        info_problems: list[str] = []
        info_before = _server_info(client, info_problems)
        rule = rule_for(info_before, options.min_accept_length, _prior(options, target, info_before, model))
        # token ids serve the probes, and baseline parity by token (near ties) when a baseline is used
        rescore = options.probes if options.rescoring is None else options.rescoring
        has_sampled = any(t > 0 for p in suite.prompts for t in suite.temperatures_for(p))
        by_token = (
            options.probes
            or (rescore and has_sampled)
            or baseline is not None
            or options.record_baseline is not None
        )
        mode, probe_note = _token_mode(client, info_before) if by_token else (None, None)
        if mode is not None and options.record_baseline is not None:
            mode = dataclasses.replace(mode, top_logprobs=2)
        rescore_note: str | None = None
        if rescore and has_sampled:
            if mode is None:
                rescore_note = probe_note or "the server does not serve token ids"
            elif options.rescoring is None and _algorithm(info_before) == "DDTREE":
                rescore_note = DDTREE_LOGPROB_NOTE
            else:
                hello = client.tokenize_chat([{"role": "user", "content": "Hello"}], None)
                rescore_note = _logprob_refusal(client, hello)
                if rescore_note is None:
                    mode = dataclasses.replace(mode, sampled=True, top_p=suite.top_p, seed=suite.seed)
        structured = structured_traits(info_before)
        jobs = _plan(suite, determinism)
        unasked = sorted({j.prompt.id for j in jobs if j.prompt.tools and structured.no_tool_parser})
        jobs = [j for j in jobs if j.prompt.id not in unasked]
        generation_started = time.monotonic()
        pairs = _run_jobs(client, jobs, suite, model, options, concurrency, rule, mode, structured)
        generation_seconds = time.monotonic() - generation_started
        try:
            # before the probes' flush, which resets the server's running averages
            info_after = _server_info(client, info_problems)
        except UnreachableError as exc:
            raise UnreachableError(
                f"server stopped answering after the suite's {len(jobs)} answers: {exc.message}",
                exc.hint,
            ) from None
        probes: ProbeReport | None = None
        if mode is not None and options.probes:
            refusal = options.probe_flush() if options.probe_flush is not None else None
            probes = _run_probes(client, pairs, concurrency, options.probe_positions, refusal)
        elif options.probes:
            probes = skipped(probe_note or "not supported", options.probe_positions)
        rescoring: RescoreReport | None = None
        if rescore and has_sampled:
            if mode is not None and mode.sampled:
                refusal = options.probe_flush() if options.probe_flush is not None else None
                redraw_started = time.monotonic()
                redraws = _redraw(client, pairs, suite, model, mode, options.rescoring_redraws)
                redraw_seconds = time.monotonic() - redraw_started
                rescoring = _run_rescoring(client, pairs + redraws, concurrency, refusal)
                rescoring.redrawn, rescoring.redraw_seconds = len(redraws), redraw_seconds
            else:
                rescoring = rescoring_skipped(rescore_note or "the server does not return log-probabilities")
        health_after = client.health_status()
    strict = _deterministic(info_after or info_before)
    _determinism_findings(pairs, strict, probes)
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
        probes=probes,
        deterministic_server=strict,
        generation_seconds=generation_seconds,
        health_after=health_after,
    )
    for problem in dict.fromkeys(info_problems):
        report.suite_findings.append(
            Finding("server_info_shape", 0.0, 0.0, (0, 0), "", problem, severity="warn")
        )
    if probes is not None:
        report.suite_findings += _probe_findings(probes, results)
    report.rescoring = rescoring
    if rescoring is not None:
        report.suite_findings += _rescoring_findings(rescoring, results)
    served = lossy_levers(_server_args(info_after or info_before), options.unit_environment)
    report.lossy_levers = [lever.setting for lever in served]
    report.suite_findings += _lossy_findings(served, options.lossless_strict, options.unit_environment)
    if unasked:
        report.suite_findings.append(
            Finding(
                "tool_call_skipped",
                float(len(unasked)),
                0.0,
                (0, 0),
                "",
                f"tool-call prompts not asked ({', '.join(unasked)}): {structured.no_tool_parser}",
                severity="warn",
            )
        )
    report.requests_sent = client.requests_sent
    report.accept_rule = rule
    report.suite_findings += _measured_accept_findings(report, rule)
    greedy = {
        job.prompt.id: r for job, r in pairs if job.temperature == 0 and job.attempt == 0 and r.error is None
    }
    if baseline is not None:
        report.baseline = _compare_baseline(baseline, greedy, options, report)
    report.wall_seconds = time.monotonic() - started
    if options.record_baseline is not None:
        _record_baseline(report, greedy, suite, options.record_baseline)
    measured = report.measured_accept_length
    if options.accept_memory is not None and report.passed and measured is not None:
        options.accept_memory.remember(target.base_url, report.server_identity, measured)
    return report


def _prior(
    options: SmokeOptions, target: SmokeTarget, info: dict[str, Any] | None, model: str
) -> PriorAccept | None:
    if options.prior_accept is not None or options.accept_memory is None or not is_speculative(info):
        return options.prior_accept
    return options.accept_memory.prior(target.base_url, server_identity(info, model))


def _server_info(client: SGLangClient, problems: list[str]) -> dict[str, Any] | None:
    """/server_info, or None (with the reason kept for a finding) when its answer has the wrong shape."""
    try:
        return client.server_info()
    except ResponseError as exc:
        problems.append(str(exc))
        return None


def _deterministic(info: dict[str, Any] | None) -> bool:
    return bool(_server_args(info).get("enable_deterministic_inference"))


def _token_mode(client: SGLangClient, info: dict[str, Any] | None) -> tuple[_TokenMode | None, str | None]:
    """Whether the server speaks token ids (tokenize, then one /generate token from ids), and why not."""
    try:
        ids = client.tokenize_chat([{"role": "user", "content": "Hello"}], None)
        tc = client.generate_tokens(input_ids=ids, temperature=0.0, max_new_tokens=1)
    except ResponseError as exc:
        return None, f"the server does not serve token ids (/v1/tokenize, /generate input_ids): {exc}"
    if not tc.output_ids:
        return None, "the server's /generate returned no output_ids"
    return _TokenMode(reasoning=bool(_server_args(info).get("reasoning_parser"))), None


# The DDTree branch (PR #29907) refuses return_logprob inside its speculative worker, where an error
# can stop the scheduler (docs/conformance.md, "Both 0.5.15 and the PR reject return_logprob"); a
# release's DFlash refuses it at admission instead (0.5.15 managers/scheduler.py:2162-2168), which the
# preflight below reads as a named reason. So a DDTree server is not asked unless the user says so.
DDTREE_LOGPROB_NOTE = (
    "not asked: the DDTree branch refuses return_logprob inside its worker, which can stop the "
    "server; --rescoring (smoke.rescoring: true) asks anyway where its tree serves log-probabilities"
)


def _algorithm(info: dict[str, Any] | None) -> str:
    return str(_server_args(info).get("speculative_algorithm") or "").upper()


def _logprob_refusal(client: SGLangClient, ids: list[int]) -> str | None:
    """Why the server cannot serve the rescoring probes (None: it returns log-probabilities)."""
    try:
        client.prompt_logprobs(ids, max(0, len(ids) - 2), 2)
        tc = client.generate_tokens(input_ids=ids, temperature=0.0, max_new_tokens=1, logprobs=True)
    except ResponseError as exc:
        return f"the server does not return log-probabilities (return_logprob): {exc}"
    if tc.logprobs is None:
        return "the server's /generate answered return_logprob without output_token_logprobs"
    return None


def _run_probes(
    client: SGLangClient,
    pairs: list[tuple[_Job, RequestResult]],
    concurrency: int,
    n_positions: int,
    no_flush_reason: str | None = None,
) -> ProbeReport:
    extra: dict[tuple[str, int], tuple[int, ...]] = {}
    for original, again in _greedy_pairs(pairs):
        where = _token_divergence(original.output_ids, again.output_ids)
        if where is not None:  # check both continuations past the point where they part
            window = tuple(range(where, where + n_positions))
            extra[(original.prompt_id, 0)] = extra[(again.prompt_id, again.attempt)] = window
    answers = [
        ProbeAnswer(
            r.prompt_id, r.prompt_ids, r.output_ids, r.attempt, extra.get((r.prompt_id, r.attempt), ())
        )
        for job, r in pairs
        if job.temperature == 0 and r.error is None and r.prompt_ids is not None and r.output_ids
    ]
    report = run_probes(client, answers, concurrency, n_positions, flush=no_flush_reason is None)
    if no_flush_reason is not None:
        report.note = f"the prefix cache was not flushed: {no_flush_reason}"
    return report


def _redraw(
    client: SGLangClient,
    pairs: list[tuple[_Job, RequestResult]],
    suite: Suite,
    model: str,
    mode: _TokenMode,
    copies: int,
) -> list[tuple[_Job, RequestResult]]:
    """Every sampled prompt drawn `copies` more times, its copies sent together and the next prompt's
    only once they are all back: the copies share every verify pass, so a verify fault that strikes
    only one request of a batch (the second, the last...) lands on one of them, whichever prompt the
    suite happened to pair it with."""
    if copies <= 0:
        return []
    drawn: list[tuple[_Job, RequestResult]] = []
    sampled = [job for job, _ in pairs if job.temperature > 0 and job.attempt == 0]

    def draw(job: _Job) -> RequestResult:
        if not job.prompt.structured:
            return _send(client, job, suite, model, mode)
        # a tool-call or schema prompt is drawn by ids too (its tools in the chat template, no grammar):
        # the redraw is only rescored, so the raw call text is what the verify must have kept lossless
        kwargs = {**suite.chat_template_kwargs, **(job.prompt.chat_template_kwargs or {})}
        return _send_ids(client, job, kwargs, mode)

    with ThreadPoolExecutor(max_workers=max(2, copies), thread_name_prefix="redraw") as pool:
        for job in sampled:
            group = [_Job(job.prompt, job.temperature, job.attempt + n) for n in range(1, copies + 1)]
            drawn += zip(group, pool.map(draw, group), strict=True)
    return drawn


def _run_rescoring(
    client: SGLangClient,
    pairs: list[tuple[_Job, RequestResult]],
    concurrency: int,
    no_flush_reason: str | None = None,
) -> RescoreReport:
    answers = [
        SampledAnswer(r.prompt_id, r.attempt, job.temperature, r.prompt_ids, r.output_ids, r.decode_logprobs)
        for job, r in pairs
        if job.temperature > 0 and r.error is None and r.prompt_ids is not None and r.output_ids
    ]
    if not answers:
        return rescoring_skipped("no sampled answer came back with its token ids")
    report = run_rescoring(client, answers, concurrency, flush=no_flush_reason is None)
    if no_flush_reason is not None:
        report.note = f"the prefix cache was not flushed: {no_flush_reason}"
    return report


def _rescoring_findings(rescoring: RescoreReport, results: list[RequestResult]) -> list[Finding]:
    """The sampled answers' rescoring: per-answer decode/rescore disagreements on the answers, the
    run-wide statistical evidence as suite findings, and a named reason when it could not run."""
    if rescoring.verdict == "skipped":
        return [
            Finding(
                "rescoring_skipped",
                0.0,
                0.0,
                (0, 0),
                "",
                f"sampled answers were not rescored: {rescoring.note or 'nothing to rescore'}",
                severity="warn",
            )
        ]
    findings: list[Finding] = []
    rule = rescoring.rule
    by_name = {(r.prompt_id, r.attempt, r.temperature): r for r in results if r.temperature > 0}
    for answer in rescoring.diff_failures():
        finding = Finding(
            "rescore_logprob_mismatch",
            float(answer.diff_tokens),
            float(rule.max_diff_tokens),
            (0, 0),
            "",
            f"{answer.diff_tokens} of {answer.tokens} sampled tokens carry a decode log-probability more "
            f"than {rule.max_token_diff:g} nats from the target's own prefill (largest "
            f"{answer.max_diff:.2f}): the verify pass computed other logits than the model",
        )
        result = by_name.get((answer.prompt_id, answer.attempt, answer.temperature))
        (result.findings if result is not None else findings).append(finding)
    if rescoring.low_tail < rule.alpha:
        worst = max(rescoring.answers, key=lambda a: a.low_tokens)
        findings.append(
            Finding(
                "rescore_unlikely_tokens",
                float(rescoring.low_tokens),
                rescoring.low_expected,
                (0, 0),
                "",
                f"{rescoring.low_tokens} of {rescoring.tokens} sampled tokens have target probability under "
                f"{rule.epsilon:g} where a correct sampler draws {rescoring.low_expected:.2f} on average "
                f"(P = {rescoring.low_tail:.2g}; most in {worst.name}, first at token {worst.first_low})",
            )
        )
    if rescoring.surprise_fails:
        bound = abs(rule.floor)
        worst = min(rescoring.answers, key=lambda a: a.surprise_tail(bound))
        findings.append(
            Finding(
                "rescore_surprise",
                worst.z,
                0.0,
                (0, 0),
                "",
                f"the sampled tokens are systematically less likely than a correct sampler's (z = "
                f"{rescoring.surprise_z:.1f} over the run, P = {rescoring.surprise_run_tail:.2g}; "
                f"{worst.z:.1f} in {worst.name}, P = {worst.surprise_tail(bound):.2g}): the server does "
                "not sample from the target model",
            )
        )
    if rescoring.departure_tail < rule.alpha:
        worst = max(rescoring.answers, key=lambda a: a.departures - a.departures_expected)
        findings.append(
            Finding(
                "rescore_departures",
                float(rescoring.departures),
                rescoring.departures_expected,
                (0, 0),
                "",
                f"{rescoring.departures} sampled tokens left a top token the target gives over "
                f"{1 - rule.delta:g} where a correct sampler leaves it {rescoring.departures_expected:.2f} "
                f"times on average (P = {rescoring.departure_tail:.2g}; most in {worst.name}, first at "
                f"token {worst.first_departure}): the server commits runner-ups the target would rarely draw",
            )
        )
    if not rescoring.flushed:
        findings.append(
            Finding(
                "rescoring_unflushed",
                0.0,
                0.0,
                (0, 0),
                "",
                f"{rescoring.note}; the rescoring may have reused KV the answers' verify passes wrote",
                severity="warn",
            )
        )
    return findings


def _lossy_findings(
    served: list[Any], strict: bool, unit_environment: dict[str, str] | None
) -> list[Finding]:
    """The lossy-by-design settings read back from the server (and the unit's environment)."""
    if not served:
        return []
    where = "/server_info" + (" and the unit's environment" if unit_environment is not None else "")
    shown = "; ".join(lever.describe() for lever in served)
    return [
        Finding(
            "lossy_by_design",
            float(len(served)),
            0.0,
            (0, 0),
            "",
            f"the server runs lossy-by-design settings (read from {where}): {shown}",
            severity="fail" if strict else "warn",
        )
    ]


def _probe_findings(probes: ProbeReport, results: list[RequestResult]) -> list[Finding]:
    """Per-answer self-consistency failures on the answers themselves; suite-level notes for the rest."""
    findings: list[Finding] = []
    if not probes.supported:
        return [
            Finding(
                "probes_skipped", 0.0, 0.0, (0, 0), "", f"probes did not run: {probes.note}", severity="warn"
            )
        ]
    by_name = {(r.prompt_id, r.attempt): r for r in results if r.temperature == 0}
    for answer in probes.failing_answers():
        first = answer.mismatches[0]
        result = by_name.get((answer.prompt_id, answer.attempt))
        finding = Finding(
            "self_consistency",
            float(len(answer.mismatches)),
            float(probes.rule.max_per_answer),
            (first.position, first.position + 1),
            "",
            f"{len(answer.mismatches)} of {answer.checked} probed tokens are not the server's own greedy "
            f"choice (first at token {first.position}): a verify bug, not a near tie",
        )
        if result is not None:
            result.findings.append(finding)
        else:
            findings.append(finding)
    count = len(probes.mismatches)
    if probes.rule.share_fails(count, probes.checked):
        findings.append(
            Finding(
                "self_consistency_share",
                count / probes.checked,
                probes.rule.max_share,
                (0, 0),
                "",
                f"{count} of {probes.checked} probed tokens are not the server's own greedy choice",
            )
        )
    if not probes.flushed:
        findings.append(
            Finding(
                "probes_unflushed",
                0.0,
                0.0,
                (0, 0),
                "",
                f"{probes.note}; the probes may have reused KV the answers' own verify passes wrote, so "
                "their pass is weaker evidence",
                severity="warn",
            )
        )
    return findings


def _measured_accept_findings(report: SmokeReport, rule: AcceptRule) -> list[Finding]:
    """The accept length of this run's own requests (meta_info), judged once for the whole suite."""
    measured = [r for r in report.results if r.verify_ct and r.completion_tokens]
    if sum(r.completion_tokens or 0 for r in measured) < _MIN_TOKENS_FOR_ACCEPT:
        return []
    value = report.measured_accept_length
    if value is None:
        return []
    return suite_findings(value, rule)


def _compare_baseline(
    baseline: Baseline, greedy: dict[str, RequestResult], options: SmokeOptions, report: SmokeReport
) -> BaselineComparison:
    current = {pid: joined(r.text, r.reasoning) for pid, r in greedy.items()}
    ids = {pid: r.output_ids for pid, r in greedy.items() if r.output_ids is not None}
    comparison = compare(baseline, current, options.min_exact_match, ids, options.near_tie_margin)
    probes = report.probes
    if probes is not None and probes.supported and probes.passed and not report.deterministic_server:
        consistent = tuple(
            p.prompt_id
            for p in comparison.prompts
            if not p.match
            and not p.missing
            and (p.baseline_margin is None or p.near_tie)  # a clear choice is a break, consistent or not
            and greedy[p.prompt_id].passed
            and probes.answer_clean(p.prompt_id, 0)
        )
        comparison = dataclasses.replace(comparison, self_consistent=consistent)
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
    ties = [p for p in comparison.prompts if p.near_tie]
    if ties:
        shown = ", ".join(
            f"{p.prompt_id} at token {p.first_token} (margin {p.baseline_margin:.3f})" for p in ties
        )
        report.suite_findings.append(
            Finding(
                "baseline_near_tie",
                float(len(ties)),
                comparison.near_tie_margin,
                (0, 0),
                "",
                f"differs from the baseline first at a near tie (the baseline's top two log-probabilities "
                f"within {comparison.near_tie_margin:g}), tolerated: {shown}",
                severity="warn",
            )
        )
    clear = [
        p for p in comparison.prompts if p.baseline_margin is not None and not p.near_tie and not p.match
    ]
    if clear and not comparison.passed:
        shown = ", ".join(
            f"{p.prompt_id} at token {p.first_token} (margin {p.baseline_margin:.2f})" for p in clear
        )
        report.suite_findings.append(
            Finding(
                "baseline_clear_divergence",
                float(len(clear)),
                comparison.near_tie_margin,
                (0, 0),
                "",
                f"differs from the baseline where the baseline's choice was clear: {shown}",
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
                f"{comparison.exact_match_rate:.0%} of temperature-0 answers match the baseline exactly, "
                f"{comparison.accepted_rate:.0%} with self-consistent divergences "
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
        pid: BaselineEntry(pid, r.text, r.reasoning, max_tokens.get(pid), r.output_ids, r.top2_margins)
        for pid, r in sorted(greedy.items())
    }
    Baseline(report.server_identity, suite.name, entries).save(path)
    report.baseline_recorded = str(path)
