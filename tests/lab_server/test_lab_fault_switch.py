"""The lab-only runtime fault switch: a file the running server re-reads (no network surface)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from k26ctl.lab.server.fault_switch import RuntimeFaults, write_switch
from k26ctl.smoke.baseline import first_divergence
from tests.support.lab_server import lab_server

pytestmark = pytest.mark.lab


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1]", "JSON object"),
        ('{"mask": true}', "unknown keys"),
        ('{"verify_fault": "always"}', "verify_fault must be one of"),
        ('{"mask_bug": "yes"}', "true or false"),
    ],
)
def test_a_bad_switch_file_is_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RuntimeFaults.parse(text)


def test_an_empty_file_means_the_settings_the_server_started_with() -> None:
    assert RuntimeFaults.parse("") == RuntimeFaults()


def _answer(url: str) -> str:
    body = {
        "text": "Bees live together in a hive.",
        "sampling_params": {"temperature": 0, "max_new_tokens": 48},
    }
    return str(httpx.post(url + "/generate", json=body, timeout=120, trust_env=False).json()["text"])


def _runtime_faults(url: str) -> object:
    return httpx.get(url + "/server_info", timeout=30, trust_env=False).json()["lab"].get("runtime_faults")


def _wait_faults(url: str, want: dict[str, object]) -> None:
    deadline = time.monotonic() + 30
    while _runtime_faults(url) != want:
        assert time.monotonic() < deadline, _runtime_faults(url)
        time.sleep(0.1)


def test_the_mask_bug_turns_on_and_off_in_a_running_server(tmp_path: Path) -> None:
    switch = tmp_path / "faults.json"
    with lab_server("ddtree-b16-patched", patched=True, env={"K26LAB_FAULT_SWITCH": str(switch)}) as server:
        good = _answer(server.url)
        write_switch(switch, RuntimeFaults(mask_bug=True))
        _wait_faults(server.url, {"verify_fault": None, "mask_bug": True})
        broken = _answer(server.url)
        write_switch(switch, RuntimeFaults())
        _wait_faults(server.url, {"verify_fault": None, "mask_bug": False})
        again = _answer(server.url)
        switch.write_text("not json")  # ignored with a log line; the server keeps serving
        assert server.wait_for("Lab fault switch: ignoring", 30)
        last = _answer(server.url)
        log = server.log()
    # corrupt from the first verify steps on (the first token comes from the plain prefill)
    diverged_at = first_divergence(broken, good)
    assert diverged_at is not None and diverged_at < 8, broken
    assert again == good == last
    assert "Lab fault switch: watching" in log and '"mask_bug": true' in log
