"""Small pieces of the remote layer that need no host: ssh_config resolution, journal JSON, argv wrapping."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from k26ctl.remote.local import LocalHost
from k26ctl.remote.ssh import load_ssh_config, resolve_target
from k26ctl.remote.systemd import _priority_arg, _since_arg, parse_journal_line


def test_ssh_config_resolution(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(
        "Host k26-host\n  HostName gpu-7.internal\n  User ops\n  Port 2202\n  IdentityFile ~/.ssh/k26\n"
        "  ProxyJump bastion,jump2:2222\n  UserKnownHostsFile /etc/k26/known_hosts ~/.ssh/known_hosts\n"
        "Host *\n  User nobody-default\n"
    )
    cfg = load_ssh_config(str(config))
    target = resolve_target("k26-host", config=cfg)
    assert target.hostname == "gpu-7.internal" and target.user == "ops" and target.port == 2202
    assert target.identity_files == [str(Path("~/.ssh/k26").expanduser())]
    assert target.proxy_jump == ["bastion", "jump2:2222"]
    assert target.known_hosts[0] == "/etc/k26/known_hosts"
    assert target.known_hosts_name == "[gpu-7.internal]:2202"
    # explicit profile values win over the config, like ssh's command-line options
    explicit = resolve_target("k26-host", user="root", port=22, identity_file="/k", config=cfg)
    assert (explicit.user, explicit.port, explicit.identity_files) == ("root", 22, ["/k"])
    assert resolve_target("admin@other", config=cfg).user == "admin"
    assert resolve_target("other", config=cfg).user == "nobody-default"
    assert resolve_target("other", config=cfg).proxy_jump == []


def test_journal_json_lines() -> None:
    line = json.dumps(
        {"__CURSOR": "s=1;i=2", "__REALTIME_TIMESTAMP": "1700000000123456", "PRIORITY": "3",
         "MESSAGE": "boom", "_PID": "42"}
    )  # fmt: skip
    entry = parse_journal_line(line)
    assert entry is not None
    assert (entry.cursor, entry.timestamp_us, entry.priority, entry.message, entry.pid) == (
        "s=1;i=2", 1700000000123456, 3, "boom", 42,
    )  # fmt: skip
    binary = parse_journal_line(json.dumps({"MESSAGE": [104, 105, 255], "__CURSOR": "c"}))
    assert binary is not None and binary.message == "hi\ufffd" and binary.priority == 6 and binary.pid is None
    assert parse_journal_line("-- No entries --") is None
    assert parse_journal_line("") is None


def test_journal_arguments() -> None:
    assert _since_arg(1700000000.5) == "@1700000000.500000"
    assert _since_arg("-5min") == "-5min"
    assert _priority_arg("warning") == "warning" and _priority_arg(3) == "3"
    with pytest.raises(ValueError):
        _priority_arg("loud")
    with pytest.raises(ValueError):
        _priority_arg(9)


def test_argv_wrapping_for_sudo_and_env() -> None:
    host = LocalHost(sudo=True)  # as if the login user were not root
    wrapped = host._wrap(["systemctl", "restart", "a b"], sudo=True, env={"K": "v w"})
    assert wrapped == ["sudo", "-n", "--", "env", "K=v w", "systemctl", "restart", "a b"]
    assert shlex.split(shlex.join(wrapped)) == wrapped
    assert LocalHost(sudo=False)._wrap(["true"], sudo=True) == ["true"]
    with pytest.raises(ValueError):
        host._wrap(["true"], sudo=False, env={"BAD NAME": "x"})
