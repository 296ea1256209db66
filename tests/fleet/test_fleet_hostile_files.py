"""Fleet files and fleet/sweep state read from disk: special files, oversized files, duplicate keys and
deep nesting are one ConfigError (exit 78), never a hang or a traceback."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from k26ctl.errors import ConfigError
from k26ctl.fleet.model import load_fleet
from k26ctl.fleet.record import LocalStore
from k26ctl.fleet.source import is_fleet_file
from k26ctl.resources import profiles_dir
from k26ctl.sweep.prompts import load_prompts
from k26ctl.sweep.state import SweepSession
from tests.support.cli import run_k26ctl

LAB = profiles_dir() / "lab"

DUPLICATE = f"""fleet:
  name: lab3
  profile: {LAB / "ddtree-b7.yaml"}
  router: {{url: "http://127.0.0.1:30000"}}
  members:
    - {{name: a, url: "http://10.231.1.2:30000", set: [host.lab=a]}}
fleet:
  name: other
"""


def _load_with_watchdog(path: Path) -> ConfigError:
    """load_fleet(path) must refuse promptly; a blocking open of a FIFO would hang this thread."""
    caught: list[BaseException] = []

    def run() -> None:
        try:
            load_fleet(path)
        except BaseException as exc:  # handed to the test thread
            caught.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "load_fleet blocked"
    assert len(caught) == 1 and isinstance(caught[0], ConfigError), caught
    return caught[0]


def test_a_fleet_file_with_a_duplicate_key_is_refused_with_its_position(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(DUPLICATE)
    error = _load_with_watchdog(path)
    assert error.exit_code == 78 and "duplicate key 'fleet'" in str(error) and "fleet.yaml:7:" in str(error)


def test_a_fifo_as_fleet_file_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fleet.yaml"
    os.mkfifo(fifo)
    assert not is_fleet_file(fifo)
    error = _load_with_watchdog(fifo)
    assert "FIFO" in str(error) and "only regular files" in str(error)


def test_a_character_device_and_a_huge_fleet_file_are_refused(tmp_path: Path) -> None:
    assert "character device" in str(_load_with_watchdog(Path("/dev/zero")))
    huge = tmp_path / "huge.yaml"
    huge.write_text("fleet:\n  name: x\n" + "#" * (2 << 20) + "\n")
    assert not is_fleet_file(huge)
    assert "limit" in str(_load_with_watchdog(huge))


def test_deep_nesting_in_a_fleet_file_is_a_limit_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("fleet: " + "[" * 600 + "]" * 600 + "\n")
    assert "nested deeper" in str(_load_with_watchdog(path))


def test_the_cli_names_a_duplicate_key_in_a_fleet_file_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(DUPLICATE)
    proc = run_k26ctl("deploy", str(path), "--yes", env={"XDG_STATE_HOME": str(tmp_path)})
    assert proc.returncode == 78, proc.stderr
    assert "duplicate key 'fleet'" in proc.stderr and "Traceback" not in proc.stderr


def test_damaged_fleet_run_records_are_config_errors(tmp_path: Path) -> None:
    store = LocalStore("lab3", root=tmp_path)
    assert store.load() is None
    store.path.write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(ConfigError, match=r"run\.json: not readable \(nested deeper than 64 levels\)"):
        store.load()
    store.path.unlink()
    os.mkfifo(store.path)
    with pytest.raises(ConfigError, match="FIFO"):
        store.load()


def test_sweep_session_files_and_prompts_are_read_bounded(tmp_path: Path) -> None:
    session = SweepSession("s1", directory=tmp_path)
    os.mkfifo(session.log_path)
    with pytest.raises(ConfigError, match="FIFO"):
        session.records()
    session.spec_path.write_text('{"spec": {}, "spec": {}}'.replace("{}", "[" * 5000 + "]" * 5000, 1))
    with pytest.raises(ConfigError, match=r"s1\.json: not readable \(nested deeper than 64 levels\)"):
        session.spec()
    dup = tmp_path / "dup.yaml"
    dup.write_text("- {messages: [{role: user, content: a}], messages: []}\n")
    with pytest.raises(ConfigError, match="duplicate key 'messages'"):
        load_prompts(dup)
    with pytest.raises(ConfigError, match="character device"):
        load_prompts(Path("/dev/zero"))
