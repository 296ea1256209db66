"""The lab's GPU step-time model: parsing, the modelled times, and the pacer's catch-up clock."""

from __future__ import annotations

import pytest

from k26ctl.errors import ConfigError
from k26ctl.lab.server import step_cost
from k26ctl.lab.server.step_cost import StepCost, StepPacer, parse_step_cost


def test_parse() -> None:
    assert parse_step_cost(None) is None and parse_step_cost("off") is None
    assert parse_step_cost("gpu") == StepCost(**step_cost.PRESETS["gpu"])
    custom = parse_step_cost("gpu,row=1.5,draft=0")
    assert custom is not None and custom.row_ms == 1.5 and custom.draft_ms == 0 and custom.base_ms == 40
    assert parse_step_cost(custom.describe()) == custom
    for bad in ("fast", "row=x", "row=-1", "width=3"):
        with pytest.raises(ConfigError):
            parse_step_cost(bad)


def test_modelled_times_grow_with_rows_and_batch() -> None:
    cost = StepCost(base_ms=40, row_ms=0.3, draft_ms=6, draft_row_ms=0.1)
    pacer = StepPacer(cost, block_size=8, speculative=True)
    # a DDTree verify of budget 16 at batch 4: 4 x 17 rows, plus a draft pass over 4 x 8 rows
    assert pacer.modelled_seconds("verify", 4, 4 * 17) == pytest.approx((40 + 0.3 * 68 + 6 + 0.1 * 32) / 1000)
    assert pacer.modelled_seconds("prefill", 4, 100) == pytest.approx((40 + 30) / 1000)
    assert pacer.modelled_seconds("verify", 1, 17) < pacer.modelled_seconds("verify", 8, 8 * 17)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 6))
        self.now += seconds


def test_pacer_catches_up_a_late_step_and_restarts_after_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(step_cost.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(step_cost.time, "sleep", clock.sleep)
    pacer = StepPacer(StepCost(base_ms=50, row_ms=0, draft_ms=0, draft_row_ms=0), 8, speculative=False)
    pacer.hold(0.0, "decode", 1, 1)  # on time: sleeps the whole 50 ms
    clock.now = 0.12  # the CPU made the next step 70 ms late
    pacer.hold(0.05, "decode", 1, 1)
    assert pacer.overruns == 1
    pacer.hold(0.12, "decode", 1, 1)  # the model's clock is at 0.10: this step ends at 0.15
    assert clock.sleeps == [0.05, 0.03]
    pacer.idle()
    clock.now = 5.0
    pacer.hold(5.0, "decode", 1, 1)  # a new busy period starts on its own clock
    assert clock.sleeps[-1] == 0.05
