"""`k26ctl lab load` against misbehaving servers: each bad answer is one failed sample with a bounded
cost, and what the server sent reaches the report text sanitised."""

from __future__ import annotations

import pytest

from k26ctl.lab.load import run_load


@pytest.mark.parametrize(
    ("mode", "error"),
    [
        ("endless", "BodyTooLarge"),
        ("gzip-bomb", "BodyTooLarge"),
        ("slow-body", "DeadlineExceeded"),
        ("deep-json", "malformed answer"),
        ("status500", "internal"),
    ],
)
def test_a_hostile_server_costs_one_failed_sample_per_request(fault, mode: str, error: str) -> None:  # type: ignore[no-untyped-def]
    report = run_load(fault(mode), requests=2, duration=60, concurrency=1, model="m", timeout=2)
    summary = report.summary(report.samples)
    assert summary["sent"] == 2 and summary["failed"] == 2
    assert all(error in s.error for s in report.samples), [s.error for s in report.samples]


def test_server_text_in_the_report_is_sanitised(fault) -> None:  # type: ignore[no-untyped-def]
    report = run_load(fault("escapes"), requests=1, duration=60, concurrency=1, model="m", timeout=5)
    assert report.samples[0].ok and "\x1b" in report.samples[0].text  # kept as data
    text = report.text()
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    assert report.samples[0].degenerate and "The answer is \\x1b]0;pwned" in text
