"""The users' loop of `k26ctl lab demo --gpu`, told on the CPU stand-in with the same steps and the same
checks (lab/loop_demo.py): broken deploy (smoke fails, /health 200), bisect-config finds first bad =
cap + 1 and last good = cap within 6 restarts, fixed deploy (smoke passes, 0 probe mismatches), and a
sweep that recommends a value. CI has no GPU; the GPU telling is recorded in docs/real-gpu-loop.md."""

from __future__ import annotations

from typing import Any

import pytest

from k26ctl.lab.demo import DemoContext, run_demo, step_lab_up
from k26ctl.lab.loop_demo import STAND_IN_LOOP, LoopContext, loop_steps

pytestmark = [pytest.mark.labhost, pytest.mark.lab, pytest.mark.timeout(600)]


def test_the_loop_on_the_stand_in(lab_host: Any) -> None:
    said: list[str] = []
    ctx = DemoContext(lab=lab_host.name, say=said.append, note=said.append)
    loop = LoopContext(STAND_IN_LOOP, sweep_concurrency=(1, 2), sweep_requests=4, sweep_max_tokens=48)
    outcomes = run_demo(ctx, loop_steps(loop, step_lab_up))
    by_name = {o.name: o for o in outcomes}
    assert [o.name for o in outcomes] == ["lab host up", "broken deploy", "bisect", "fixed deploy", "sweep"]
    assert all(o.as_expected for o in outcomes), "\n".join(said)

    broken = by_name["broken deploy"].result
    assert broken is not None and broken.exit_code == 1 and broken.failure == "smoke"
    assert broken.smoke is not None and broken.smoke.health_after == 200
    bisect = by_name["bisect"].document
    assert bisect is not None
    assert (bisect["first_bad"], bisect["last_good"]) == (
        STAND_IN_LOOP.last_good + 1,
        STAND_IN_LOOP.last_good,
    )
    assert 0 < bisect["restarts"] <= 6
    fixed = by_name["fixed deploy"].result
    assert fixed is not None and fixed.exit_code == 0
    assert fixed.smoke is not None and fixed.smoke.probes is not None
    assert fixed.smoke.probes.checked > 0 and not fixed.smoke.probes.mismatches
    sweep = by_name["sweep"].document
    assert sweep is not None and sweep["best"]["coherent"] is True
    assert sweep["best"]["assignment"][STAND_IN_LOOP.key] in STAND_IN_LOOP.sweep_values
