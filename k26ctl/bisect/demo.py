"""The bisect part of `k26ctl lab demo --bisect`: find the first bad DDTree budget on the lab host.

It searches the unpatched budget-16 lab profile between 7 (good) and 16 (bad) in a throwaway session,
then resets, which puts back the deployment that was live before (the patched profile of the demo).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

KEY = "spec.ddtree.budget"


def step_bisect(ctx: Any) -> Any:
    """A `DemoStep` (k26ctl.deploy.demo): takes a DemoContext, returns a DemoOutcome."""
    from k26ctl.bisect import api
    from k26ctl.bisect.progress import ProgressPrinter
    from k26ctl.deploy.demo import DemoOutcome, lab_profile_path

    ctx.say(
        "== bisect-config on the unpatched budget-16 profile: which budget breaks first? "
        "(7 claimed good, 16 claimed bad; ends verified, then binary search)"
    )
    started = time.monotonic()
    printer = ProgressPrinter()
    with tempfile.TemporaryDirectory(prefix="k26-demo-bisect-") as state:
        bisect_ctx = api.Context(
            session="lab-demo",
            yes=True,
            reporter=printer,
            note=printer.note,
            state_directory=Path(state),
        )
        spec = api.numeric_spec(
            str(lab_profile_path("ddtree-b16")),
            KEY,
            "7",
            "16",
            None,
            [f"host.lab={ctx.lab}"],
            api.SearchOptions(),
        )
        result = api.start(spec, bisect_ctx)
        ctx.say("== bisect-config reset: putting back the deployment from before the search")
        reset = api.reset(bisect_ctx)
    doc = result.to_json()
    ok = (
        result.found
        and (doc.get("first_bad"), doc.get("last_good")) == (8, 7)
        and result.restarts <= (doc.get("max_restarts") or 0)
    )
    got = (
        f"first bad budget {doc.get('first_bad')}, last good {doc.get('last_good')}: "
        f"{result.restarts} restarts (bound {doc.get('max_restarts')}, a sweep needs {doc.get('candidates')})"
    )
    detail = [f"{s['value']}: {s['verdict']} ({s['seconds']:.1f} s)" for s in doc["steps"]] + [reset.message]
    return DemoOutcome(
        "bisect budget",
        "first bad 8, last good 7, within ends + ceil(log2 n)",
        got,
        ok,
        time.monotonic() - started,
        None,
        detail,
    )
