"""The journal rules on SGLang-shaped lines: progress, ready, fatal patterns, tracebacks."""

from __future__ import annotations

from k26ctl.deploy.journal_scan import (
    JournalScanner,
    Signal,
    classify,
    fatal_pattern,
    is_ready_line,
    parse_load_seconds,
    parse_progress,
)

PROGRESS = (
    "[2026-11-29 10:02:11 TP0] Loading safetensors checkpoint shards:  45% Completed | 29/64 "
    "[02:47<03:25,  5.87s/it]"
)
READY = "[2026-11-29 10:07:41] The server is fired up and ready to roll!"

SCHEDULER_CRASH = [
    "[2026-11-29 10:03:02 TP3] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/opt/sglang/venv/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 4321, '
    "in run_scheduler_process",
    "    scheduler = Scheduler(",
    '  File "/opt/sglang/venv/lib/python3.11/site-packages/sglang/srt/model_executor/model_runner.py", '
    "line 1431, in load_model",
    "    self.model = get_model(",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB. GPU 3 has a total capacity "
    "of 95.00 GiB of which 1.02 GiB is free.",
    "[2026-11-29 10:03:02] Received sigquit from a child process. It usually means the child failed.",
]

WARNING_WITH_STACK = [
    "[2026-11-29 10:01:12 TP0] WARNING: Failed to load the fast tokenizer, falling back to the slow one",
    "Traceback (most recent call last):",
    '  File "/opt/sglang/venv/lib/python3.11/site-packages/sglang/srt/utils/hf_transformers_utils.py", '
    "line 512, in get_tokenizer",
    "    tokenizer = AutoTokenizer.from_pretrained(",
    "OSError: Can't load tokenizer for '/models/Kimi-K2.6'.",
    "[2026-11-29 10:01:13 TP0] Load weight begin. avail mem=93.41 GB",
]


def test_progress_line_parsed() -> None:
    p = parse_progress(PROGRESS)
    assert p is not None and (p.percent, p.done, p.total) == (45, 29, 64)
    assert classify(PROGRESS).signal is Signal.PROGRESS


def test_progress_takes_the_last_update_of_a_carriage_return_packed_line() -> None:
    packed = (
        "Loading safetensors checkpoint shards:   0% Completed | 0/64 [00:00<?, ?it/s]\r"
        "Loading safetensors checkpoint shards:   2% Completed | 1/64 [00:05<05:15,  5.0s/it]\r"
        "Loading safetensors checkpoint shards: 100% Completed | 64/64 [05:11<00:00,  4.9s/it]"
    )
    p = parse_progress(packed)
    assert p is not None and p.percent == 100 and p.done == 64


def test_not_progress() -> None:
    assert parse_progress("[2026-11-29 10:02:11 TP0] Load weight begin. avail mem=93.41 GB") is None


def test_load_end_seconds() -> None:
    line = (
        "[2026-11-29 10:06:00 TP0] Load weight end. elapsed=371.22 s, type=DeepseekV3ForCausalLM, "
        "avail mem=21.07 GB, mem usage=72.34 GB."
    )
    assert parse_load_seconds(line) == 371.22
    assert classify(line).signal is Signal.LOAD_END


def test_ready_line() -> None:
    assert is_ready_line(READY)
    assert classify(READY).signal is Signal.READY
    assert not is_ready_line("The server is fired up")


def test_sglang_failure_patterns_are_fatal() -> None:
    assert fatal_pattern(SCHEDULER_CRASH[0]) == "subprocess-exception"
    assert fatal_pattern(SCHEDULER_CRASH[-1]) == "sigquit-from-child"
    running = (
        "[2026-11-29 10:09:41] SIGQUIT received. signum=3, frame=<frame at 0x7f, file 'x.py', line 1>."
        " It usually means one child failed."
    )
    assert fatal_pattern(running) == "sigquit-child-failed"
    hard = "[2026-11-29 10:20:00] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)"
    assert fatal_pattern(hard) == "watchdog-timeout"
    # the soft watchdog only dumps debug information; the server goes on
    assert fatal_pattern(hard.replace("soft=False", "soft=True")) is None
    assert (
        fatal_pattern(
            "RuntimeError: Rank 2 scheduler died during initialization (exit code: -9). If exit code is -9 "
            "(SIGKILL), a common cause is the OS OOM killer."
        )
        == "scheduler-died"
    )
    assert (
        fatal_pattern(
            "[2026-11-29 10:03:05] Subprocess detokenizer (pid=4242) crashed with exit code 1. "
            "Triggering SIGQUIT for cleanup..."
        )
        == "subprocess-crashed"
    )


def test_benign_lines_are_not_fatal() -> None:
    benign = [
        "[2026-11-29 10:00:00 TP0] Decode batch, #running-req: 1, #token: 512, token usage: 0.01, "
        "accept len: 3.42, accept rate: 0.35, cuda graph: True, gen throughput (token/s): 41.20, "
        "#queue-req: 0",
        "Exit code: -9",  # no SGLang source prints this
        "the scheduler is dead",
        '[2026-11-29 10:00:00] INFO: 127.0.0.1:51234 - "GET /health HTTP/1.1" 503 Service Unavailable',
        *WARNING_WITH_STACK,
    ]
    for line in benign:
        assert fatal_pattern(line) is None, line


def test_systemd_lines() -> None:
    exited = classify("sglang.service: Main process exited, code=exited, status=1/FAILURE")
    assert exited.signal is Signal.PROCESS_EXIT and "status=1/FAILURE" in exited.detail
    assert classify("sglang.service: Failed with result 'exit-code'.").signal is Signal.UNIT_FAILED
    assert (
        classify("sglang.service: Scheduled restart job, restart counter is at 2.").signal is Signal.RESTART
    )
    assert classify("Started sglang.service - SGLang serving Kimi K2.6.").signal is Signal.STARTED


def test_scanner_keeps_the_traceback_of_a_crash_as_evidence() -> None:
    scanner = JournalScanner()
    for line in SCHEDULER_CRASH:
        scanner.feed(line)
    evidence = scanner.evidence()
    assert evidence[0].endswith("Traceback (most recent call last):")
    assert any(line.startswith("torch.OutOfMemoryError") for line in evidence)
    assert any("Received sigquit" in line for line in evidence)
    assert not scanner.in_traceback


def test_scanner_knows_when_a_traceback_is_still_open() -> None:
    scanner = JournalScanner()
    scanner.feed(SCHEDULER_CRASH[0])
    scanner.feed(SCHEDULER_CRASH[1])
    assert scanner.in_traceback
    scanner.feed(SCHEDULER_CRASH[5])
    assert not scanner.in_traceback


def test_chained_tracebacks_stay_one_block() -> None:
    scanner = JournalScanner()
    lines = [
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in <module>',
        "KeyError: 'x'",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "b.py", line 2, in <module>',
        "RuntimeError: boom",
    ]
    for line in lines:
        scanner.feed(line)
    assert scanner.last_traceback[-1] == "RuntimeError: boom"


def test_long_traceback_trimmed_but_keeps_the_exception() -> None:
    scanner = JournalScanner(max_traceback_lines=10)
    scanner.feed("Traceback (most recent call last):")
    for i in range(40):
        scanner.feed(f'  File "f{i}.py", line {i}, in g')
    scanner.feed("ValueError: last")
    assert len(scanner.last_traceback) == 10
    assert scanner.last_traceback[-1] == "ValueError: last"
    assert "lines)" in scanner.last_traceback[1]


def test_evidence_falls_back_to_the_last_lines_before_the_exit() -> None:
    scanner = JournalScanner()
    for i in range(20):
        scanner.feed(f"line {i}")
    scanner.feed(
        "[2026-11-30 08:53:47] Error: cannot listen on 127.0.0.1:30000: [Errno 98] Address already in use"
    )
    scanner.feed("k26lab-sglang.service: Main process exited, code=exited, status=1/FAILURE")
    evidence = scanner.evidence()
    assert evidence[-2].endswith("Address already in use")
    assert evidence[-1].endswith("status=1/FAILURE")
    assert evidence[0] == "line 13"


def test_both_loaders_progress_bars_are_read() -> None:
    """SGLang's default loader is multi-threaded; its bar arrives as one CR-joined record at the end."""
    record = "\r".join(
        f"Multi-thread loading shards: {round(100 * n / 64):3d}% Completed | {n}/64 [00:05<05:00, 5s/it]"
        for n in range(0, 65)
    )
    progress = parse_progress(record)
    assert progress is not None and (progress.percent, progress.done, progress.total) == (100, 64, 64)
