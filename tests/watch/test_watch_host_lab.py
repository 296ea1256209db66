"""On a real lab host: `watch install --on host` puts the watcher beside the server it watches (deploy's
atomic write, daemon-reload, enable, start, over SSH); the service runs the host's k26ctl against the
loopback URL, writes its state and the change history on the host, `k26ctl status` shows the host's
verdict, and `watch uninstall --on host` removes it. A watcher on this machine appends its changes to the
same host file over SSH."""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from typing import Any

import pytest

from k26ctl.watch.host_history import read_watch_history, watch_history_path
from k26ctl.watch.host_unit import host_unit_name, host_unit_path, host_watch_dir, read_host_last
from k26ctl.watch.store import WatchStore, target_key
from tests.deploy.labdeploy import PATCHED, lab_connection, lab_sets
from tests.support.cli import run_k26ctl

pytestmark = [pytest.mark.labhost, pytest.mark.lab, pytest.mark.timeout(600)]


def _wait_for_host_verdict(lab: Any, deadline_s: float) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The host watcher's last record and history once both exist (bounded wait, polled)."""
    deadline = time.monotonic() + deadline_s
    last: dict[str, Any] | None = None
    history: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        with lab_connection(PATCHED, lab) as (host, _systemd, profile):
            last = read_host_last(host, profile.service.name)
            history = read_watch_history(host, profile.service.name)
        if last is not None and history:
            break
        time.sleep(2)
    return last, history


def test_the_watcher_installed_on_the_host_records_there_and_is_removed(lab_host: Any) -> None:
    sets = lab_sets(lab_host)
    deployed = run_k26ctl("deploy", PATCHED, *sets, "--yes", "--no-smoke", "--force", timeout=300)
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr

    # an interpreter that cannot import k26ctl there: refused before anything is written
    refused = run_k26ctl(
        "watch", "install", PATCHED, *sets, "--on", "host", "--host-python", "/usr/bin/false"
    )
    assert refused.returncode == 78 and "cannot import k26ctl" in refused.stderr, refused.stderr
    with lab_connection(PATCHED, lab_host) as (host, _systemd, profile):
        assert host.read_file(host_unit_path(profile), sudo=True) is None

    installed = run_k26ctl(
        "watch", "install", PATCHED, *sets, "--on", "host", "--interval", "5", "--metrics-port", "0",
        "--json", timeout=120,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout + installed.stderr
    with lab_connection(PATCHED, lab_host) as (host, _systemd, profile):
        service = profile.service.name
        unit = (host.read_file(host_unit_path(profile), sudo=True) or b"").decode()
        # the host's own interpreter, the server's loopback URL, the suite copied beside the state
        assert f"ExecStart={profile.sglang.python} -m k26ctl watch run --url http://127.0.0.1:30000 " in unit
        assert f"--suite {host_watch_dir(service)}/suite.yaml" in unit and f"--host-state {service}" in unit
        assert host.read_file(f"{host_watch_dir(service)}/suite.yaml", sudo=True) is not None

    last, history = _wait_for_host_verdict(lab_host, 240)
    assert last is not None and last["state"] == "healthy", last
    assert history and history[0]["before"] == "unknown" and history[0]["after"] == "healthy", history

    watch_status = run_k26ctl("watch", "status", PATCHED, *sets, "--on", "host", "--json")
    assert watch_status.returncode == 0, watch_status.stderr
    doc = json.loads(watch_status.stdout)
    assert doc["service"]["ActiveState"] == "active" and doc["service"]["UnitFileState"] == "enabled", doc
    assert doc["last"]["state"] == "healthy"

    status = run_k26ctl("status", PATCHED, *sets, "--json", timeout=120)
    doc = json.loads(status.stdout)
    assert doc["watch_source"] == "host" and doc["watch"]["state"] == "healthy", doc.get("watch")
    text = run_k26ctl("status", PATCHED, *sets, timeout=120)
    assert "watch: healthy" in text.stdout and text.stdout.rstrip().endswith("[host]"), text.stdout

    shown = run_k26ctl("watch", "history", PATCHED, *sets, "--on", "host", "--json")
    assert [json.loads(line) for line in shown.stdout.splitlines()][: len(history)] == history, shown.stderr
    shown = run_k26ctl("watch", "history", PATCHED, *sets, "--on", "host")
    assert "unknown -> healthy [seen by " in shown.stdout.splitlines()[0], shown.stdout + shown.stderr

    logs = run_k26ctl("watch", "logs", PATCHED, *sets, "--on", "host", "-n", "20")
    assert '"state": "healthy"' in logs.stdout, logs.stdout + logs.stderr

    removed = run_k26ctl("watch", "uninstall", PATCHED, *sets, "--on", "host")
    assert removed.returncode == 0 and "removed" in removed.stdout, removed.stdout + removed.stderr
    with lab_connection(PATCHED, lab_host) as (host, _systemd, profile):
        from k26ctl.remote.systemd import Systemd

        gone = Systemd(host, host_unit_name(profile), user=False).show("LoadState", "ActiveState")
        assert host.read_file(host_unit_path(profile), sudo=True) is None
        assert gone == {"LoadState": "not-found", "ActiveState": "inactive"}, gone
        # the history stays beside the deploy history after the watcher is gone
        kept = read_watch_history(host, profile.service.name)
        assert kept[: len(history)] == history
        assert watch_history_path(service) == f"/var/lib/k26ctl/{service}/watch-history.jsonl"
    assert history[0]["watcher"] != socket.gethostname()  # written by the host's own watcher

    # A watcher on this machine records its changes on the same host file over SSH.
    name = f"watch-lab-{os.getpid()}"  # a fresh local state: its first verdict is a change
    local_store = WatchStore.for_target(target_key(name, None), create=False)
    try:
        once = run_k26ctl("watch", PATCHED, *sets, "--set", f"name={name}", "--once", "--json", timeout=240)
        assert once.returncode == 0, once.stdout + once.stderr
        assert "host_history_error" not in once.stdout, once.stdout
        with lab_connection(PATCHED, lab_host) as (host, _systemd, profile):
            mine = [r for r in read_watch_history(host, profile.service.name) if r.get("target") == name]
        assert len(mine) == 1 and mine[0]["after"] == "healthy", mine
        assert mine[0]["watcher"] == socket.gethostname()
        assert local_store.read_history()[-1]["time"] == mine[0]["time"]
    finally:
        shutil.rmtree(local_store.root, ignore_errors=True)
