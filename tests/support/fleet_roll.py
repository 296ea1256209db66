"""What the fleet tests on the lab share: a roll through the CLI, the router's worker list, and client
load through the router from before a roll to after it."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx

from k26ctl.lab.load import LoadReport, Sample, run_load
from tests.support.cli import run_k26ctl


def roll(fleet: Any, *args: str, timeout: float = 600) -> tuple[int, dict[str, Any], str]:
    """`k26ctl deploy FLEET_FILE ARGS --yes --json`: exit code, its JSON document, stderr."""
    proc = run_k26ctl("deploy", fleet.fleet_file, *args, "--yes", "--json", timeout=timeout)
    try:
        return proc.returncode, json.loads(proc.stdout), proc.stderr
    except ValueError:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}") from None


def listed(fleet: Any) -> dict[str, bool]:
    """The router's workers: URL -> healthy."""
    workers = httpx.get(fleet.router_url + "/workers", timeout=5, trust_env=False).json()["workers"]
    return {w["url"]: w["is_healthy"] for w in workers}


class Load:
    """Greedy chat load through the router in the background, from before a block to after it, bounded
    by `requests` and `duration` and paced to `rate` a second where one is given: the block starts once
    `side_answers` answers have come back, and the load stops once as many answers to requests sent
    after the block are in (each side waits at most `side_bound` seconds), so there are samples on both
    sides of it."""

    def __init__(
        self,
        fleet: Any,
        *,
        requests: int = 5000,
        duration: float = 600,
        max_tokens: int = 48,
        rate: float | None = None,
        side_answers: int = 3,
        side_bound: float = 120.0,
    ) -> None:
        self.url, self.stop = fleet.router_url, threading.Event()
        self.report: LoadReport | None = None
        self.requests, self.duration, self.max_tokens, self.rate = requests, duration, max_tokens, rate
        self.side_answers, self.side_bound = side_answers, side_bound
        self.thread = threading.Thread(target=self._run)
        self._answered = threading.Condition()
        self._sent_times: list[float] = []

    def _run(self) -> None:
        self.report = run_load(
            self.url,
            requests=self.requests,
            duration=self.duration,
            concurrency=2,
            max_tokens=self.max_tokens,
            rate=self.rate,
            stop=self.stop,
            on_sample=self._seen,
        )

    def _seen(self, sample: Sample) -> None:
        with self._answered:
            self._sent_times.append(sample.started)
            self._answered.notify_all()

    def _wait_answers_sent_after(self, since: float) -> None:
        def enough() -> bool:
            answered = sum(t >= since for t in self._sent_times)
            return answered >= self.side_answers or not self.thread.is_alive()

        with self._answered:
            assert self._answered.wait_for(enough, timeout=self.side_bound), "the load got no answers"

    def __enter__(self) -> Load:
        self.thread.start()
        self._wait_answers_sent_after(0.0)
        return self

    def __exit__(self, *exc: object) -> None:
        self._wait_answers_sent_after(time.time())
        self.stop.set()
        self.thread.join(300)
