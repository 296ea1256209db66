"""The lab load's summary in time windows: what a fleet roll's page draws across the roll."""

from __future__ import annotations

from k26ctl.lab.load import LoadReport, Sample


def test_samples_fall_into_five_second_windows_from_the_first_send() -> None:
    samples = [
        Sample(started=100.0, seconds=0.2, ok=True),
        Sample(started=104.9, seconds=0.4, ok=False, status=503),
        Sample(started=111.0, seconds=0.3, ok=True),
    ]
    windows = LoadReport("http://127.0.0.1:1", samples, 12.0).to_json()["windows"]
    assert [(w["t"], w["sent"], w["ok"], w["failed"]) for w in windows] == [(5.0, 2, 1, 1), (15.0, 1, 1, 0)]
    assert windows[0]["p99_s"] == 0.2  # latency of the answered requests only
    assert LoadReport("http://127.0.0.1:1", [], 0.0).to_json()["windows"] == []
