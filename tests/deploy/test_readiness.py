"""The readiness state machine, fed observations by hand."""

from __future__ import annotations

import itertools

from k26ctl.deploy.readiness import Outcome, OutcomeKind, ProbeResult, ReadinessMachine, UnitState

RUNNING = UnitState("active", "running", n_restarts=0, main_pid=4242)
NOT_YET = ProbeResult(False, "/health: ConnectError")
OK = ProbeResult(True, "ok")


def machine(**kw: object) -> ReadinessMachine:
    defaults: dict[str, object] = {"start": 100.0, "timeout": 1800.0, "baseline": RUNNING, "armed": True}
    defaults.update(kw)
    return ReadinessMachine(**defaults)  # type: ignore[arg-type]


def test_ready_when_the_probes_pass() -> None:
    m = machine()
    assert not m.probe_due(100.5)
    assert m.probe_due(101.0)
    assert m.on_probe(NOT_YET, 101.0) is None
    out = m.on_probe(OK, 102.0)
    assert out is not None and out.kind is OutcomeKind.READY


def test_polls_every_second_first_then_backs_off_to_at_most_five() -> None:
    m = machine()
    now, gaps = 101.0, []
    for _ in range(40):
        assert m.probe_due(now)
        m.on_probe(NOT_YET, now)
        nxt = m.next_wakeup(now)
        gaps.append(round(nxt - now, 3))
        now = nxt
    assert gaps[:10] == [1.0] * 10
    assert max(gaps) == 5.0
    assert all(a <= b for a, b in itertools.pairwise(gaps))


def test_ready_line_triggers_an_immediate_probe() -> None:
    m = machine()
    for t in (101.0, 102.0, 103.0):
        m.on_probe(NOT_YET, t)
    m.on_journal(
        "[2026-11-29 10:07:41] The server is fired up and ready to roll!", 103.2, timestamp_us=9_000_000
    )
    assert m.probe_due(103.2)
    assert m.ready_line_seen


def unit_failure(m: ReadinessMachine, state: UnitState, now: float = 105.0) -> Outcome:
    """A failure seen in the unit state is reported after a short wait for the journal's lines."""
    assert m.on_unit(state, now) is None
    assert not m.probe_due(now + 10)
    assert m.on_tick(now + 0.4) is None
    out = m.on_tick(now + 0.5)
    assert out is not None and out.kind is OutcomeKind.FAILED
    return out


def test_unit_failed() -> None:
    out = unit_failure(machine(), UnitState("failed", "failed", 0, 0, "1", "exit-code"))
    assert "result=exit-code" in out.reason


def test_auto_restart_state_is_a_failure() -> None:
    out = unit_failure(machine(), UnitState("activating", "auto-restart", 0, 0, "1"))
    assert "about to restart" in out.reason


def test_restart_counter_and_new_pid_are_failures() -> None:
    out = unit_failure(machine(), UnitState("active", "running", 1, 5555))
    assert "NRestarts 0 -> 1" in out.reason
    out = unit_failure(machine(), UnitState("active", "running", 0, 5555))
    assert "4242 -> 5555" in out.reason


def test_main_process_gone() -> None:
    unit_failure(machine(), UnitState("deactivating", "stop-sigterm", 0, 0, "0"))


def test_unit_failure_report_waits_for_the_journal_to_catch_up() -> None:
    m = machine()
    assert m.on_unit(UnitState("activating", "auto-restart", 0, 0, "1"), 105.0) is None
    assert m.on_journal("[x] Error: fatal error while loading: /models/x: no such file", 105.2) is None
    out = m.on_journal("sglang.service: Main process exited, code=exited, status=1/FAILURE", 105.3)
    assert out is not None and out.kind is OutcomeKind.FAILED and "about to restart" in out.reason
    assert any("fatal error while loading" in line for line in out.lines)


def test_healthy_unit_is_not_a_failure() -> None:
    m = machine()
    assert m.on_unit(RUNNING, 105.0) is None
    assert m.outcome is None


def test_pid_adopted_when_the_baseline_had_none() -> None:
    m = machine(baseline=UnitState("activating", "start", 0, 0))
    assert m.on_unit(UnitState("active", "running", 0, 777), 101.0) is None
    out = unit_failure(m, UnitState("active", "running", 0, 778), 102.0)
    assert "777 -> 778" in out.reason


def test_traceback_then_exit_fails_with_the_traceback() -> None:
    m = machine()
    for line in (
        "Traceback (most recent call last):",
        '  File "/opt/k26lab/k26ctl/lab/serve.py", line 88, in main',
        "    load_weights(path)",
        "FileNotFoundError: [Errno 2] No such file or directory: '/opt/k26lab/models/missing'",
    ):
        assert m.on_journal(line, 102.0) is None
    out = m.on_journal("sglang.service: Main process exited, code=exited, status=1/FAILURE", 102.1)
    assert out is not None and out.kind is OutcomeKind.FAILED
    assert any("FileNotFoundError" in line for line in out.lines)


def test_warning_with_stack_trace_is_not_fatal() -> None:
    m = machine()
    for line in (
        "[2026-11-29 10:01:12 TP0] WARNING: Failed to load the fast tokenizer, falling back",
        "Traceback (most recent call last):",
        '  File "x.py", line 1, in f',
        "OSError: Can't load tokenizer",
        "[2026-11-29 10:01:13 TP0] Load weight begin. avail mem=93.41 GB",
        "[2026-11-29 10:02:11 TP0] Loading safetensors checkpoint shards:  45% Completed | 29/64",
    ):
        assert m.on_journal(line, 102.0) is None
    assert m.on_tick(110.0) is None
    assert m.progress is not None and m.progress.percent == 45
    m.on_journal("The server is fired up and ready to roll!", 111.0)
    out = m.on_probe(OK, 111.0)
    assert out is not None and out.kind is OutcomeKind.READY


def test_scheduler_failure_waits_briefly_for_its_traceback_then_fails() -> None:
    m = machine()
    assert (
        m.on_journal("[x TP0] Scheduler hit an exception: Traceback (most recent call last):", 200.0) is None
    )
    assert not m.probe_due(300.0)  # no probing once a fatal line was seen
    assert m.on_journal('  File "scheduler.py", line 1, in run', 200.1) is None
    out = m.on_journal("RuntimeError: CUDA error: an illegal memory access was encountered", 200.2)
    assert out is not None and out.kind is OutcomeKind.FAILED
    assert any("illegal memory access" in line for line in out.lines)


def test_fatal_line_without_traceback_fails_after_the_grace() -> None:
    m = machine()
    m.on_journal("[x TP0] Scheduler hit an exception: Traceback (most recent call last):", 200.0)
    assert m.on_tick(200.2) is None
    assert m.next_wakeup(200.2) == 200.5
    out = m.on_tick(200.5)
    assert out is not None and out.kind is OutcomeKind.FAILED and "subprocess-exception" in out.reason


def test_sigquit_line_is_fatal_at_once() -> None:
    m = machine()
    out = m.on_journal("[x] Received sigquit from a child process. It usually means the child failed.", 10.0)
    assert out is not None and out.kind is OutcomeKind.FAILED


def test_old_process_lines_ignored_until_the_new_start() -> None:
    m = machine(armed=False)
    assert m.on_journal("Stopping sglang.service - SGLang server...", 100.1, timestamp_us=500_000) is None
    assert m.on_journal("KeyboardInterrupt", 100.1) is None
    assert m.on_journal("sglang.service: Main process exited, code=killed, status=2/INT", 100.2) is None
    assert m.outcome is None
    m.on_journal("Stopped sglang.service - SGLang server.", 100.25, timestamp_us=750_000)
    assert m.server_stop_seconds == 0.25
    m.on_journal("Started sglang.service - SGLang server.", 100.3, timestamp_us=1_000_000)
    assert m.armed
    m.on_journal("The server is fired up and ready to roll!", 103.3, timestamp_us=4_250_000)
    assert m.server_load_seconds == 3.25
    out = m.on_journal("sglang.service: Main process exited, code=exited, status=1/FAILURE", 104.0)
    assert out is not None and out.kind is OutcomeKind.FAILED


def test_timeout() -> None:
    m = machine(timeout=60.0)
    assert m.on_tick(159.9) is None
    m.on_probe(ProbeResult(False, "/health: HTTP 503"), 150.0)
    out = m.on_tick(160.0)
    assert out is not None and out.kind is OutcomeKind.TIMEOUT and "HTTP 503" in out.reason


def test_outcome_is_final() -> None:
    m = machine()
    first = m.on_probe(OK, 101.0)
    assert m.on_unit(UnitState("failed", "failed"), 102.0) is first
    assert m.on_tick(200.0) is first


def test_probes_quicken_once_the_weights_are_loaded() -> None:
    m = machine()
    m.on_probe(NOT_YET, 101.0)
    assert m.next_wakeup(101.0) == 102.0
    m.on_journal("[x TP0] Load weight end. elapsed=371.22 s, type=DeepseekV3ForCausalLM", 101.3)
    assert m.next_wakeup(101.3) == 101.5
    m.on_probe(NOT_YET, 101.5)
    assert round(m.next_wakeup(101.5), 3) == 101.7
    m.on_probe(NOT_YET, 112.0)  # the burst is over: back to the normal pace
    assert m.next_wakeup(112.0) == 113.0


def test_probes_quicken_around_the_expected_ready_time() -> None:
    m = machine(expected_load=5.0)  # this host's last load took 5 s
    m.on_probe(NOT_YET, 101.0)
    assert m.next_wakeup(101.0) == 102.0
    for t in (102.0, 103.0):
        m.on_probe(NOT_YET, t)
    assert m.next_wakeup(103.0) == 104.0  # a second before the expected ready time
    m.on_probe(NOT_YET, 104.0)
    assert round(m.next_wakeup(104.0), 3) == 104.2


def test_the_target_models_load_time_is_kept_not_the_drafts() -> None:
    """Every rank logs `Load weight end.` for the target, then again for the draft model (last)."""
    m = machine()
    for rank in range(2):
        m.on_journal(f"[x TP{rank}] Load weight end. elapsed=371.22 s, type=DeepseekV3ForCausalLM", 101.0)
    for rank in range(2):
        m.on_journal(f"[x TP{rank}] Load weight end. elapsed=4.10 s, type=DFlashDraftModel", 102.0)
    assert m.reported_load_seconds == 371.22


def test_a_server_that_keeps_naming_other_models_fails_at_the_third_probe_not_at_the_timeout() -> None:
    renamed = ProbeResult(
        False, "/v1/models: model 'k26' not served (serving ['/opt/models/k26'])", wrong_model=True
    )
    m = machine()
    assert m.on_probe(renamed, 101.0) is None
    assert m.on_probe(NOT_YET, 102.0) is None  # not consecutive: the count starts again
    assert m.on_probe(renamed, 103.0) is None and m.on_probe(renamed, 104.0) is None
    out = m.on_probe(renamed, 105.0)
    assert out is not None and out.kind is OutcomeKind.FAILED
    assert "does not serve the profile's model" in out.reason and "/opt/models/k26" in out.reason
    assert "deploy --force" in out.reason


def test_a_model_list_that_comes_right_is_ready() -> None:
    renamed = ProbeResult(False, "/v1/models: model 'k26' not served (serving ['x'])", wrong_model=True)
    m = machine()
    assert m.on_probe(renamed, 101.0) is None and m.on_probe(renamed, 102.0) is None
    out = m.on_probe(OK, 103.0)
    assert out is not None and out.kind is OutcomeKind.READY
