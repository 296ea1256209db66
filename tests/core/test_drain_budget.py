"""The unit lets SGLang's drain on SIGTERM finish: systemd waits at least the profile's drain budget."""

from __future__ import annotations

import pytest

from k26ctl.errors import ConfigError
from k26ctl.profile import load_profile
from k26ctl.render import render_unit


def test_a_stop_timeout_shorter_than_the_drain_budget_is_refused() -> None:
    with pytest.raises(ConfigError, match="shorter than drain_timeout_sec"):
        load_profile("profiles/base.yaml", ["service.timeout_stop_sec=30", "service.drain_timeout_sec=60"])


def test_the_shipped_profile_waits_for_the_drain_with_sigterm_to_the_main_process() -> None:
    loaded = load_profile("profiles/ddtree-b16.yaml")
    unit = render_unit(loaded.profile)
    assert "KillMode=mixed" in unit and "KillSignal=SIGTERM" in unit
    stop = int(next(line for line in unit.splitlines() if line.startswith("TimeoutStopSec=")).split("=")[1])
    assert loaded.profile.service.drain_timeout_sec is not None
    assert stop >= loaded.profile.service.drain_timeout_sec
