"""Restart phases from journal records: real captures of the CPU lab's SGLang 0.5.15 and 0.5.23 under
systemd (tests/deploy/data/phases/*.jsonl, `journalctl -o json` as k26ctl reads it), the GPU start-up
of the shared GPU notes in 0.5.15's line formats, and the multi-rank and failure shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from k26ctl.deploy.phases import LogRecord, RestartPhases, parse_phases
from k26ctl.remote.systemd import JournalEntry, parse_journal_line

DATA = Path(__file__).parent / "data" / "phases"


def journal(name: str) -> list[JournalEntry]:
    lines = (DATA / name).read_text(encoding="utf-8").splitlines()
    return [e for e in map(parse_journal_line, lines) if e is not None]


def text_log(name: str) -> list[LogRecord]:
    records = []
    for line in (DATA / name).read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            seconds, message = line.split("\t", 1)
            records.append(LogRecord(1_796_450_000_000_000 + round(float(seconds) * 1e6), message))
    return records


def at(records: list[JournalEntry], text: str) -> int:
    return next(r.timestamp_us for r in records if text in r.message)


def assert_tiles(result: RestartPhases) -> None:
    """The phases follow each other without gap or overlap, from the stop to the ready line."""
    for before, after in zip(result.phases, result.phases[1:], strict=False):
        assert after.start == pytest.approx(before.start + before.duration, abs=0.002)
    total = sum(p.duration for p in result.phases)
    assert total == pytest.approx(result.downtime_seconds, abs=0.01)


def test_real_0_5_15_restart_under_systemd() -> None:
    records = journal("restart-0.5.15-cpu.jsonl")
    result = parse_phases(records)
    assert result.ready and result.wording == "0.5.15"
    names = [p.name for p in result.phases]
    assert names == [
        "stop", "imports", "launch", "distributed", "model-setup", "weights", "kv-cache", "init", "warmup"
    ]  # fmt: skip
    started = at(records, "Started k26real-sglang")
    assert result.stop_seconds == pytest.approx((started - at(records, "Stopping")) / 1e6)
    assert result.start_seconds == pytest.approx((at(records, "ready to roll") - started) / 1e6)
    dist = result.find("distributed")
    assert dist is not None and dist.detail["reported_seconds"] == 0.07
    assert dist.start == pytest.approx(
        (at(records, "Init torch distributed begin") - started) / 1e6, abs=1e-3
    )
    weights = result.find("weights")
    assert weights is not None
    assert weights.detail["type"] == "LlamaForCausalLM" and weights.detail["shards"] == 1
    assert "bytes" not in weights.detail  # the tiny model: `mem usage=0.00 GB`, no size, no rate claimed
    assert weights.evidence[0].endswith("Load weight begin. avail mem=20.45 GB")
    kv = result.find("kv-cache")
    assert kv is not None and kv.detail["tokens"] == 16384 and kv.detail["dtype"] == "torch.float16"
    warmup = result.find("warmup")
    assert warmup is not None and "Uvicorn running on" in warmup.evidence[0]
    assert result.find("graphs") is None  # no CUDA graphs on a CPU
    assert_tiles(result)


def test_real_0_5_23_restart_under_systemd() -> None:
    records = journal("restart-0.5.23-cpu.jsonl")
    result = parse_phases(records)
    assert result.ready and result.wording == "0.5.23"
    assert [p.name for p in result.phases] == [
        "stop", "imports", "launch", "distributed", "model-setup", "weights", "kv-cache", "init", "warmup"
    ]  # fmt: skip
    started = at(records, "Started k26real-sglang")
    assert result.stop_seconds == pytest.approx((started - at(records, "Stopping")) / 1e6)
    launch = result.find("launch")
    assert launch is not None and "server_args={'model_path'" in launch.evidence[0]  # 0.5.23 logs a dict
    dist = result.find("distributed")
    assert dist is not None and dist.evidence[0].endswith("Init parallel begin.")
    assert dist.detail["reported_seconds"] == 0.06
    kv = result.find("kv-cache")
    assert kv is not None and kv.evidence[1].endswith("K size: 0.00 GB, V size: 0.00 GB")
    # SGLang's own summary line, 0.5.23 only
    assert result.reported["load_weight"] == 0.02 and result.reported["kv_cache_allocation"] == 0.72
    assert result.reported["tokenizer_e2e"] == 30.89 and result.reported["cuda_graph.decode"] == 0.0
    assert_tiles(result)


def test_gpu_start_from_the_shared_notes_in_0_5_15_formats() -> None:
    result = parse_phases(text_log("gpu-0.5.15-from-docs.log"))
    assert result.ready and result.stop_seconds is None and result.wording == "0.5.15"
    graphs = result.find("graphs")
    assert graphs is not None and graphs.duration == pytest.approx(29.9)
    assert graphs.detail["captures"] == [
        {"name": "target decode", "bs": [1, 2, 4, 8, 12, 16], "seconds": 29.9}
    ]
    weights = result.find("weights")
    assert weights is not None and weights.detail["bytes"] == int(0.02 * (1 << 30))
    assert weights.detail["rate_gb_s"] == pytest.approx(0.02 / 0.17, abs=2e-3)  # over the phase's wall time
    kv = result.find("kv-cache")
    assert kv is not None and kv.detail["bytes"] == int(0.26 * (1 << 30)) and kv.detail["tokens"] == 131072
    assert result.seconds("imports") + result.seconds("launch") == pytest.approx(20.0)
    assert result.seconds("warmup") == pytest.approx(11.1)
    assert_tiles(result)


def lines(*pairs: tuple[float, str]) -> list[LogRecord]:
    return [LogRecord(round(t * 1e6), message) for t, message in pairs]


def test_ranks_open_at_the_first_begin_and_close_at_the_last_end() -> None:
    result = parse_phases(
        lines(
            (0.0, "Started sglang.service - SGLang."),
            (5.0, "[2026-12-05 10:00:05 TP0] Init parallel begin."),
            (5.1, "[2026-12-05 10:00:05 TP1] Init parallel begin."),
            (6.0, "[2026-12-05 10:00:06 TP1] Init parallel ends. elapsed=0.90 s"),
            (7.0, "[2026-12-05 10:00:07 TP0] Init parallel ends. elapsed=2.00 s"),
            (8.0, "[2026-12-05 10:00:08 TP0] Load weight begin. avail mem=90.00 GB"),
            (8.5, "[2026-12-05 10:00:08 TP1] Load weight begin. avail mem=90.00 GB"),
            (60.0, "[2026-12-05 10:01:00 TP0] Load weight end. elapsed=52.00 s, type=K, avail mem=30.00 GB, "
             "mem usage=60.00 GB."),
            (70.0, "[2026-12-05 10:01:10 TP1] Load weight end. elapsed=61.50 s, type=K, avail mem=30.00 GB, "
             "mem usage=60.00 GB."),
            (71.0, "[2026-12-05 10:01:11 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 100, "
             "KV size: 2.00 GB"),
            (72.0, "[2026-12-05 10:01:12 TP0] Capture target prefill CUDA graph begin. backend=x, "
             "num_tokens=[1], avail mem=20.00 GB"),
            (80.0, "[2026-12-05 10:01:20 TP0] Capture target prefill CUDA graph end. elapsed=8.00 s, "
             "mem usage=1.00 GB, avail mem=19.00 GB."),
            (81.0, "[2026-12-05 10:01:21 TP0] Capture target decode CUDA graph begin. backend=x, "
             "num_tokens_per_req=1, avail mem=19.00 GB"),
            (90.0, "[2026-12-05 10:01:30 TP0] Capture target decode CUDA graph end. bs=[1, 2], "
             "elapsed=9.00 s, mem usage=1.00 GB, avail mem=18.00 GB."),
            (95.0, "[2026-12-05 10:01:35] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C)"),
            (99.0, "[2026-12-05 10:01:39] The server is fired up and ready to roll!"),
            (99.5, "[2026-12-05 10:01:39] Prefill batch, #new-seq: 1"),
        )
    )  # fmt: skip
    assert result.wording == "0.5.23"
    spans = {p.name: (p.start, p.duration) for p in result.phases}
    assert spans["distributed"] == (5.0, 2.0)
    assert spans["weights"] == (8.0, 62.0)
    assert spans["graphs"] == (72.0, 18.0)  # both captures, one phase
    assert [p.name for p in result.phases].count("server-start") == 1
    graphs = result.find("graphs")
    assert graphs is not None and graphs.detail["captures"] == [
        {"name": "target prefill", "seconds": 8.0},
        {"name": "target decode", "seconds": 9.0, "bs": [1, 2]},
    ]
    weights = result.find("weights")
    assert weights is not None and weights.detail["reported_seconds"] == 61.5  # the slowest rank's
    assert weights.detail["bytes"] == 120 * (1 << 30)  # both ranks' shards
    assert weights.detail["rate_gb_s"] == pytest.approx(120 / 62.0, abs=1e-3)
    assert weights.evidence[1].startswith("[2026-12-05 10:01:10 TP1] Load weight end.")
    assert result.start_seconds == 99.0 and result.ready
    assert_tiles(result)


def test_a_start_that_never_got_ready_covers_up_to_the_last_record() -> None:
    result = parse_phases(
        lines(
            (0.0, "Started sglang.service - SGLang."),
            (3.0, "[2026-12-05 10:00:03] Init torch distributed begin."),
            (3.5, "[2026-12-05 10:00:03] Init torch distributed ends. elapsed=0.50 s, mem usage=0.10 GB"),
            (4.0, "[2026-12-05 10:00:04] Load weight begin. avail mem=90.00 GB"),
            (9.0, "sglang.service: Main process exited, code=killed, status=9/KILL"),
        )
    )
    assert not result.ready
    assert [p.name for p in result.phases][-1] == "weights"
    assert result.start_seconds == 9.0


def test_deferred_weight_commit_of_0_5_23_counts_its_seconds() -> None:
    result = parse_phases(
        lines(
            (0.0, "Started sglang.service - SGLang."),
            (1.0, "[2026-12-05 10:00:01] Load weight begin. avail mem=90.00 GB"),
            (5.0, "[2026-12-05 10:00:05] Load weight end. Committed real weights after CUDA graph capture "
             "in 3.25 s"),
            (6.0, "[2026-12-05 10:00:06] The server is fired up and ready to roll!"),
        )
    )  # fmt: skip
    weights = result.find("weights")
    assert weights is not None and weights.detail["reported_seconds"] == 3.25


def test_no_records_no_phases() -> None:
    result = parse_phases([])
    assert result.phases == () and not result.ready and result.downtime_seconds == 0.0


def test_json_round_trip_keeps_everything() -> None:
    result = parse_phases(journal("restart-0.5.15-cpu.jsonl"))
    again = RestartPhases.from_json(result.to_json())
    assert again == result
    assert "old server stopping" in result.summary() and "weight loading" in result.summary()


def test_sglang_sigterm_line_before_systemds_stopping_line_starts_the_stop() -> None:
    """Real: journald wrote SGLang's `SIGTERM received` 0.5 ms before systemd's `Stopping` line (a
    0.5.23 server replaced by 0.5.15 under k26ctl deploy); the record before it is the old server's."""
    records = journal("sigterm-first-0.5.15-cpu.jsonl")
    assert "SIGTERM received" in records[1].message and records[2].message.startswith("Stopping")
    result = parse_phases(records)
    assert [p.name for p in result.phases][:3] == ["stop", "imports", "launch"]
    started = at(records, "Started k26real-sglang")
    assert result.stop_seconds == pytest.approx((started - records[1].timestamp_us) / 1e6)
    assert result.phases[0].evidence[0].startswith("Stopping k26real-sglang.service")
    assert_tiles(result)


def test_real_gpu_restart_skips_the_old_servers_last_requests_and_counts_its_stop() -> None:
    """The journal cursor is taken before the restart, so the old server's last smoke requests come first:
    they are no phase. The stop is systemd's Stopping -> Started (here 63.6 s: the scheduler process
    outlived the final SIGKILL and systemd waited out TimeoutStopSec); a warm Triton cache makes the
    target-verify graph capture take 1.2 s."""
    records = text_log("restart-0.5.15-gpu.log")
    assert "POST /v1/detokenize" in records[0].message  # the old server still serving
    result = parse_phases(records)
    assert result.ready and result.wording == "0.5.15"
    assert [p.name for p in result.phases][:2] == ["stop", "imports"]
    assert result.stop_seconds == pytest.approx(63.58, abs=0.01)
    assert result.start_seconds == pytest.approx(42.82, abs=0.01)
    assert result.seconds("graphs") == pytest.approx(1.18, abs=0.01)
    assert all(p.duration >= 0 for p in result.phases)
    assert_tiles(result)
