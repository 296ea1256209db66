"""A rendered unit on real systemd over real SSH: upload, daemon-reload, restart, journal, stop, and the
argv/environment the started process really receives."""

from __future__ import annotations

import json
import time

import pytest

from k26ctl.lab.host import LabHostState
from k26ctl.remote.ssh import SSHHost
from k26ctl.remote.systemd import Systemd
from k26ctl.render import render_launch, render_unit, unit_name, unit_path
from tests.support.hosts import lab_profile

pytestmark = pytest.mark.labhost

HELPER_DIR = "/opt/k26lab/testmods"
OUT_DIR = "/opt/k26lab/testout"

# Started by systemd as `python -m k26argvdump FLAGS`: records what it received, logs, then waits.
ARGV_DUMP = b"""\
import json, os, sys, time
out = os.environ["K26_ARGV_OUT"]
record = {"argv": sys.argv[1:], "executable": sys.executable,
          "env": {k: v for k, v in os.environ.items() if k.startswith("K26T_")}}
with open(out + ".tmp", "w", encoding="utf-8") as f:
    json.dump(record, f, ensure_ascii=False)
os.replace(out + ".tmp", out)
print("k26argvdump ready", flush=True)
print("<4>k26argvdump warning line", file=sys.stderr, flush=True)
time.sleep(600)
"""

TRICKY_ARGS = [
    "--tricky-space",
    "two words",
    "--quotes",
    "it's \"quoted\" 'twice'",
    "--percent",
    "100% %n %%",
    "--dollar",
    "$HOME ${PATH} $$",
    "--backslash",
    "back\\slash \\n \\\\ end\\",
    "--unicode",
    "ünïcødé — ✓ 日本",
    "--semicolon",
    "a;b && c | d > e",
    "--empty",
    "",
]

TRICKY_ENV = {
    "K26T_SPACES": "a b  c",
    "K26T_QUOTES": 'it\'s "x"',
    "K26T_PERCENT": "50% %i",
    "K26T_DOLLAR": "$HOME ${X}",
    "K26T_BACKSLASH": "c:\\dir\\ end\\",
    "K26T_UNICODE": "ünï ✓",
}


def _profile(lab: LabHostState, service: str, out: str, extra_args: list[str]):  # type: ignore[no-untyped-def]
    return lab_profile(
        lab,
        service={
            "name": service,
            "restart": "no",
            "environment": {"PYTHONPATH": HELPER_DIR, "K26_ARGV_OUT": out, **TRICKY_ENV},
        },
        sglang={
            "python": "/opt/k26lab/venv/bin/python",
            "entrypoint": "k26argvdump",
            "model_path": "/opt/k26lab/models/none",
            "tp_size": 1,
            "extra_args": extra_args,
        },
    )


def _wait_for_file(host: SSHHost, path: str, timeout: float = 20.0) -> bytes:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        data = host.read_file(path)
        if data is not None:
            return data
        time.sleep(0.1)
    raise AssertionError(f"{path} did not appear within {timeout} s")


def _wait_for_message(sd: Systemd, cursor: str, text: str, timeout: float = 10.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        messages = [e.message for e in sd.journal(cursor=cursor)]
        if any(text in m for m in messages):
            return messages
        time.sleep(0.1)
    raise AssertionError(f"{text!r} not in the journal after {timeout} s")


@pytest.fixture
def prepared(host: SSHHost) -> SSHHost:
    host.run(["mkdir", "-p", HELPER_DIR, OUT_DIR], check=True)
    host.write_file_atomic(f"{HELPER_DIR}/k26argvdump.py", ARGV_DUMP, backup=False)
    return host


def test_rendered_unit_lifecycle_and_argv_round_trip(prepared: SSHHost, lab_host: LabHostState) -> None:
    host = prepared
    out = f"{OUT_DIR}/argv-roundtrip.json"
    host.run(["rm", "-f", out], check=True)
    profile = _profile(lab_host, "k26t-argv", out, TRICKY_ARGS)
    launch = render_launch(profile)
    unit_text = render_unit(profile)
    sd = Systemd(host, unit_name(profile))

    written = host.write_file_atomic(unit_path(profile), unit_text.encode())
    assert written.changed
    cursor = sd.cursor_now()
    sd.daemon_reload()
    sd.restart()
    try:
        record = json.loads(_wait_for_file(host, out))
        # exactly the argv the profile asked for, after `python -m k26argvdump`
        assert launch.argv[:3] == ["/opt/k26lab/venv/bin/python", "-m", "k26argvdump"]
        assert record["argv"] == launch.argv[3:]
        assert record["argv"][-len(TRICKY_ARGS) :] == TRICKY_ARGS
        assert record["executable"] == "/opt/k26lab/venv/bin/python"
        assert record["env"] == TRICKY_ENV

        assert sd.is_active() == "active"
        props = sd.show()
        assert props["ActiveState"] == "active"
        assert props["SubState"] == "running"
        assert int(props["MainPID"]) > 0
        assert props["NRestarts"] == "0"
        assert props["ActiveEnterTimestamp"]

        messages = _wait_for_message(sd, cursor, "k26argvdump warning line")
        assert "k26argvdump ready" in messages
        warnings = [e.message for e in sd.journal(cursor=cursor, priority="warning")]
        assert "k26argvdump warning line" in warnings
        assert "k26argvdump ready" not in warnings
        assert [e.message for e in sd.journal(cursor=cursor, lines=1)] == [messages[-1]]
        since = [e.message for e in sd.journal(since=time.time() - 600)]
        assert "k26argvdump ready" in since
    finally:
        sd.stop()
    assert sd.is_active() == "inactive"
    assert sd.show("Result")["Result"] == "success"

    again = host.write_file_atomic(unit_path(profile), unit_text.encode())
    assert not again.changed and again.backup_path is None


def test_failed_start_shows_in_state_and_journal(prepared: SSHHost, lab_host: LabHostState) -> None:
    host = prepared
    profile = _profile(lab_host, "k26t-crash", f"{OUT_DIR}/crash.json", [])
    # no K26_ARGV_OUT: the helper dies with a KeyError traceback
    profile.service.environment = {"PYTHONPATH": HELPER_DIR}
    sd = Systemd(host, unit_name(profile))
    host.write_file_atomic(unit_path(profile), render_unit(profile).encode())
    cursor = sd.cursor_now()
    sd.daemon_reload()
    sd.restart()
    deadline = time.monotonic() + 20
    while sd.is_active() not in ("failed", "inactive") and time.monotonic() < deadline:
        time.sleep(0.1)
    props = sd.show()
    assert props["ActiveState"] == "failed"
    assert props["Result"] == "exit-code"
    assert props["ExecMainStatus"] == "1"
    messages = _wait_for_message(sd, cursor, "KeyError")
    assert any("K26_ARGV_OUT" in m for m in messages)
    sd.reset_failed()


def test_unit_edited_without_daemon_reload_is_detected(prepared: SSHHost, lab_host: LabHostState) -> None:
    host = prepared
    profile = _profile(lab_host, "k26t-reload", f"{OUT_DIR}/reload.json", ["--first"])
    sd = Systemd(host, unit_name(profile))
    host.write_file_atomic(unit_path(profile), render_unit(profile).encode())
    sd.daemon_reload()
    sd.restart()  # a loaded (running) unit: an idle one is unloaded and re-read on every query
    try:
        assert sd.needs_daemon_reload() is False

        edited = _profile(lab_host, "k26t-reload", f"{OUT_DIR}/reload.json", ["--second"])
        result = host.write_file_atomic(unit_path(profile), render_unit(edited).encode())
        assert result.changed and result.backup_path
        assert sd.needs_daemon_reload() is True
        # systemd still holds the old command line until the reload
        assert "--first" in sd.show("ExecStart")["ExecStart"]
        sd.daemon_reload()
        assert sd.needs_daemon_reload() is False
        assert "--second" in sd.show("ExecStart")["ExecStart"]
    finally:
        sd.stop()


@pytest.mark.timeout(60)
def test_follow_streams_new_entries(prepared: SSHHost, lab_host: LabHostState) -> None:
    host = prepared
    out = f"{OUT_DIR}/follow.json"
    profile = _profile(lab_host, "k26t-follow", out, [])
    sd = Systemd(host, unit_name(profile))
    host.write_file_atomic(unit_path(profile), render_unit(profile).encode())
    sd.daemon_reload()
    cursor = sd.cursor_now()
    stream = sd.follow(cursor)
    sd.restart()
    seen = []
    try:
        for entry in stream:
            seen.append(entry.message)
            assert entry.cursor and entry.timestamp_us > 0
            if entry.message == "k26argvdump ready":
                assert entry.pid == int(sd.show("MainPID")["MainPID"])
                break
    finally:
        stream.close()  # type: ignore[attr-defined]
        sd.stop()
    assert any(m.startswith("Started") for m in seen)
    # nothing new for this unit: a follow with a timeout ends by itself
    start = time.monotonic()
    assert list(sd.follow(sd.cursor_now(), timeout=1.0)) == []
    assert time.monotonic() - start < 60  # ended by its 1 s timeout (generous for a busy machine)
    # closing the stream stopped the remote journalctl
    deadline = time.monotonic() + 30
    while host.run(["pgrep", "-f", "journalctl.*k26t-follow"]).ok and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not host.run(["pgrep", "-f", "journalctl.*k26t-follow"]).ok
