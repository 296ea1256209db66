"""The load measurement of one deployed point: closed-loop streaming /generate at several concurrencies.

At each level, `concurrency` workers each send one request after another until `requests` have been
sent (or the level's time bound passes). Per request: time to first token (the first streamed chunk
that carries output), the gaps between later chunks (inter-token latency as SGLang's bench_serving
counts it: one gap per streamed chunk, so a verify step that commits four tokens is one gap), and
`completion_tokens / spec_verify_ct` from the final meta_info (the accept length of exactly this
request; /server_info's lifetime average would mix in the smoke run).

Output tokens/s of a level is `concurrency x median over requests of (completion tokens / request
latency)`: the steady-state rate of `concurrency` streams. A median, because a machine shared with
other work (or a hiccup of the SSH tunnel) stalls single requests for hundreds of ms, and one such
stall moves a wall-clock total by several per cent, more than the differences a sweep has to rank.
The wall-clock figure (all completion tokens over the time from the first send to the last finish)
is kept as `wall_output_tokens_per_s`.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from k26ctl import jsonsafe
from k26ctl.httpsafe import BoundedClient, HttpError, deadline_transport

# Lines are handed over as they arrive and never kept, so this caps the time and bandwidth of one
# request, not memory (one line is capped at httpsafe's DEFAULT_MAX_LINE). SGLang's /generate stream
# repeats the text so far in every chunk, so a long answer sends far more than its own length.
MAX_STREAM_BYTES = 256 << 20


@dataclass
class RequestSample:
    ttft: float | None = None
    gaps: list[float] = field(default_factory=list)
    completion_tokens: int = 0
    verify_ct: int | None = None
    latency: float | None = None  # send to last chunk
    error: str | None = None

    @property
    def accept_length(self) -> float | None:
        if not self.verify_ct or not self.completion_tokens:
            return None
        return self.completion_tokens / self.verify_ct


@dataclass
class LevelResult:
    concurrency: int
    requests: int
    errors: int
    output_tokens_per_s: float  # concurrency x median per-request rate
    accept_length: float | None  # mean over the level's requests
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    itl_p50_ms: float | None
    itl_p99_ms: float | None
    seconds: float
    wall_output_tokens_per_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LevelResult:
        values: dict[str, Any] = {k: data.get(k) for k in cls.__dataclass_fields__}
        return cls(**values)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def _ms(value: float | None) -> float | None:
    return None if value is None else value * 1000.0


@dataclass
class LoadSpec:
    prompts: list[str]  # already rendered through the chat template
    concurrency: list[int]
    requests_per_level: int = 16  # at least 2 x concurrency are sent in any case
    max_new_tokens: int = 128
    level_timeout: float = 300.0
    request_timeout: float = 120.0


def _count(meta: dict[str, Any], key: str) -> int | None:
    value = meta.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"meta_info.{key} is not a count: {str(value)[:40]!r}")
    return value


def stream_one(client: BoundedClient, text: str, max_new_tokens: int) -> RequestSample:
    sample = RequestSample()
    body = {
        "text": text,
        "stream": True,
        # fixed output length: every configuration decodes the same number of tokens per request
        "sampling_params": {"temperature": 0.0, "max_new_tokens": max_new_tokens, "ignore_eos": True},
    }
    started = time.monotonic()
    last: float | None = None
    seen = 0
    try:
        with client.stream_lines("POST", "/generate", json=body, max_body=MAX_STREAM_BYTES) as response:
            if response.status_code != 200:
                sample.error = f"HTTP {response.status_code}"
                return sample
            for line in response.lines:
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    break
                chunk = jsonsafe.loads(payload)
                if not isinstance(chunk, dict) or "error" in chunk:
                    sample.error = "error chunk in the stream"
                    return sample
                meta = chunk.get("meta_info") or {}
                if not isinstance(meta, dict):
                    raise ValueError("meta_info is not an object")
                tokens = _count(meta, "completion_tokens") or 0
                if tokens > seen:
                    now = time.monotonic()
                    if last is None:
                        sample.ttft = now - started
                    else:
                        sample.gaps.append(now - last)
                    last, seen = now, tokens
                verify_ct = _count(meta, "spec_verify_ct")
                if verify_ct is not None:
                    sample.verify_ct = verify_ct
    except (HttpError, ValueError) as exc:
        sample.error = f"{type(exc).__name__}: {exc}"
        return sample
    sample.completion_tokens = seen
    sample.latency = (last - started) if last is not None else None
    if seen == 0:
        sample.error = "no output tokens"
    return sample


def measure_level(base_url: str, spec: LoadSpec, concurrency: int) -> LevelResult:
    total = max(spec.requests_per_level, 2 * concurrency)
    deadline = time.monotonic() + spec.level_timeout
    samples: list[RequestSample] = []
    lock = threading.Lock()
    next_index = [0]
    finished_at = [0.0]

    def worker(client: BoundedClient) -> None:
        while time.monotonic() < deadline:
            with lock:
                index = next_index[0]
                if index >= total:
                    return
                next_index[0] += 1
            sample = stream_one(client, spec.prompts[index % len(spec.prompts)], spec.max_new_tokens)
            with lock:
                samples.append(sample)
                finished_at[0] = max(finished_at[0], time.monotonic())

    # request_timeout is a total deadline per request (sending, first token and every later chunk)
    transport = deadline_transport(limits=httpx.Limits(max_connections=concurrency + 1))
    began = time.monotonic()
    with BoundedClient(base_url, timeout=spec.request_timeout, transport=transport) as client:
        threads = [threading.Thread(target=worker, args=(client,), daemon=True) for _ in range(concurrency)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()) + spec.request_timeout)
    good = [s for s in samples if s.error is None]
    wall = max(finished_at[0] - began, 1e-9)
    accepts = [a for a in (s.accept_length for s in good) if a is not None]
    ttfts = [s.ttft for s in good if s.ttft is not None]
    gaps = [g for s in good for g in s.gaps]
    rates = [s.completion_tokens / s.latency for s in good if s.latency]
    median_rate = statistics.median(rates) if rates else 0.0
    return LevelResult(
        concurrency=concurrency,
        requests=len(samples),
        errors=len(samples) - len(good),
        output_tokens_per_s=concurrency * median_rate,
        accept_length=sum(accepts) / len(accepts) if accepts else None,
        ttft_p50_ms=_ms(percentile(ttfts, 50)),
        ttft_p99_ms=_ms(percentile(ttfts, 99)),
        itl_p50_ms=_ms(percentile(gaps, 50)),
        itl_p99_ms=_ms(percentile(gaps, 99)),
        seconds=wall,
        wall_output_tokens_per_s=sum(s.completion_tokens for s in good) / wall,
    )


def measure(base_url: str, spec: LoadSpec) -> list[LevelResult]:
    return [measure_level(base_url, spec, c) for c in spec.concurrency]
