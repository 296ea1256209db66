"""`k26ctl lab load --rate`: the sending is paced from the start, all workers together, and a stop
while a request waits for its turn sends nothing more."""

from __future__ import annotations

import threading
import time

import pytest

from k26ctl.errors import UsageError
from k26ctl.lab.load import run_load


def test_request_i_is_sent_no_earlier_than_i_over_rate_after_the_start(fault) -> None:  # type: ignore[no-untyped-def]
    url = fault("ok")
    before = time.time()
    report = run_load(url, requests=6, duration=60, concurrency=3, model="m", rate=10.0)
    starts = sorted(s.started for s in report.samples)
    assert len(starts) == 6 and all(s.ok for s in report.samples), report.to_json()
    # three workers would send three at once unpaced; paced, the i-th send is at least i/10 s in (less
    # 5 ms for the wall clock, which the samples carry, against the monotonic one the pacing keeps)
    offsets = [sent - before for sent in starts]
    assert all(offset >= i / 10.0 - 0.005 for i, offset in enumerate(offsets)), offsets
    assert report.wall_seconds >= 0.5


def test_a_stop_while_waiting_for_a_turn_ends_the_load(fault) -> None:  # type: ignore[no-untyped-def]
    url = fault("ok")
    stop = threading.Event()
    seen: list[object] = []

    def on_sample(sample: object) -> None:
        seen.append(sample)
        stop.set()  # the next request's turn is 100 s away: it must not be waited for

    report = run_load(
        url, requests=5, duration=300, concurrency=1, model="m", rate=0.01, stop=stop, on_sample=on_sample
    )
    assert len(report.samples) == 1 and report.wall_seconds < 60, report.to_json()


def test_a_rate_that_is_not_positive_is_refused() -> None:
    with pytest.raises(UsageError, match="--rate > 0"):
        run_load("http://127.0.0.1:9", requests=1, duration=1, rate=0)
