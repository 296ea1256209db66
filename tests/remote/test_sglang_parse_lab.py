"""The host's own SGLang parser, run over SSH on the lab host with the profile's Python."""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest

from k26ctl.errors import UnreachableError
from k26ctl.lab.host import LabHostState
from k26ctl.profile import load_profile
from k26ctl.remote.ssh import SSHHost
from k26ctl.render import render_launch
from k26ctl.validate.sglang_parse import RemoteParse, parse_on_host

ROOT = Path(__file__).resolve().parents[2]
VERSION = "0.5.15"


@pytest.mark.labhost
def test_sglang_not_importable_is_a_clear_message(host: SSHHost) -> None:
    result = parse_on_host(host, "/opt/k26lab/venv/bin/python", ["python", "-m", "sglang.launch_server"])
    assert isinstance(result, RemoteParse)
    assert not result.ok and not result.importable
    assert "SGLang is not importable" in result.message
    assert "No module named 'sglang'" in result.message


@pytest.mark.labhost
def test_missing_interpreter_is_a_clear_message(host: SSHHost) -> None:
    result = parse_on_host(
        host, "/opt/nowhere/bin/python", ["python", "-m", "sglang.launch_server"], {"A": "1"}
    )
    assert not result.ok and not result.importable
    assert "no such interpreter" in result.message


def _venv_home(lab_host: LabHostState) -> tuple[Path, str]:
    """Where to build the venv outside, and its path as the lab host sees it. The user cache is
    reused across runs when the host can see it (the host overlays this machine's /root)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "k26ctl" / "test-venvs"
    if str(cache).startswith("/root/"):
        return cache / f"sglang-{VERSION}", str(cache / f"sglang-{VERSION}")
    return Path(lab_host.state_dir) / "opt" / f"sglang-{VERSION}", f"/opt/sglang-{VERSION}"


@pytest.fixture(scope="module")
def release_python_on_lab(lab_host: LabHostState) -> str:
    """SGLang's release installed in a venv the lab host can run (built from outside, once)."""
    from k26ctl.patches.release import fetch_wheel

    try:
        wheel = fetch_wheel(VERSION)
    except UnreachableError as exc:
        pytest.skip(f"pip cannot fetch sglang=={VERSION}: {exc.message}")
    spec = importlib.util.spec_from_file_location(
        "gen_sglang_options", ROOT / "scripts" / "gen_sglang_options.py"
    )
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    table = json.loads((ROOT / "k26ctl" / "data" / "sglang_options.json").read_text())
    stubbed = table["stubbed_modules"][VERSION]
    outside, inside = _venv_home(lab_host)
    outside.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{outside}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel sessions build it once
        done = outside / ".k26ctl-complete"
        if not done.exists():
            shutil.rmtree(outside, ignore_errors=True)
            gen.create_parser_venv(wheel, outside, stubbed)
            done.write_text(str(wheel.name))
    return f"{inside}/bin/python"


@pytest.mark.labhost
@pytest.mark.network_sglang
def test_release_parser_over_ssh(host: SSHHost, release_python_on_lab: str) -> None:
    python = release_python_on_lab
    loaded = load_profile(ROOT / "profiles" / "dflash.yaml", [f"sglang.python={python}"])
    argv = render_launch(loaded.profile).argv
    # one parse (each costs seconds: SGLang imports torch): every profile flag is accepted, and the
    # only word refused is the DDTree flag that 0.5.15 does not have
    result = parse_on_host(host, python, [*argv, "--speculative-ddtree-budget", "16"])
    assert result.importable and result.version == VERSION
    assert result.error is None, result.message
    assert result.unknown_flags == ["--speculative-ddtree-budget"]
    assert not result.ok
    assert "does not accept --speculative-ddtree-budget" in result.message

    bad_choice = parse_on_host(host, python, [*argv[:3], "--attention-backend", "no-such-backend"])
    assert not bad_choice.ok and bad_choice.importable
    assert "no-such-backend" in (bad_choice.error or "")
