"""`k26ctl lab load`: chat requests through the lab router, bounded in count and time, judged by the
smoke detectors. Reports successes, failures, degenerate answers and latency percentiles.

Only loopback and the lab's own addresses (10.231.x.x) are accepted as targets."""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from k26ctl.errors import UsageError
from k26ctl.httpsafe import BoundedClient, HttpError

LAB_NET = ipaddress.ip_network("10.231.0.0/16")

# Chat prompts the lab model knows (k26ctl/smoke/suites/lab.yaml), with the kind the detectors expect.
PROMPTS: tuple[tuple[str, str], ...] = (
    ("What is the capital of France?", "short"),
    ("Explain how plants make food.", "prose"),
    ("Write a short poem about the sea.", "poem"),
    ("Tell me a short story.", "prose"),
)


def check_lab_url(url: str) -> str:
    host = urlsplit(url).hostname or ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if host == "localhost" or (address is not None and (address.is_loopback or address in LAB_NET)):
        return url.rstrip("/")
    raise UsageError(
        f"lab load only targets loopback or lab addresses (10.231.x.x), not {host or url!r}",
        "point --url at the lab router (see `k26ctl lab fleet up`)",
    )


@dataclass
class Sample:
    started: float  # time.time() when sent
    seconds: float
    ok: bool
    degenerate: bool = False
    status: int | None = None
    error: str = ""
    text: str = ""
    reasons: list[str] = field(default_factory=list)


@dataclass
class LoadReport:
    url: str
    samples: list[Sample]
    wall_seconds: float

    def select(
        self, start: float | None = None, end: float | None = None, inside: bool = True
    ) -> list[Sample]:
        """Samples sent inside [start, end) (or outside it with inside=False)."""
        if start is None or end is None:
            return list(self.samples)
        return [s for s in self.samples if (start <= s.started < end) == inside]

    @staticmethod
    def summary(samples: list[Sample]) -> dict[str, Any]:
        latencies = sorted(s.seconds for s in samples if s.ok)
        return {
            "sent": len(samples),
            "ok": sum(s.ok for s in samples),
            "failed": sum(not s.ok for s in samples),
            "degenerate": sum(s.degenerate for s in samples),
            "p50_s": round(percentile(latencies, 50), 3) if latencies else None,
            "p99_s": round(percentile(latencies, 99), 3) if latencies else None,
        }

    def windows(self, seconds: float = 5.0) -> list[dict[str, Any]]:
        """The summary of each `seconds`-long window of sending time, `t` its end after the first send."""
        if not self.samples:
            return []
        first = min(s.started for s in self.samples)
        buckets: dict[int, list[Sample]] = {}
        for sample in self.samples:
            buckets.setdefault(int((sample.started - first) // seconds), []).append(sample)
        return [{"t": round((n + 1) * seconds, 1), **self.summary(buckets[n])} for n in sorted(buckets)]

    def to_json(self) -> dict[str, Any]:
        failures = [s.error or f"HTTP {s.status}" for s in self.samples if not s.ok][:10]
        bad = [{"text": s.text[:120], "reasons": s.reasons} for s in self.samples if s.degenerate][:10]
        return {
            "url": self.url,
            "wall_seconds": round(self.wall_seconds, 3),
            **self.summary(self.samples),
            "failures": failures,
            "degenerate_examples": bad,
            "windows": self.windows(),
        }

    def text(self) -> str:
        from k26ctl.termsafe import clean

        s = self.summary(self.samples)
        line = (
            f"{s['sent']} sent through {self.url}: {s['ok']} ok, {s['failed']} failed, "
            f"{s['degenerate']} degenerate; p50 {s['p50_s']} s, p99 {s['p99_s']} s "
            f"({self.wall_seconds:.1f} s)"
        )
        for item in self.to_json()["failures"]:
            line += f"\n  failed: {item}"
        for item in self.to_json()["degenerate_examples"]:
            line += f"\n  degenerate: {item['text']!r} ({'; '.join(item['reasons'])})"
        return clean(line, keep_newlines=True)  # answers and error bodies come from the server


def percentile(sorted_values: list[float], pct: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return 0.0
    rank = max(1, min(len(sorted_values), int(-(-pct * len(sorted_values) // 100))))
    return sorted_values[rank - 1]


def run_load(
    url: str,
    *,
    requests: int = 200,
    duration: float = 120.0,
    concurrency: int = 2,
    max_tokens: int = 48,
    model: str | None = None,
    timeout: float = 120.0,
    stop: threading.Event | None = None,
    on_sample: Callable[[Sample], None] | None = None,
    rate: float | None = None,
) -> LoadReport:
    """Send up to `requests` chat requests within `duration` seconds (whichever ends first), with
    `concurrency` in flight; stops early when `stop` is set. `on_sample` sees each answer as it ends.
    `rate` paces the sending: request i is sent no earlier than i / rate seconds after the start (all
    workers together), so a slow server is never sent more than it can answer, and a quick one no more
    than `rate` a second; None sends as fast as the answers come back."""
    from k26ctl.smoke.detectors import score_text

    base = check_lab_url(url)
    if requests < 1 or duration <= 0 or concurrency < 1 or (rate is not None and rate <= 0):
        raise UsageError("lab load needs --requests >= 1, --duration > 0, --concurrency >= 1 and --rate > 0")
    model = model or _served_model(base)
    samples: list[Sample] = []
    lock = threading.Lock()
    counter = iter(range(requests))
    started = time.monotonic()
    deadline = started + duration
    stopping = stop if stop is not None else threading.Event()

    def next_index() -> int | None:
        with lock:
            if time.monotonic() >= deadline or stopping.is_set():
                return None
            index = next(counter, None)
        if index is None or rate is None:
            return index
        due = started + index / rate
        if due >= deadline:
            return None
        while (left := due - time.monotonic()) > 0:
            if stopping.wait(left):
                return None  # stopped while waiting for its turn
        return index

    def worker() -> None:
        with BoundedClient(base, timeout=timeout, max_body=ANSWER_CAP) as client:
            while (index := next_index()) is not None:
                prompt, kind = PROMPTS[index % len(PROMPTS)]
                body: dict[str, Any] = {
                    "model": model,
                    "messages": [{"role": "user", "content": prompt}],
                    "temperature": 0,
                    "max_tokens": max_tokens,
                    "chat_template_kwargs": {"thinking": False},
                }
                sent, t0 = time.time(), time.monotonic()
                sample = _send(client, body, prompt, kind, sent, t0, score_text)
                with lock:
                    samples.append(sample)
                if on_sample is not None:
                    on_sample(sample)

    threads = [threading.Thread(target=worker, name=f"load-{i}", daemon=True) for i in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return LoadReport(base, sorted(samples, key=lambda s: s.started), time.monotonic() - started)


ANSWER_CAP = 8 << 20  # a chat answer of a few hundred tokens is a few KB


def _served_model(base: str) -> str:
    """The model the router (or server) lists first; the router lists it from its registered workers."""
    try:
        with BoundedClient(base, timeout=10, max_body=1 << 20) as client:
            data = client.request("GET", "/v1/models").json()["data"]
        model = data[0]["id"]
    except (HttpError, ValueError, KeyError, IndexError, TypeError):
        return "default"
    return model if isinstance(model, str) and model else "default"


def _send(
    client: BoundedClient, body: dict[str, Any], prompt: str, kind: str, sent: float, t0: float, score: Any
) -> Sample:
    from k26ctl.termsafe import clean

    try:
        response = client.request("POST", "/v1/chat/completions", json=body)
    except HttpError as exc:
        return Sample(sent, time.monotonic() - t0, False, error=f"{exc.__class__.__name__}: {exc}")
    seconds = time.monotonic() - t0
    if response.status_code != 200:
        return Sample(
            sent, seconds, False, status=response.status_code, error=clean(response.text, limit=200)
        )
    try:
        choice = response.json()["choices"][0]
        text = choice["message"].get("content") or ""
        finish = choice.get("finish_reason")
        if not isinstance(text, str) or not (finish is None or isinstance(finish, str)):
            raise TypeError("content and finish_reason must be strings")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        return Sample(sent, seconds, False, status=200, error=clean(f"malformed answer: {exc}", limit=200))
    verdict = score(text, prompt, kind, finish)
    reasons = [f.reason() for f in verdict.findings if f.severity == "fail"]
    return Sample(sent, seconds, True, verdict.degenerate, 200, text=text, reasons=reasons)
