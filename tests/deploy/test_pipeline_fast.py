"""Every branch of the deploy pipeline in-process, against a FakeHost with a simulated unit: the real
pipeline, plan, readiness loop and history code, with no root, no nspawn and no network but loopback."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from k26ctl.deploy import DeployOptions, DeployResult, deploy, rollback
from k26ctl.deploy.connection import ConnectionLostError
from k26ctl.deploy.history import history_path, parse_history
from k26ctl.errors import ConfigError, ExitCode, Interrupted, UnreachableError, UsageError
from k26ctl.profile import LoadedProfile, load_profile
from k26ctl.remote.base import CommandResult
from k26ctl.remote.fake import FakeHost
from k26ctl.render import render_unit, unit_path
from k26ctl.resources import profiles_dir
from tests.support.fake_service import FakeService, ReadinessServer

PROFILE = profiles_dir() / "lab" / "none.yaml"


@dataclass
class Rig:
    host: FakeHost
    service: FakeService

    def load(self, *overrides: str) -> LoadedProfile:
        return load_profile(PROFILE, list(overrides))

    def deploy(self, loaded: LoadedProfile, **options: object) -> DeployResult:
        opts = DeployOptions(**{"yes": True, "smoke": False, **options})  # type: ignore[arg-type]
        return deploy(loaded, opts, connect=lambda profile, **_: self.host)

    def deployed_then(self, *overrides: str) -> tuple[LoadedProfile, LoadedProfile]:
        """The lab profile deployed (ok), and the same profile with `overrides`, not yet deployed."""
        first = self.load()
        assert self.deploy(first).exit_code == ExitCode.OK
        return first, self.load(*overrides)

    def unit_on_host(self, loaded: LoadedProfile) -> str | None:
        raw = self.host.files.get(unit_path(loaded.profile))
        return raw.decode() if raw is not None else None

    def history(self, loaded: LoadedProfile) -> list[str]:
        raw = self.host.files.get(history_path(loaded.profile.service.name), b"")
        return [record.kind for record in parse_history(raw.decode())]


@pytest.fixture
def rig() -> Iterator[Rig]:
    profile = load_profile(PROFILE).profile
    server = ReadinessServer(profile.served_name)
    host = FakeHost("fake host", forward_to=server.address)
    try:
        yield Rig(host, FakeService(host, profile))
    finally:
        host.close()
        server.close()


def test_a_first_deploy_writes_the_unit_restarts_and_waits_for_readiness(rig: Rig) -> None:
    loaded = rig.load()
    result = rig.deploy(loaded)
    assert result.exit_code == ExitCode.OK and result.verdict == "ok", result.message
    assert result.changed and result.restarted and result.ready_seconds is not None
    assert rig.unit_on_host(loaded) == render_unit(loaded.profile)
    assert rig.service.restarts == 1 and rig.host.ran("systemctl", "daemon-reload")
    assert rig.history(loaded) == ["deploy"]
    assert [name for name, _ in rig.host.locks_taken] == [loaded.profile.service.name]
    assert rig.host.held_locks() == [] and rig.host.closed


def test_no_change_touches_nothing_and_does_not_restart(rig: Rig) -> None:
    loaded = rig.load()
    assert rig.deploy(loaded).exit_code == ExitCode.OK
    writes_before = dict(rig.host.files)
    result = rig.deploy(loaded)
    assert result.exit_code == ExitCode.OK, result.message
    assert not result.changed and not result.restarted
    assert rig.service.restarts == 1
    assert {k: v for k, v in rig.host.files.items() if k != history_path(loaded.profile.service.name)} == {
        k: v for k, v in writes_before.items() if k != history_path(loaded.profile.service.name)
    }
    assert [s.status for s in result.steps if s.name == "readiness"] == ["ok"]


def test_check_reports_pending_changes_with_exit_3_and_changes_nothing(rig: Rig) -> None:
    loaded = rig.load()
    result = rig.deploy(loaded, check=True, yes=False)
    assert result.exit_code == ExitCode.CHANGES_PENDING == 3
    assert result.verdict == "changes-pending" and result.plan is not None and result.plan.has_changes
    assert rig.unit_on_host(loaded) is None and rig.host.files == {}
    assert rig.service.restarts == 0 and not rig.host.ran("systemctl", "daemon-reload")


def test_without_a_terminal_a_pending_change_is_refused_with_exit_2(rig: Rig) -> None:
    loaded = rig.load()
    with pytest.raises(UsageError) as refused:
        rig.deploy(loaded, yes=False, confirm=None)
    assert refused.value.exit_code == ExitCode.USAGE == 2
    assert "nothing was changed" in refused.value.message and "--yes" in (refused.value.hint or "")
    assert rig.host.files == {} and rig.service.restarts == 0
    assert rig.host.held_locks() == [] and rig.host.closed


def test_failed_readiness_rolls_back_to_the_previous_unit(rig: Rig) -> None:
    good = rig.load()
    assert rig.deploy(good).exit_code == ExitCode.OK
    bad = rig.load("sglang.decode_log_interval=77")
    rig.service.outcomes = ["fail", "ready"]  # the new unit fails to load, the restored one comes up
    result = rig.deploy(bad, rollback_on_failure=True)
    assert result.exit_code == ExitCode.FAILED and result.failure == "readiness"
    assert "did not become ready" in result.message and "rolled back" in result.message
    assert result.rolled_back
    assert rig.unit_on_host(good) == render_unit(good.profile)
    assert rig.service.restarts == 3
    assert rig.history(good) == ["deploy", "deploy", "rollback"]
    assert any("fake server refuses to load" in line for line in result.journal_lines)


def test_ctrl_c_during_apply_finishes_the_step_and_says_which_unit_is_in_place(rig: Rig) -> None:
    first, second = rig.deployed_then("sglang.decode_log_interval=77")

    def interrupted_reload(argv: tuple[str, ...], stdin: bytes | None) -> str:
        signal.raise_signal(signal.SIGINT)  # Ctrl-C while systemd reloads: held until the step ends
        return ""

    rig.host.on(("systemctl", "daemon-reload"), interrupted_reload)
    with pytest.raises(Interrupted) as stopped:
        rig.deploy(second)
    message = stopped.value.message
    assert stopped.value.exit_code == ExitCode.INTERRUPTED == 130
    assert "the new unit is in place" in message and "not restarted" in message, message
    assert rig.unit_on_host(second) == render_unit(second.profile)
    assert rig.service.restarts == 1
    assert rig.history(first) == ["deploy", "deploy"]  # the interrupted run is remembered on the host
    assert rig.host.held_locks() == []


def test_a_second_ctrl_c_after_the_read_back_keeps_its_account_of_the_host(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, second = rig.deployed_then("sglang.decode_log_interval=78")

    def interrupted_reload(argv: tuple[str, ...], stdin: bytes | None) -> str:
        signal.raise_signal(signal.SIGINT)  # the first Ctrl-C
        return ""

    real_lock = rig.host.lock

    @contextmanager
    def lock_then_ctrl_c(*args: Any, **kwargs: Any) -> Iterator[Any]:
        try:
            with real_lock(*args, **kwargs) as info:
                yield info
        finally:
            signal.raise_signal(signal.SIGINT)  # the second, as the lock is released after the read-back

    rig.host.on(("systemctl", "daemon-reload"), interrupted_reload)
    monkeypatch.setattr(rig.host, "lock", lock_then_ctrl_c)
    with pytest.raises(Interrupted) as stopped:
        rig.deploy(second)
    message = stopped.value.message
    assert stopped.value.exit_code == ExitCode.INTERRUPTED
    assert "the new unit is in place" in message and "not restarted" in message, message
    assert "not read back" not in message, message
    assert rig.host.held_locks() == []


def test_a_connection_lost_during_readiness_is_exit_69_naming_the_host_state(rig: Rig) -> None:
    first = rig.load()
    assert rig.deploy(first).exit_code == ExitCode.OK
    shows_after_restart: list[int] = []

    def vanish() -> CommandResult | None:
        if rig.service.restarts < 2:
            return None
        shows_after_restart.append(1)
        if len(shows_after_restart) == 1:
            return None  # the baseline read right after the restart still answers
        return CommandResult((), -1, "", "channel closed")

    rig.service.on_show = vanish
    rig.service.outcome = "hang"  # never ready: only the lost link can end the wait
    second = rig.load("sglang.decode_log_interval=77")
    with pytest.raises(ConnectionLostError) as lost:
        rig.deploy(second)
    message = lost.value.message
    assert lost.value.exit_code == ExitCode.UNAVAILABLE == 69
    assert message.startswith("lost the connection to fake host (the connection dropped)"), message
    assert "the new unit is in place" in message and "restarted, readiness unknown" in message, message
    assert "check the host and the network" in (lost.value.hint or "")


def test_rollback_restores_the_unit_before_the_last_change(rig: Rig) -> None:
    first, second = rig.deployed_then("sglang.decode_log_interval=77")
    assert rig.deploy(second).exit_code == ExitCode.OK
    result = rollback(second, DeployOptions(yes=True), connect=lambda profile, **_: rig.host)
    assert result.exit_code == ExitCode.OK, result.message
    assert rig.unit_on_host(first) == render_unit(first.profile)
    assert rig.history(first) == ["deploy", "deploy", "rollback"]


def test_an_unreadable_history_line_is_named_in_a_warning_and_the_rollback_uses_the_rest(rig: Rig) -> None:
    first, second = rig.deployed_then("sglang.decode_log_interval=77")
    assert rig.deploy(second).exit_code == ExitCode.OK
    path = history_path(first.profile.service.name)
    lines = rig.host.files[path].decode().splitlines()
    rig.host.files[path] = "\n".join([lines[0], '{"kind": "deploy", "time": 5', lines[1]]).encode() + b"\n"
    events: list[Any] = []
    result = rollback(second, DeployOptions(yes=True), events.append, connect=lambda profile, **_: rig.host)
    assert result.exit_code == ExitCode.OK, result.message
    warnings = [e.message for e in events if e.kind == "warning"]
    assert any("unreadable deploy history line" in w and f"{path}:2" in w for w in warnings), warnings
    assert rig.unit_on_host(first) == render_unit(first.profile)


def test_the_connection_opens_while_the_profile_is_validated_and_a_bad_profile_still_wins(
    rig: Rig,
) -> None:
    """The host is connected in the background during validation; a profile that fails validation
    is reported at once (not after a slow host answers), and the connection opened meanwhile is
    closed once it completes. A host that cannot be reached is reported only for a valid profile."""
    release = threading.Event()
    started = threading.Event()

    def slow_connect(profile: object, **_: object) -> FakeHost:
        started.set()
        release.wait(10)
        return rig.host

    bad = rig.load("sglang.extra_args=['--speculative-d', 'x']")
    with pytest.raises(ConfigError, match="flags/ambiguous"):
        deploy(bad, DeployOptions(yes=True, smoke=False), connect=slow_connect)
    assert started.is_set() and not rig.host.closed and rig.host.executed == []
    release.set()
    deadline = time.monotonic() + 30  # generous: the closing thread may wait for a core on a busy machine
    while not rig.host.closed and time.monotonic() < deadline:
        time.sleep(0.02)
    assert rig.host.closed, "the connection nobody took was left open"
    assert rig.host.executed == [], "validation failed, yet something ran on the host"

    def unreachable(profile: object, **_: object) -> FakeHost:
        raise UnreachableError("fake host: no route", "check the address")

    with pytest.raises(ConfigError):
        deploy(bad, DeployOptions(yes=True, smoke=False), connect=unreachable)
    with pytest.raises(UnreachableError):
        deploy(rig.load(), DeployOptions(yes=True, smoke=False), connect=unreachable)


def _class_with_a_field_that_takes_ctrl_c() -> None:
    """What a Ctrl-C looks like when it lands while a lazily imported module defines a dataclass:
    Python before 3.12 wraps what __set_name__ raises in RuntimeError (3.12 lets it through)."""

    class Field:
        def __set_name__(self, owner: type, name: str) -> None:
            raise KeyboardInterrupt

    type("Baseline", (), {"created": Field()})


def test_a_ctrl_c_that_python_wrapped_during_a_lazy_import_is_still_an_interrupt(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = rig.deployed_then("sglang.decode_log_interval=79")

    def smoke_importing(*args: object) -> None:
        _class_with_a_field_that_takes_ctrl_c()

    monkeypatch.setattr("k26ctl.deploy.pipeline.run_smoke_on_host", smoke_importing)
    with pytest.raises(Interrupted) as stopped:
        rig.deploy(second, smoke=True)
    message = stopped.value.message
    assert stopped.value.exit_code == ExitCode.INTERRUPTED
    assert "the new unit is in place" in message and "service was restarted" in message, message
    assert rig.history(first) == ["deploy", "deploy"]
    assert rig.host.held_locks() == []


def test_the_cli_exits_130_not_70_for_a_wrapped_ctrl_c(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from k26ctl.cli import app as cli_app
    from k26ctl.errors import interrupt_behind

    try:
        _class_with_a_field_that_takes_ctrl_c()
    except BaseException as exc:  # RuntimeError before 3.12, KeyboardInterrupt from 3.12
        wrapped = exc
    assert interrupt_behind(wrapped)
    assert not interrupt_behind(RuntimeError("a k26ctl bug"))
    looped = RuntimeError("a cycle")
    looped.__context__ = ValueError("back")
    looped.__context__.__context__ = looped
    assert not interrupt_behind(looped)

    def raising() -> None:
        raise RuntimeError("Error calling __set_name__") from KeyboardInterrupt()

    monkeypatch.setattr(cli_app, "app", raising)
    with pytest.raises(SystemExit) as ended:
        cli_app._main()
    assert ended.value.code == ExitCode.INTERRUPTED
    assert capsys.readouterr().err == "error: interrupted by Ctrl-C\n"
