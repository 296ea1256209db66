"""The watcher is polite to a busy lab server: it skips the cycle and backs off while requests queue,
and its probes never flush the prefix cache while someone else's request runs."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest

pytest.importorskip("torch", reason="the lab server needs torch")

from k26ctl.watch.canary import CanarySettings
from k26ctl.watch.load import read_load
from k26ctl.watch.loop import WatchConfig, Watcher
from k26ctl.watch.setup import url_target
from k26ctl.watch.store import WatchStore
from tests.support.lab_server import lab_server

pytestmark = pytest.mark.lab


def _busy(url: str, count: int, stop: threading.Event) -> list[threading.Thread]:
    """`count` long greedy requests, each sent again until `stop` (bounded: 20 each)."""

    def send() -> None:
        body = {
            "text": "Bees live together in a hive.",
            "sampling_params": {"temperature": 0, "max_new_tokens": 400},
        }
        with httpx.Client(timeout=300, trust_env=False) as client:
            for _ in range(20):
                if stop.is_set():
                    return
                client.post(url + "/generate", json=body)

    threads = [threading.Thread(target=send, daemon=True) for _ in range(count)]
    for t in threads:
        t.start()
    return threads


def _wait_load(url: str, ok: object, timeout: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        load = read_load(url)
        if load is not None and ok(load):  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"the server's load never reached the wanted state: {read_load(url)}")


def test_a_saturated_server_is_skipped_with_backoff_and_a_busy_one_is_not_flushed(tmp_path: Path) -> None:
    canary = CanarySettings(max_tokens=32, probe_positions=8)
    with lab_server("none", overrides=["sglang.max_running_requests=1"]) as server:
        target = url_target(server.url, None, "lab", None, canary)
        config = WatchConfig(interval=10.0, jitter=0.0, canary=canary)
        watcher = Watcher(target.open, target.suite, config, WatchStore(tmp_path))
        stop = threading.Event()
        threads = _busy(server.url, 3, stop)
        try:
            _wait_load(server.url, lambda load: load.queued >= 1)
            skipped = watcher.step()
            assert skipped.skipped and skipped.record["verdict"] == "skipped" and watcher.cycles == 0
            assert watcher.next_wait() == 20.0  # doubled
            watcher.step()
            assert watcher.next_wait() == 40.0
            # others running and waiting under a raised --max-queue: the canary runs, the cache stays
            stop.set()
            for t in threads:
                t.join(300)
            stop.clear()
            threads = _busy(server.url, 2, stop)
            _wait_load(server.url, lambda load: load.running >= 1)
            watcher.config = WatchConfig(interval=10.0, jitter=0.0, max_queue=100, canary=canary)
            ran = watcher.step()
        finally:
            stop.set()
            for t in threads:
                t.join(300)
        log = server.log()
    assert not ran.skipped and watcher.next_wait() == 10.0
    probes = ran.record["evidence"]["probes"]
    assert probes["flushed"] is False and probes["checked"] > 0, ran.record
    assert "Cache flushed" not in log
