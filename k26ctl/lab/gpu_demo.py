"""`k26ctl lab demo --gpu`: the users' loop (lab/loop_demo.py) on real SGLang 0.5.15 on this machine's GPU.

The lab host binds the GPU (lab/host/gpu.py) and the GPU kit unpacked by scripts/gpu/env.sh:
sglang 0.5.15 and the packages the image lacks (/tmp/k26-site), the flashinfer stand-in
(/tmp/k26-stub) and the models (/tmp/k26-models), under /opt/k26-gpu where profiles/lab/gpu/ expect
them. The site is bound read-write: `k26ctl patch` edits that tree like any host's.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from k26ctl.errors import ConfigError, UsageError
from k26ctl.lab.demo import DemoContext, DemoOutcome, DemoStep, lab_profile_path
from k26ctl.lab.loop_demo import GPU_LOOP, LOOP_STEP_NAMES, LoopContext

KIT_BINDS = (
    ("/tmp/k26-site", "/opt/k26-gpu/site"),
    ("/tmp/k26-stub", "/opt/k26-gpu/stub"),
    ("/tmp/k26-models", "/opt/k26-gpu/models"),
)


def parse_steps(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [n for n in names if n not in LOOP_STEP_NAMES]
    if unknown:
        raise UsageError(f"--steps: unknown step {unknown[0]!r}", f"choose from {','.join(LOOP_STEP_NAMES)}")
    return names


def kit_binds(binds: tuple[tuple[str, str], ...] = KIT_BINDS) -> tuple[tuple[str, str], ...]:
    missing = [src for src, _ in binds if not Path(src).is_dir()]
    if missing:
        raise ConfigError(
            f"the GPU kit is not unpacked here ({', '.join(missing)} missing)",
            "run `source .gpu-proj/scripts/gpu/env.sh` and make the models first (scripts/gpu/README.md)",
        )
    return binds


def gpu_loop_steps() -> tuple[DemoStep, LoopContext]:
    """The host-up step and the loop; refuses at once, with one line, on a machine without a GPU."""
    from k26ctl.lab.host.gpu import require_gpu

    parts = require_gpu()
    binds = kit_binds()

    def up(ctx: DemoContext) -> DemoOutcome:
        from k26ctl.lab.host import lab_up

        started = time.monotonic()
        ctx.say(f"== bringing lab host {ctx.lab} up with {parts.describe()} and the GPU kit")
        state = lab_up(ctx.lab, gpu=parts, binds=binds)
        ctx.host_state = state
        return DemoOutcome(
            "lab host up (GPU)", "up", f"up at {state.address}", True, time.monotonic() - started
        )

    return up, LoopContext(GPU_LOOP, sweep_concurrency=(1, 8), sweep_requests=16, sweep_max_tokens=128)


def host_restarts(ctx: DemoContext, profile_name: str) -> list[dict[str, Any]]:
    """Every restart the host's deploy history holds for the loop's service, oldest first."""
    from k26ctl.deploy.history import read_history
    from k26ctl.profile import load_profile
    from k26ctl.remote import connect

    loaded = load_profile(lab_profile_path(profile_name), [f"host.lab={ctx.lab}"])
    host = connect(loaded.profile)
    try:
        records = read_history(host, loaded.profile.service.name).items
    finally:
        host.close()
    return [
        {
            "time": r.time,
            "profile": r.profile,
            "speculative": r.speculative.get("spec", {}),
            "patches": r.patches,
            "load_seconds": r.load_seconds,
            "verdict": r.verdict,
            "phases": r.phases,
        }
        for r in records
        if r.restarted
    ]


def gpu_summary_tail(ctx: DemoContext, loop: LoopContext) -> list[str]:
    lines = ["== restarts on the host (its deploy history)"]
    try:
        restarts = host_restarts(ctx, loop.plan.fixed)
    except Exception as exc:  # the summary must not hide the outcomes above
        return [*lines, f"  (history not read: {exc})"]
    loop.restarts = restarts
    from k26ctl.deploy.phases import RestartPhases

    for r in restarts:
        spec = r["speculative"]
        lines.append(
            f"  {r['time']} {spec.get('algorithm')} draft tokens {spec.get('block_size')} "
            f"patches {r['patches'] or '-'}: load {r['load_seconds']} s, {r['verdict']}"
        )
        if r["phases"]:
            phases = RestartPhases.from_json(r["phases"])
            lines.append(f"      downtime {phases.downtime_seconds:.1f} s: {phases.summary()}")
    lines.append(f"the lab host {ctx.lab} is still up; `k26ctl lab host down --name {ctx.lab}` removes it")
    return lines


def loop_record(outcomes: list[DemoOutcome], loop: LoopContext) -> dict[str, Any]:
    """The run as data: each step's expectation, outcome and document, and the host's restarts."""
    steps = []
    for o in outcomes:
        document = o.result.to_json() if o.result is not None else o.document
        steps.append(
            {
                "name": o.name,
                "expected": o.expected,
                "got": o.got,
                "as_expected": o.as_expected,
                "seconds": round(o.seconds, 2),
                "detail": o.detail,
                "document": document,
            }
        )
    from k26ctl.documents import tagged

    return tagged("lab-loop", {"plan": loop.plan.title, "steps": steps, "restarts": loop.restarts or []})
