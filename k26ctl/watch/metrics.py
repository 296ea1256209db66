"""The watcher's Prometheus metrics, with the official client library.

Every series carries `host`, `model` and `profile` labels. Served over HTTP on `--metrics-port`
(`prometheus_client.start_http_server`) and, with `--textfile`, written in the node_exporter textfile
format (`write_to_textfile` writes a temporary file and renames it: readers never see half a file).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    start_http_server,
    write_to_textfile,
)

from k26ctl.watch.canary import CycleResult
from k26ctl.watch.machine import UNKNOWN
from k26ctl.watch.verdict import STATES, Verdict

LABELS = ("host", "model", "profile")
PREFIX = "k26ctl_watch"
LATENCY_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120)


@dataclass(frozen=True)
class Identity:
    host: str
    model: str
    profile: str

    def labels(self) -> dict[str, str]:
        return {"host": self.host, "model": self.model, "profile": self.profile}


class WatchMetrics:
    def __init__(self, identity: Identity, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.identity = identity
        r, labels = self.registry, LABELS
        # One series per state, 1 for the current one (the OpenMetrics StateSet layout, with the usual
        # `state` label that alert rules select on)
        self._state = Gauge(
            f"{PREFIX}_state", "The watcher's confirmed state (1: current)", (*labels, "state"), registry=r
        )
        self._cycles = Counter(
            f"{PREFIX}_cycles", "Canary cycles by verdict", (*labels, "verdict"), registry=r
        )
        self._errors = Counter(f"{PREFIX}_errors", "Canary requests that failed", labels, registry=r)
        self._checked = Counter(f"{PREFIX}_probes_checked", "Probed tokens", labels, registry=r)
        self._mismatched = Counter(
            f"{PREFIX}_probes_mismatched",
            "Probed tokens that were not the server's own greedy choice",
            labels,
            registry=r,
        )
        self._detectors = Counter(
            f"{PREFIX}_detector_failures", "Failing findings by detector", (*labels, "detector"), registry=r
        )
        self._accept = Gauge(
            f"{PREFIX}_accept_length",
            "Accept length of the last cycle's requests (meta_info)",
            labels,
            registry=r,
        )
        self._meant = Gauge(
            f"{PREFIX}_speculative_meant_to_accept",
            "1 where the server drafts with a model (not a lookup table) and should accept drafts",
            labels,
            registry=r,
        )
        self._accept_baseline = Gauge(
            f"{PREFIX}_accept_baseline",
            "The configuration's accept-length baseline on its host (passing deploy smoke runs)",
            labels,
            registry=r,
        )
        self._accept_ratio = Gauge(
            f"{PREFIX}_accept_baseline_ratio",
            "The last cycle's accept length over the configuration's baseline",
            labels,
            registry=r,
        )
        self.accept_baseline: float | None = None
        self._latency = Histogram(
            f"{PREFIX}_canary_latency_seconds",
            "Canary request latency",
            labels,
            registry=r,
            buckets=LATENCY_BUCKETS,
        )
        self._cycle_seconds = Gauge(
            f"{PREFIX}_cycle_seconds", "Duration of the last cycle", labels, registry=r
        )
        self._last_success = Gauge(
            f"{PREFIX}_last_success_timestamp_seconds",
            "When a cycle last judged the server healthy",
            labels,
            registry=r,
        )
        self._last_cycle = Gauge(
            f"{PREFIX}_last_cycle_timestamp_seconds", "When the last cycle ended", labels, registry=r
        )
        self._requests = Counter(
            f"{PREFIX}_canary_requests", "HTTP requests the canary made", labels, registry=r
        )
        self._tokens = Counter(
            f"{PREFIX}_canary_tokens", "Tokens the canary made the server generate", labels, registry=r
        )
        self._drifted = Gauge(
            f"{PREFIX}_baseline_drifted_answers", "Answers that differ from the baseline", labels, registry=r
        )
        self._backoffs = Counter(
            f"{PREFIX}_backoffs", "Cycles skipped because the server was saturated", labels, registry=r
        )
        self._changes = Counter(f"{PREFIX}_state_changes", "Confirmed state changes", labels, registry=r)
        self._unconfirmed = Counter(
            f"{PREFIX}_unconfirmed",
            "Bad cycles that the immediate re-check did not confirm",
            labels,
            registry=r,
        )
        self.set_state(UNKNOWN)

    def _l(self) -> dict[str, str]:
        return self.identity.labels()

    def set_state(self, state: str) -> None:
        for name in (UNKNOWN, *STATES):
            self._state.labels(**self._l(), state=name).set(1.0 if name == state else 0.0)

    def record_cycle(self, cycle: CycleResult, verdict: Verdict) -> None:
        labels = self._l()
        self._cycles.labels(**labels, verdict=verdict.state).inc()
        self._cycle_seconds.labels(**labels).set(cycle.elapsed)
        self._last_cycle.labels(**labels).set(time.time())
        self._requests.labels(**labels).inc(cycle.requests)
        self._tokens.labels(**labels).inc(cycle.generated_tokens)
        for detector, count in verdict.detector_failures.items():
            self._detectors.labels(**labels, detector=detector).inc(count)
        report = cycle.report
        if report is None:
            return
        self._errors.labels(**labels).inc(sum(1 for r in report.results if r.error is not None))
        for r in report.results:
            if r.error is None:
                self._latency.labels(**labels).observe(r.elapsed)
        if report.probes is not None and report.probes.supported:
            self._checked.labels(**labels).inc(report.probes.checked)
            self._mismatched.labels(**labels).inc(len(report.probes.mismatches))
        accept = report.measured_accept_length
        if report.accept_rule is not None:
            self._meant.labels(**labels).set(1.0 if report.accept_rule.meant_to_accept else 0.0)
        if accept is not None:
            self._accept.labels(**labels).set(accept)
            if self.accept_baseline:
                self._accept_ratio.labels(**labels).set(accept / self.accept_baseline)
        self._drifted.labels(**labels).set(verdict.drifted)
        if verdict.state == "healthy":
            self._last_success.labels(**labels).set(time.time())

    def set_accept_baseline(self, value: float) -> None:
        self.accept_baseline = value
        self._accept_baseline.labels(**self._l()).set(value)

    def record_backoff(self) -> None:
        self._backoffs.labels(**self._l()).inc()

    def record_change(self) -> None:
        self._changes.labels(**self._l()).inc()

    def record_unconfirmed(self) -> None:
        self._unconfirmed.labels(**self._l()).inc()

    def serve(self, port: int, address: str = "127.0.0.1") -> None:
        start_http_server(port, addr=address, registry=self.registry)

    def write_textfile(self, path: Path) -> None:
        write_to_textfile(str(path), self.registry)
