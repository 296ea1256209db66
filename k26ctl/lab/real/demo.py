"""`k26ctl lab demo --real`: the same story as `lab demo`, told by the real SGLang release.

1. bring the lab host up with real SGLang beside the stand-in; 2. deploy profiles/lab/sglang.yaml
(SGLang 0.5.15 from the registry, the tiny model trained on the lab corpus): smoke passes, the probes
find 0 mismatches; 3. deploy the same profile with the untrained twin of the model: the server is
ready and /health answers 200, but smoke fails the token soup; 4. deploy the good profile again.
The host is left up.
"""

from __future__ import annotations

import time

from k26ctl.deploy import deploy
from k26ctl.deploy.model import DeployOptions, DeployResult
from k26ctl.lab.demo import DemoContext, DemoOutcome, DemoStep, lab_profile_path
from k26ctl.lab.host import lab_up
from k26ctl.lab.real.host_parts import GARBAGE_MODEL, INNER_ROOT
from k26ctl.profile import load_profile

GOOD_PROFILE = "sglang"
DEMO_RELEASE = "0.5.15"  # the release profiles/lab/sglang.yaml runs; `lab host up --real` adds 0.5.23
GARBAGE_OVERRIDE = f"sglang.model_path={INNER_ROOT}/models/{GARBAGE_MODEL}"


def _deploy(ctx: DemoContext, *overrides: str) -> DeployResult:
    loaded = load_profile(lab_profile_path(GOOD_PROFILE), [f"host.lab={ctx.lab}", *overrides])
    return deploy(loaded, DeployOptions(yes=True, smoke=True), on_event=ctx.on_event)


def _version(result: DeployResult) -> str:
    identity = result.smoke.server_identity if result.smoke is not None else {}
    return str(identity.get("version") or "unknown")


def _probe_line(result: DeployResult) -> str:
    probes = result.smoke.probes if result.smoke is not None else None
    if probes is None or not probes.supported:
        return "probes not run"
    return f"probes {probes.checked} checked, {len(probes.mismatches)} mismatches"


def _health_line(result: DeployResult) -> str:
    health = result.smoke.health_after if result.smoke is not None else None
    return f"/health {health}" if health is not None else "/health not read"


def step_real_up(ctx: DemoContext) -> DemoOutcome:
    started = time.monotonic()
    ctx.say(
        f"== bringing lab host {ctx.lab} up with real SGLang {DEMO_RELEASE} "
        "(installed once from the package registry into the machine's cache)"
    )
    state = lab_up(ctx.lab, real_sglang=(DEMO_RELEASE,), rebuild=ctx.say)
    ctx.host_state = state
    return DemoOutcome("lab host up (real)", "up", f"up at {state.address}", True, time.monotonic() - started)


def _good(ctx: DemoContext, title: str) -> DemoOutcome:
    ctx.say(
        "== deploying profiles/lab/sglang.yaml: `python -m sglang.launch_server` of the real release on CPU, "
        "the tiny Llama trained on the lab corpus; smoke and the greedy probes should pass"
    )
    result = _deploy(ctx)
    probes = result.smoke.probes if result.smoke is not None else None
    ok = (
        result.exit_code == 0
        and result.smoke_passed is True
        and probes is not None
        and probes.checked > 0
        and not probes.mismatches
    )
    got = (
        f"SGLang {_version(result)}: smoke passed, {_probe_line(result)}"
        if ok
        else f"{result.verdict} ({result.message or _probe_line(result)})"
    )
    summary = [result.smoke.summary()] if result.smoke is not None else []
    return DemoOutcome(
        title, "smoke passes, probes 0 mismatches", got, ok, result.wall_seconds, result, summary
    )


def step_good(ctx: DemoContext) -> DemoOutcome:
    return _good(ctx, "real SGLang, trained model")


def step_good_again(ctx: DemoContext) -> DemoOutcome:
    return _good(ctx, "trained model again")


def step_garbage(ctx: DemoContext) -> DemoOutcome:
    ctx.say(
        f"== deploying the same profile with {GARBAGE_MODEL} (same architecture and tokenizer, untrained "
        "weights): the server loads and /health answers 200, smoke should fail the output"
    )
    result = _deploy(ctx, GARBAGE_OVERRIDE)
    ready = any(s.name == "readiness" and s.status == "ok" for s in result.steps)
    health = result.smoke.health_after if result.smoke is not None else None
    caught = ready and result.failure == "smoke" and result.exit_code == 1 and health == 200
    got = (
        f"ready, {_health_line(result)}, but smoke failed the output"
        if caught
        else f"{result.verdict} ({result.message or 'no finding'}; {_health_line(result)})"
    )
    detail = []
    if result.smoke is not None:
        for request in result.smoke.failed_results[:3]:
            text = (request.text or "").replace("\n", " ")
            reasons = "; ".join(f.reason() for f in request.failures)
            detail.append(f"{request.name}: {reasons} -> {text[:60]!r}")
    return DemoOutcome(
        "untrained weights",
        "ready with /health 200, smoke fails",
        got,
        caught,
        result.wall_seconds,
        result,
        detail,
    )


REAL_STEPS: list[DemoStep] = [step_real_up, step_good, step_garbage, step_good_again]


def summary_tail(lab: str) -> str:
    return (
        f"the lab host {lab} is still up: try `k26ctl smoke profiles/lab/sglang.yaml --set host.lab={lab}`; "
        f"`k26ctl lab host down --name {lab}` removes it"
    )
