"""How busy the server is, from its own Prometheus endpoint (`/metrics`, SGLang's --enable-metrics).

`sglang:num_queue_reqs` (waiting) and `sglang:num_running_reqs` (in a batch). SGLang 0.5.15 reports
them from attention-TP rank 0 only, one label set per DP rank (and per model); with
--enable-metrics-for-all-schedulers every TP rank repeats the same figures. So the series are grouped
by their labels without `tp_rank`/`pp_rank`, the largest value of a group is taken, and the groups
are summed (observability/metrics_collector.py, SchedulerMetricsCollector.init_new).

The watcher skips a cycle and backs off while requests queue (the server is saturated; a canary would
only add to the wait), and never flushes the prefix cache while anyone else's request runs or waits
(a flush would throw away their cached prefixes). SGLang's own /flush_cache refuses (400) while
requests run or wait, so where /metrics is off the server's rule still holds at the instant of the
flush.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

QUEUE = "sglang:num_queue_reqs"
RUNNING = "sglang:num_running_reqs"
_MAX_BODY = 4 << 20
_RANK_LABELS = ("tp_rank", "pp_rank")


@dataclass(frozen=True)
class Load:
    queued: float
    running: float

    @property
    def idle(self) -> bool:
        return self.queued == 0 and self.running == 0


def parse_load(text: str) -> Load | None:
    """The queue and running counts in a Prometheus text exposition; None when it has neither."""
    groups: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in (QUEUE, RUNNING):
                    labels = tuple(sorted((k, v) for k, v in sample.labels.items() if k not in _RANK_LABELS))
                    key = (sample.name, labels)
                    groups[key] = max(groups.get(key, 0.0), float(sample.value))
    except ValueError:
        return None
    totals: dict[str, float] = {}
    for (name, _), value in groups.items():
        totals[name] = totals.get(name, 0.0) + value
    if not totals:
        return None
    return Load(totals.get(QUEUE, 0.0), totals.get(RUNNING, 0.0))


def read_load(base_url: str, api_key: str | None = None, timeout: float = 5.0) -> Load | None:
    """The server's load now; None when /metrics is off, unreachable or unreadable (not judged here:
    the canary itself finds out whether the server answers)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with (
            httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout, headers=headers) as client,
            client.stream("GET", "/metrics") as response,
        ):
            if response.status_code != 200:
                return None
            body = b""
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > _MAX_BODY:
                    return None
    except httpx.HTTPError:
        return None
    return parse_load(body.decode("utf-8", errors="replace"))


def flush_refusal(load: Load | None) -> str | None:
    """Why the probes must not flush the prefix cache now (None: they may)."""
    if load is None or load.idle:
        return None
    return f"the server is serving others ({load.running:g} running, {load.queued:g} queued)"
