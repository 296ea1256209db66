"""The downtime prediction from the host's history: matched conditions first, the range seen, and the
basis said; phases kept in a history record round-trip."""

from __future__ import annotations

from pathlib import Path

import pytest

from k26ctl.deploy.downtime import Conditions, expect_downtime
from k26ctl.deploy.history import DeployRecord, parse_history, serialize
from k26ctl.deploy.phases import LogRecord, parse_phases
from k26ctl.remote.systemd import parse_journal_line


def phases(stop: float, load: float, weights: float) -> dict[str, object]:
    records = [
        LogRecord(0, "Stopping sglang.service - SGLang..."),
        LogRecord(int(stop * 1e6), "Started sglang.service - SGLang."),
        LogRecord(int((stop + 1) * 1e6), "[2026-12-05 10:00:01] Load weight begin. avail mem=90.00 GB"),
        LogRecord(int((stop + 1 + weights) * 1e6), "[2026-12-05 10:00:09] Load weight end. elapsed=1.00 s"),
        LogRecord(
            int((stop + load) * 1e6), "[2026-12-05 10:00:20] The server is fired up and ready to roll!"
        ),
    ]
    return parse_phases(records).to_json()


def rec(downtime: tuple[float, float, float] | None, jit: str, resident: float, **kw: object) -> DeployRecord:
    return DeployRecord.from_json(
        {
            "time": "2026-12-05T10:00:00Z",
            "restarted": downtime is not None,
            "phases": phases(*downtime) if downtime else None,
            "start_conditions": {"jit_cache": jit, "weights_resident": resident},
            "verdict": "ok",
            **kw,
        }
    )


HISTORY = [
    rec((5, 80, 40), "cold", 0.0),  # 85 s, cold caches, weights from disk
    rec((5, 40, 2), "warm", 1.0),  # 45 s
    rec((5, 50, 2), "warm", 1.0),  # 55 s
    rec((5, 60, 2), "warm", 0.98),  # 65 s
    rec(None, "warm", 1.0),  # no restart: not a sample
]


def test_matched_conditions_give_median_and_range() -> None:
    e = expect_downtime(HISTORY, Conditions(jit_cache="warm", weights_cached=True))
    assert e is not None and e.matched and e.samples == 3
    assert (e.seconds, e.low, e.high) == (55.0, 45.0, 65.0)
    assert e.weights_seconds == pytest.approx(2.0)
    assert "3 earlier restarts on this host under the same conditions (warm JIT caches" in e.line()
    assert "seen 45-65 s" in e.line()


def test_cold_start_is_told_apart_from_warm_ones() -> None:
    e = expect_downtime(HISTORY, Conditions(jit_cache="cold", weights_cached=False))
    assert e is not None and e.matched and e.samples == 1 and e.seconds == 85.0
    assert "seen" not in e.line()  # one sample has no range


def test_unmatched_conditions_fall_back_to_every_restart_and_say_so() -> None:
    e = expect_downtime(HISTORY, Conditions(jit_cache="cold", weights_cached=True))
    assert e is not None and not e.matched and e.samples == 4
    assert "of any kind" in e.basis()


def test_no_restart_with_phases_no_prediction() -> None:
    assert expect_downtime([rec(None, "warm", 1.0)], Conditions()) is None


def test_a_history_record_keeps_the_real_phases() -> None:
    data = Path(__file__).parent / "data" / "phases" / "restart-0.5.23-cpu.jsonl"
    entries = [e for e in map(parse_journal_line, data.read_text().splitlines()) if e is not None]
    real = parse_phases(entries).to_json()
    record = DeployRecord.from_json(
        {"time": "t", "restarted": True, "phases": real, "sglang_version": "0.5.23"}
    )
    back = parse_history(serialize([record]))
    assert back == [record] and back[0].phases == real


def test_restarts_of_another_checkpoint_size_are_not_alike() -> None:
    big = DeployRecord.from_json(
        {
            "time": "t",
            "restarted": True,
            "phases": phases(5, 200, 150),
            "start_conditions": {"jit_cache": "warm", "weights_resident": 1.0, "weights_bytes": 10 << 30},
        }
    )
    small = DeployRecord.from_json(
        {
            "time": "t",
            "restarted": True,
            "phases": phases(5, 30, 1),
            "start_conditions": {"jit_cache": "warm", "weights_resident": 1.0, "weights_bytes": 2 << 30},
        }
    )
    e = expect_downtime(
        [big, small], Conditions(jit_cache="warm", weights_cached=True, weights_bytes=2 << 30)
    )
    assert e is not None and e.matched and e.samples == 1 and e.seconds == 35.0
