"""The lab host itself: parallel hosts, provisioning, crash recovery, and a teardown that leaves nothing."""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from k26ctl.errors import K26Error
from k26ctl.lab.host import INNER_PROJECT_DIR, LabHostState, lab_down, lab_status, lab_up, leftovers
from k26ctl.lab.host import machine as labhost
from k26ctl.remote import connect
from k26ctl.resources import project_root
from tests.support.cli import run_k26ctl
from tests.support.hosts import lab_host_name, lab_profile

NAMES = (lab_host_name("p1"), lab_host_name("p2"))


def _skip_without_lab() -> None:
    reason = labhost.prerequisite_problem()
    if reason:
        pytest.skip(f"lab host unavailable: {reason}")


@pytest.mark.labhost
def test_parallel_hosts_crash_recovery_and_clean_teardown() -> None:
    _skip_without_lab()
    try:
        with ThreadPoolExecutor(2) as pool:
            states = list(pool.map(lab_up, NAMES))
        assert states[0].index != states[1].index
        for state in states:
            assert lab_status(state.name).running
            with connect(lab_profile(state)) as h:
                assert h.run(["hostname"]).stdout.strip() == state.name
                assert h.run(["systemctl", "is-system-running"]).stdout.strip() in ("running", "degraded")
        assert lab_up(NAMES[0]).pid == states[0].pid  # already up: the same host

        # crashed hosts (nspawn killed outright) are stale; the next up replaces its own and sweeps
        # the others away
        for state in states:
            os.kill(state.pid, signal.SIGKILL)
        deadline = time.monotonic() + 60  # generous: reaping a killed nspawn waits on a busy machine
        while {lab_status(n).state for n in NAMES} != {"stale"} and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [lab_status(n).state for n in NAMES] == ["stale", "stale"]
        revived = lab_up(NAMES[0])
        assert revived.pid != states[0].pid
        assert lab_status(NAMES[1]).state == "down"
        assert leftovers(NAMES[1], states[1]) == []
        with connect(lab_profile(revived)) as h:
            assert h.run(["true"]).ok
        states[0] = revived
    finally:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lab_down, NAMES))
    for state in states:
        assert leftovers(state.name, state) == []
        assert not Path("/run/netns", state.netns).exists()
        assert not Path(f"/proc/{state.pid}").exists() or _is_other_process(state)
        assert lab_status(state.name).state == "down"


def _is_other_process(state: LabHostState) -> bool:
    return labhost._start_ticks(state.pid) != state.pid_start_ticks


@pytest.mark.labhost
def test_provisioning(lab_host: LabHostState) -> None:
    root = project_root()
    with connect(lab_profile(lab_host)) as h:
        probe = h.run(
            [
                "/opt/k26lab/venv/bin/python",
                "-c",
                "import importlib.util, sys, k26ctl; print(sys.prefix); print(k26ctl.__file__); "
                "print(importlib.util.find_spec('torch') is not None)",
            ],
            check=True,
        )
        prefix, k26ctl_file, has_torch = probe.stdout.split()
        assert prefix == "/opt/k26lab/venv"
        # k26ctl imports from the project's second, PrivateTmp-proof mount, which is this checkout
        assert k26ctl_file == f"{INNER_PROJECT_DIR}/k26ctl/__init__.py"
        assert h.read_file(k26ctl_file) == (root / "k26ctl" / "__init__.py").read_bytes()
        assert has_torch == "True"
        # the project is visible read-only at its own path
        assert h.run(["test", "-f", str(root / "pyproject.toml")]).ok
        denied = h.run(["touch", str(root / "k26ctl-write-probe")])
        assert not denied.ok and "Read-only" in denied.stderr
        # the lab SGLang tree and weights (when the checkout has them) are copied under /opt/k26lab
        tree = root / "k26ctl" / "lab" / "server" / "sglang_tree" / "sglang" / "__init__.py"
        if tree.exists():
            assert h.read_file("/opt/k26lab/sglang/__init__.py") == tree.read_bytes()
        weights = root / "k26ctl" / "lab" / "server" / "weights"
        if weights.is_dir():
            for item in weights.iterdir():
                if not item.name.startswith((".", "__")):
                    assert h.run(["test", "-e", f"/opt/k26lab/models/{item.name}"]).ok, item.name
        # a plain, fast login shell: no pyenv init from the image's bashrc
        assert "pyenv" not in (h.read_file("/root/.bashrc") or b"").decode()


def test_missing_packages_say_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(labhost.os, "geteuid", lambda: 0)
    monkeypatch.setattr(labhost, "missing_packages", lambda: ["systemd-container", "openssh-server"])
    with pytest.raises(K26Error) as exc:
        labhost.ensure_prerequisites(install_deps=False)
    assert "apt-get install -y systemd-container openssh-server" in (exc.value.hint or "")
    assert "--install-deps" in (exc.value.hint or "")


def test_cli_status_and_down_of_a_host_that_is_not_there() -> None:
    _skip_without_lab()
    name = "t-remote-absent"
    status = run_k26ctl("lab", "host", "status", "--name", name, "--json")
    assert status.returncode == 1
    assert '"state": "down"' in status.stdout
    down = run_k26ctl("lab", "host", "down", "--name", name)
    assert down.returncode == 0 and "was not running" in down.stdout
    bad = run_k26ctl("lab", "host", "up", "--name", "Bad Name")
    assert bad.returncode == 78 and bad.stderr.startswith("error: bad lab host name")
