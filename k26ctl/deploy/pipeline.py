"""`deploy`: take a host from whatever state it is in to the profile's state, then prove it.

validate (local, before anything remote) -> connect -> lock -> facts -> plan -> [--check stops] ->
confirm -> apply (patches, unit, daemon-reload, enable; Ctrl-C held back) -> restart (only on change or
--force) -> readiness -> smoke (after speculative changes) -> record on the host -> recap.
A failure after apply may roll back to the state recorded before it (--rollback-on-failure).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import suppress
from typing import TYPE_CHECKING, Any, TypeVar

from k26ctl import __version__, inputs
from k26ctl.deploy import apply as ops
from k26ctl.deploy.conditions import as_conditions, conditions_json, jit_cache_state, last_started_release
from k26ctl.deploy.confirm import YES_HINT, confirm_change
from k26ctl.deploy.connection import ConnectionLostError, cause_of, connection_lost
from k26ctl.deploy.downtime import expect_downtime
from k26ctl.deploy.facts import HostFacts, read_unit
from k26ctl.deploy.history import (
    DeployRecord,
    keep_current_unit,
    last_gpu_memory_mib,
    last_load_seconds,
    prior_accept,
)
from k26ctl.deploy.interrupts import deferred_interrupts
from k26ctl.deploy.model import DeployOptions, DeployResult, EventCallback
from k26ctl.deploy.phases import parse_phases
from k26ctl.deploy.plan import Plan, compute_plan, patch_changes, sha256_text, smoke_decision
from k26ctl.deploy.readahead import Residency, read_ahead, residency, weight_files
from k26ctl.deploy.readiness import ProbeResult
from k26ctl.deploy.restore import restore_snapshot
from k26ctl.deploy.session import (
    Connect,
    DeployRun,
    EarlyConnection,
    Snapshot,
    copy_path,
    now_iso,
    open_service,
    operator,
    write_record,
)
from k26ctl.deploy.smoke_step import run_smoke_on_host
from k26ctl.deploy.steps import StepLog
from k26ctl.deploy.wait import ReadinessResult, check_ready_once, read_unit_state, wait_ready
from k26ctl.errors import ConfigError, ExitCode, Interrupted, K26Error, interrupt_behind
from k26ctl.profile import LoadedProfile
from k26ctl.render import render_unit, unit_name
from k26ctl.threads import in_thread
from k26ctl.validate import ValidationReport, ensure_unit_verifies, ensure_valid
from k26ctl.validate.checks import validate_against_host
from k26ctl.validate.warm_caches import host_unit_findings, release_change_findings

if TYPE_CHECKING:
    from k26ctl.smoke.acceptance import PriorAccept

T = TypeVar("T")


def deploy(
    loaded: LoadedProfile,
    opts: DeployOptions | None = None,
    on_event: EventCallback | None = None,
    *,
    connect: Connect | None = None,
) -> DeployResult:
    """Run the pipeline; expected failures of the service come back as a result with exit_code 1,
    problems that stop the run before it starts (config, host, lock) raise K26Error. `connect` opens
    the host (default: `k26ctl.remote.connect`)."""
    opts = opts or DeployOptions()
    profile = loaded.profile
    started = time.monotonic()
    log = StepLog(on_event)
    untouched = "interrupted before any change: the host was not touched"
    result: DeployResult | None = None
    unit_check: Future[ValidationReport] | None = None
    service: DeployRun | None = None
    # The connection needs only the host's address: it is opened while the profile is validated.
    early = EarlyConnection(profile, accept_new_host_key=opts.accept_new_host_key, connect=connect)
    try:
        with log.step("validate", "validating the profile"):
            ensure_valid(profile, systemd=False)
            inputs.api_key(profile.sglang.api_key_env)  # a key k26ctl cannot send stops the run here
            desired = render_unit(profile)
            # systemd-analyze verify is most of validation's time: it runs while the host is connected
            unit_check = _background(ensure_unit_verifies, profile, desired)
        result = DeployResult(profile=profile.name or "", host="", unit=unit_name(profile))
        with open_service(
            profile,
            log=log,
            result=result,
            desired_unit=desired,
            accept_new_host_key=opts.accept_new_host_key,
            lock_wait=opts.lock_wait,
            connect=early.connect,
        ) as run:
            service = run
            unit_check.result()  # a unit systemd rejects stops the run before anything is read
            try:
                _run(run, opts)
            except K26Error as exc:
                if isinstance(exc, ConnectionLostError) or not connection_lost(run.host, exc):
                    raise
                raise _lost_connection(run, exc) from None
    except (KeyboardInterrupt, RuntimeError) as exc:
        if not interrupt_behind(exc):
            raise
        # From apply on, an interrupt becomes Interrupted with the state read back; one that still
        # reaches here after apply (e.g. while the lock is released) must not claim "untouched".
        if service is not None and service.applied:
            raise Interrupted(f"interrupted: {_state_after_interrupt(service)}", _INTERRUPTED_HINT) from None
        raise Interrupted(untouched) from None
    except K26Error:
        if unit_check is not None:
            unit_check.result()  # a unit systemd rejects is reported first, even if the host is not
        raise
    finally:
        early.discard()  # a connection the run never took (it stopped before) is closed
        if result is not None:
            result.steps = log.steps
            result.wall_seconds = time.monotonic() - started
    assert result is not None
    return result


def _check_against_host(run: DeployRun, facts: HostFacts) -> None:
    """The profile judged again with the host's SGLang release and patch states (the option table of
    that release, the known bug lifted where the host's tree is fixed; flags the table does not know
    go to the host's own parser). Nothing has changed yet, so an error here stops the deploy cleanly."""
    with run.log.step("host-check", "checking the profile against the host's SGLang") as handle:
        report = validate_against_host(
            run.profile, run.host, sglang_version=facts.sglang_version, host_patches=facts.patch_states
        )
        if not report.valid:
            first = report.errors[0]
            on = f" (SGLang {facts.sglang_version} on the host)" if facts.sglang_version else ""
            raise ConfigError(
                f"{first.code}: {first.message}{on}", first.hint or "run `k26ctl validate --remote`"
            )
        restart = run.profile.restart
        for finding in [
            *release_change_findings(last_started_release(facts.history), facts.sglang_version),
            *host_unit_findings(
                facts.props, restart.jit_cache_dir, restart.jit_cache and not restart.jit_cache_dir
            ),
        ]:
            run.log.emit("warning", f"{finding.code}: {finding.message}")
        lifted = [f.message for f in report.findings if f.code == "known-bug/ddtree-mask-width-lifted"]
        version = f"SGLang {facts.sglang_version}" if facts.sglang_version else "SGLang version not found"
        handle.ok("; ".join([version, *lifted]))


def _run(run: DeployRun, opts: DeployOptions) -> None:
    log, result, profile = run.log, run.result, run.profile
    # Probing the running server is read-only and most deploys change nothing: probe while the facts
    # are read, and use the answer only if the plan says no restart.
    early_probe = None if opts.check else _background(check_ready_once, run.host, profile)
    # Likewise the journal cursor a restart would start reading from (any point before the restart).
    run.early_cursor = None if opts.check else _background(run.systemd.cursor_now)
    facts = run.read_facts()
    run.early_probe = early_probe
    _check_against_host(run, facts)
    changes, applied = patch_changes(facts.patch_actions)
    smoke = smoke_decision(
        opts.smoke,
        on_spec_change=profile.smoke.on_spec_change,
        speculative=profile.speculative_settings(),
        last=facts.last,
    )
    plan = compute_plan(
        unit_path=run.unit_path,
        desired_unit=run.desired_unit,
        current_unit=facts.unit_text,
        needs_daemon_reload=facts.needs_daemon_reload,
        unit_state=facts.unit_state,
        unit_file_state=facts.unit_file_state,
        patch_changes=changes,
        applied_patches=applied,
        last=facts.last,
        force=opts.force,
        smoke=smoke,
    )
    result.plan, result.smoke_reason = plan, plan.smoke_reason
    if opts.diff:
        result.diff = plan.diff_text()
        if result.diff:
            log.emit("diff", result.diff)
    log.add("plan", "ok", "; ".join(plan.change_lines()) or "nothing to change")
    found = _expect_downtime(run, facts) if plan.restart else None
    if opts.check:
        result.verdict = "changes-pending" if plan.has_changes else "ok"
        result.exit_code = ExitCode.CHANGES_PENDING if plan.has_changes else ExitCode.OK
        result.message = "changes pending" if plan.has_changes else "nothing to do"
        result.host_state = "unchanged (--check)"
        return
    _confirm(plan, opts)
    before = run.before = Snapshot(facts.unit_text, applied)
    try:
        if plan.restart:
            _read_ahead(run, facts, found)
        _apply(run, plan)
        ready = _restart_and_wait(run, plan)
        if ready and plan.smoke:
            _smoke(run)
        elif plan.smoke:
            log.add("smoke", "skipped", "the server is not ready")
        else:
            log.add("smoke", "skipped", plan.smoke_reason)
    except (KeyboardInterrupt, RuntimeError) as exc:
        if not interrupt_behind(exc):
            raise  # a k26ctl bug: the crash report
        raise _interrupted(run, before) from None
    except K26Error as exc:
        if connection_lost(run.host, exc):
            raise _lost_connection(run, exc) from None
        # Say where the host was left: the message is all an operator has when the link dropped.
        if run.restarted:
            exc.message += f" ({_disk_state(run, before)}; the service was restarted, readiness unknown)"
        elif run.applied:
            exc.message += f" ({_disk_state(run, before)}; the service was not restarted)"
        raise
    try:
        _record(run, before, plan)
        if result.verdict == "failed" and opts.rollback_on_failure and run.applied:
            _rollback_after_failure(run, before)
    except KeyboardInterrupt:
        raise _interrupted(run, before) from None
    _describe_state(run)


def _start_conditions(run: DeployRun, facts: HostFacts, resident: int | None, total: int | None) -> None:
    jit, why = jit_cache_state(run.host, run.profile, facts.history, facts.sglang_version)
    run.result.start_conditions = conditions_json(jit, why, resident, total)


def _expect_downtime(run: DeployRun, facts: HostFacts) -> tuple[list[str], Residency] | None:
    """The stop -> ready time this host's history predicts for this restart (plan and --check). Reading
    the conditions is best effort: without them the prediction rests on every recorded restart."""
    resident = total = None
    found = None
    try:
        files = weight_files(run.host, run.profile)
        cached = residency(run.host, run.profile.sglang.python, files)
        found = (files, cached)
        if files:
            resident, total = cached.resident, cached.bytes
    except K26Error as exc:
        run.log.emit("warning", f"page-cache residency of the weights not read: {exc.one_line()}")
    try:
        _start_conditions(run, facts, resident, total)
    except K26Error as exc:
        run.log.emit("warning", f"JIT cache state not read: {exc.one_line()}")
    conditions = as_conditions(run.result.start_conditions or {})
    expectation = expect_downtime(facts.history, conditions)
    run.result.expected = expectation
    seen = run.result.start_conditions or {}
    now = f"next start: {conditions.words()}" + (
        f" ({seen['jit_cache_why']})" if seen.get("jit_cache_why") else ""
    )
    if expectation is None:
        run.log.add("downtime", "ok", f"{now}; no earlier restart with phases on this host to predict from")
    else:
        run.log.add("downtime", "ok", f"{now}; {expectation.line()}")
    return found


def _read_ahead(run: DeployRun, facts: HostFacts, found: tuple[list[str], Residency] | None) -> None:
    """Weights into the page cache while the old server still serves (restart.readahead)."""
    with run.log.step("readahead", "reading the weights ahead while the old server serves") as handle:
        try:
            report = read_ahead(
                run.host,
                run.profile,
                found=found,
                on_progress=lambda done, total, secs: run.log.emit(
                    "progress",
                    "reading weights ahead",
                    phase="reading weights ahead",
                    percent=int(100 * done / total) if total else None,
                    done=None,
                    total=None,
                    elapsed=secs,
                    eta=None,
                    source="readahead",
                ),
            )
        except K26Error as exc:
            handle.detail = f"not read ahead: {exc.one_line()}"
            return
        run.result.readahead = report.to_json()
        if report.outcome == "skipped":
            handle.skipped(report.summary())
        else:
            handle.ok(report.summary())
        if report.outcome == "failed":
            run.log.emit("warning", f"read-ahead failed: {report.reason}")
    resident = report.resident_after if report.resident_after is not None else report.resident_before
    with suppress(K26Error):  # the conditions only label the record
        _start_conditions(run, facts, resident, report.bytes)


def _confirm(plan: Plan, opts: DeployOptions) -> None:
    if not plan.has_changes:
        return
    confirm_change(
        opts.confirm,
        plan,
        yes=opts.yes,
        command="deploy",
        no_terminal="changes are pending and there is no terminal to confirm them",
        hint=f"{YES_HINT} to apply, or --check/--diff to preview",
    )


def _apply(run: DeployRun, plan: Plan) -> None:
    log, host, profile = run.log, run.host, run.profile
    facts = run.facts
    assert facts is not None
    if not (plan.patches or plan.unit.changed or plan.daemon_reload or plan.enable):
        log.add("apply", "ok", "the host already matches the profile")
        return

    def note() -> None:
        log.emit("warning", "interrupt received: finishing the current step so the host stays consistent")

    with deferred_interrupts(note):
        if plan.patches:
            with log.step("patches", "converging SGLang source patches") as handle:
                run.applied = True  # from here on the host may differ from the facts
                results = ops.converge_patches(host, profile, plan.patches)
                done = [f"{r.action} {r.name}" for r in results if r.changed]
                if done:
                    handle.changed(", ".join(done))
                else:
                    handle.ok("already in place")
        if plan.unit.changed:
            with log.step("unit", f"writing {run.unit_path}") as handle:
                if facts.unit_sha is not None:
                    keep_current_unit(host, profile.service.name, run.unit_path, facts.unit_sha)
                run.applied = True
                write = ops.write_unit(host, run.unit_path, run.desired_unit)
                run.unit_backup = write.backup_path
                handle.changed(
                    f"sha {plan.unit.desired_sha[:12]}"
                    + (f", backup {write.backup_path}" if write.backup_path else "")
                )
        if plan.daemon_reload:
            with log.step("daemon-reload", "systemctl daemon-reload") as handle:
                run.systemd.daemon_reload()
                handle.changed(plan.daemon_reload_reason)
        if plan.enable:
            with log.step("enable", f"systemctl enable {run.unit}") as handle:
                ops.enable_unit(host, run.unit)
                handle.changed()
    run.result.changed = True


def _restart_and_wait(run: DeployRun, plan: Plan) -> bool:
    """Restart when the plan says so, then wait for readiness; True when the server is ready."""
    log, result, profile, facts = run.log, run.result, run.profile, run.facts
    assert facts is not None
    if not plan.restart:
        log.add("restart", "ok", "nothing changed: not restarted")
        with log.step("readiness", "probing the running server") as handle:
            probe = _early_probe_result(run) or check_ready_once(run.host, profile)
            if probe.ok:
                handle.ok("the running server answers its readiness probes")
                return True
            handle.detail = f"not ready yet ({probe.detail}): waiting"
        # Running but not ready (still loading after an earlier deploy): wait from now on.
        readiness = wait_ready(
            run.host,
            run.systemd,
            profile,
            cursor=run.systemd.cursor_now(),
            baseline=facts.unit_state,
            armed=True,
            probe_first=True,
            expected_load_seconds=last_load_seconds(facts.history),
            expected_gpu_memory_mib=last_gpu_memory_mib(facts.history),
            on_progress=_progress_emitter(log),
            on_line=lambda line: log.emit("log", line),
        )
        _readiness_verdict(run, readiness, "readiness-wait")
        return readiness.ready
    with log.step("restart", f"restarting {run.unit}") as handle:
        cursor = _result_or_none(run.early_cursor)
        restarted = ops.restart_service(run.host, run.systemd, run.unit, facts.unit_state, cursor)
        run.restarted = result.restarted = True
        handle.changed("; ".join(plan.restart_reasons))
    readiness = wait_ready(
        run.host,
        run.systemd,
        profile,
        cursor=restarted.cursor,
        baseline=restarted.baseline,
        armed=restarted.armed,
        expected_load_seconds=last_load_seconds(facts.history),
        expected_gpu_memory_mib=last_gpu_memory_mib(facts.history),
        on_progress=_progress_emitter(log),
        on_line=lambda line: log.emit("log", line),
    )
    _readiness_verdict(run, readiness, "readiness")
    _read_phases(run, restarted.cursor)
    return readiness.ready


def _read_phases(run: DeployRun, cursor: str | None) -> None:
    """Where the restart's time went, from the unit's journal since the restart (one more read: the
    wait consumed the lines as they came). Missing phases never fail a deploy."""
    try:
        entries = run.systemd.journal(cursor=cursor)
    except K26Error as exc:
        run.log.emit("warning", f"restart phases not read: {exc.one_line()}")
        return
    phases = parse_phases(entries)
    if not phases.phases:
        return
    run.result.phases = phases
    run.log.emit("phases", phases.summary(), **phases.to_json())


def _background(fn: Callable[..., T], *args: Any) -> Future[T]:
    """Run a read-only host query alongside other reads (one connection carries many channels)."""
    return in_thread(fn, *args, name="k26ctl-early-read")


def _result_or_none(future: Future[T] | None, timeout: float = 30.0) -> T | None:
    if future is None:
        return None
    try:
        return future.result(timeout=timeout)
    except Exception:
        return None


def _early_probe_result(run: DeployRun) -> ProbeResult | None:
    """The probe taken while the facts were read; None when it did not pass (probe again, properly)."""
    probe = _result_or_none(run.early_probe, timeout=10)
    return probe if probe is not None and probe.ok else None


def _progress_emitter(log: StepLog) -> Any:
    def emit(p: Any) -> None:
        pct = f"{p.percent}%" if p.percent is not None else p.phase
        if p.percent is not None and p.source == "gpu-memory":
            pct += f" of GPU memory ({p.gpu_used_gib}/{p.gpu_target_gib} GiB)"
        log.emit("progress", f"{p.phase}: {pct}", **p.__dict__)

    return emit


def _readiness_verdict(run: DeployRun, readiness: ReadinessResult, step: str) -> None:
    result = run.result
    outcome = readiness.outcome
    run.last_unit = readiness.last_unit
    if readiness.ready:
        result.ready_seconds = readiness.wall_seconds
        result.load_seconds = readiness.server_load_seconds
        result.stop_seconds = readiness.server_stop_seconds
        result.gpu_memory_mib = readiness.gpu_memory_mib
        load = f", server load {readiness.server_load_seconds:.1f} s" if readiness.server_load_seconds else ""
        run.log.add(step, "ok", f"ready after {readiness.wall_seconds:.1f} s{load}", readiness.wall_seconds)
        return
    result.verdict, result.exit_code, result.failure = "failed", ExitCode.FAILED, "readiness"
    result.message = f"the service did not become ready: {outcome.reason}"
    result.journal_lines = list(outcome.lines)
    for line in outcome.lines:
        run.log.emit("journal", line)
    run.log.add(step, "failed", outcome.reason, readiness.wall_seconds)


def _smoke(run: DeployRun) -> None:
    result = run.result
    with run.log.step("smoke", "running the smoke suite") as handle:
        try:
            report = run_smoke_on_host(run.host, run.profile, _prior_accept(run))
        except K26Error as exc:
            handle.failed(exc.one_line())
            result.verdict, result.exit_code, result.failure = "failed", ExitCode.FAILED, "smoke"
            result.message = f"smoke could not run: {exc.one_line()}"
            return
        result.smoke = report
        summary = report.summary()
        if report.passed:
            handle.ok(summary)
        else:
            handle.failed(summary)
            result.verdict, result.exit_code, result.failure = "failed", ExitCode.FAILED, "smoke"
            detectors = sorted({f.detector for r in report.failed_results for f in r.failures})
            result.message = "the server answers, but smoke failed" + (
                f" ({', '.join(detectors[:6])}{', ...' if len(detectors) > 6 else ''})" if detectors else ""
            )
    if result.smoke is not None:
        _accept_baseline(run, result.smoke)


def _accept_baseline(run: DeployRun, report: Any) -> None:
    """The run's accept length against its configuration's baseline on this host; a passing run that
    does not fall below the warning mark becomes a sample of that baseline."""
    from k26ctl.deploy.accept_baseline import judge_on_host

    profile, result = run.profile, run.result
    if report.measured_accept_length is None or profile.spec.algorithm.value == "NONE" or run.facts is None:
        return
    with run.log.step("accept-baseline", "comparing the accept length with its baseline") as handle:
        try:
            found = judge_on_host(
                run.host, profile, report, source="deploy smoke", version=run.facts.sglang_version
            )
        except K26Error as exc:
            handle.failed(exc.one_line())
            return
        assert found is not None
        result.accept_baseline = found.to_json()
        if found.status == "failed":
            handle.failed(found.message)
            if result.verdict != "failed":
                result.verdict, result.exit_code = "failed", ExitCode.FAILED
                result.failure, result.message = "accept-baseline", found.message
            return
        handle.ok(("warning: " if found.status == "warning" else "") + found.message)


def _prior_accept(run: DeployRun) -> PriorAccept | None:
    if run.facts is None:
        return None
    profile = run.profile
    return prior_accept(run.facts.history, profile.name or "", profile.speculative_settings())


def _smoke_json(result: DeployResult) -> dict[str, Any] | None:
    if result.smoke is None:
        return (
            {"ran": False}
            if result.failure != "smoke"
            else {"ran": True, "passed": False, "summary": result.message}
        )
    measured = result.smoke.measured_accept_length
    return {
        "ran": True,
        "passed": bool(result.smoke.passed),
        "summary": result.smoke.summary(),
        # what the next smoke of the same configuration is judged against (deploy/history.py)
        "accept_length": round(measured, 4) if measured is not None else None,
        "accept_baseline": result.accept_baseline,
    }


def _record(run: DeployRun, before: Snapshot, plan: Plan, *, unit_sha_now: str | None = None) -> None:
    """One history line; written even for failures, so the next deploy knows what runs."""
    facts, result, profile = run.facts, run.result, run.profile
    assert facts is not None
    last = facts.last
    if unit_sha_now is None:
        unit_sha_now = plan.unit.desired_sha if run.applied or not plan.unit.changed else facts.unit_sha
    after_patches = _patches_after(before.patches, plan) if run.applied else before.patches
    running_patches: list[str] | None
    if run.restarted:
        running_sha, running_patches = unit_sha_now, after_patches
    elif last is not None:
        running_sha, running_patches = last.running_unit_sha, last.running_patches
    else:
        running_sha, running_patches = (unit_sha_now if facts.unit_state.running else None), before.patches
    write_record(
        run,
        DeployRecord(
            time=now_iso(),
            operator=operator(),
            kind="deploy",
            profile=profile.name or "",
            fingerprint=profile.fingerprint(),
            unit_path=run.unit_path,
            unit_sha=unit_sha_now,
            unit_copy=copy_path(profile, unit_sha_now),
            previous_unit_sha=before.unit_sha,
            previous_unit_copy=copy_path(profile, before.unit_sha),
            unit_backup=run.unit_backup,
            patches=after_patches,
            previous_patches=before.patches,
            speculative=profile.speculative_settings(),
            changed=run.applied,
            restarted=run.restarted,
            running_unit_sha=running_sha,
            running_patches=running_patches,
            load_seconds=result.load_seconds,
            gpu_memory_mib=result.gpu_memory_mib,
            phases=result.phases.to_json() if result.phases is not None and run.restarted else None,
            sglang_version=facts.sglang_version,
            start_conditions=result.start_conditions if run.restarted else None,
            smoke=_smoke_json(result),
            verdict=result.verdict,
            message=result.message,
            k26ctl_version=__version__,
        ),
    )


def _patches_after(before: list[str], plan: Plan) -> list[str]:
    current = set(before)
    for change in plan.patches:
        if change.action == "apply":
            current.add(change.name)
        else:
            current.discard(change.name)
    return sorted(current)


def _rollback_after_failure(run: DeployRun, before: Snapshot) -> None:
    run.log.emit("warning", "rolling back to the state before this deploy (--rollback-on-failure)")
    plan, facts = run.result.plan, run.facts
    assert plan is not None and facts is not None
    last = facts.last
    source = last if last is not None and last.unit_sha == before.unit_sha else None
    ready = restore_snapshot(
        run,
        before,
        current_patches=_patches_after(before.patches, plan),
        reason=f"rollback after the failed deploy of {run.profile.name}",
        source=source,
    )
    run.result.rolled_back = True
    run.result.message += "; rolled back to the previous unit and patch set" + (
        "" if ready else " (which is not ready either)"
    )


def _describe_state(run: DeployRun) -> None:
    result = run.result
    try:
        seen = run.last_unit if result.verdict == "ok" and not result.rolled_back else None
        if seen is None and result.verdict == "ok" and not result.changed and run.facts is not None:
            seen = run.facts.unit_state  # untouched, and read under this run's lock
        state = (seen or read_unit_state(run.systemd)).describe()
    except K26Error:
        state = "unknown"
    sha = sha256_text(run.desired_unit)[:12]
    if result.rolled_back:
        result.host_state = f"previous unit and patches restored; service {state}"
    elif result.verdict == "ok":
        result.host_state = f"unit {run.unit_path} is the profile's (sha {sha}); service {state}"
    else:
        result.host_state = (
            f"unit {run.unit_path} is the profile's (sha {sha}); service {state}; "
            "fix the profile and deploy again, or run: k26ctl rollback PROFILE"
        )


def _disk_state(run: DeployRun, before: Snapshot, *, raise_errors: bool = False) -> str:
    try:
        on_disk = read_unit(run.host, run.unit_path)
    except K26Error as exc:
        if raise_errors:
            raise
        return f"unit state unknown: {exc.message}"
    sha = sha256_text(on_disk) if on_disk is not None else None
    desired = sha256_text(run.desired_unit)
    which = "the new" if sha == desired else "the old" if sha == before.unit_sha else "an unexpected"
    return f"{which} unit is in place ({run.unit_path}, sha {str(sha)[:12]})"


STEP_WORDS = {
    "facts": "reading its state",
    "patches": "patching SGLang",
    "unit": "writing the unit",
    "daemon-reload": "reloading systemd",
    "enable": "enabling the unit",
    "restart": "restarting the service",
    "readiness": "waiting for readiness",
    "readiness-wait": "waiting for readiness",
    "smoke": "running the smoke suite",
    "record": "recording the result",
}


def _lost_connection(run: DeployRun, exc: K26Error) -> ConnectionLostError:
    """One line: which step lost the host, and the state it was left in as far as it is known."""
    failed = [s.name for s in run.log.steps if s.status == "failed"]
    during = f" while {STEP_WORDS.get(failed[-1], 'in step ' + failed[-1])}" if failed else ""
    # The old connection is dead or hanging: read the host back over a new one, if it answers.
    run.host.abandon()
    if not run.applied:
        state = "nothing on the host was changed"
    elif run.before is None:
        state = "host state unknown; run k26ctl status PROFILE"
    else:
        try:
            state = _disk_state(run, run.before, raise_errors=True)
        except K26Error:
            state = (
                "the host cannot be reached again to check which unit is in place: the old one or "
                "the new one, whole (writes are atomic)"
            )
        if not run.restarted:
            state += "; the service was not restarted"
        elif run.result.ready_seconds is not None:
            state += "; the service was restarted and became ready"
        else:
            state += "; the service was restarted, readiness unknown"
    return ConnectionLostError(
        f"lost the connection to {run.host.name}{during} ({cause_of(exc)}): {state}",
        "check the host and the network, then run the same deploy again (it converges from either state)",
    )


_INTERRUPTED_HINT = (
    "run the same deploy again to finish (a pending restart is remembered), or k26ctl rollback PROFILE"
)


def _state_after_interrupt(run: DeployRun) -> str:
    """What the read-back found, or, when it never ran or was cut short, that it did not."""
    if run.interrupted_state is not None:
        return run.interrupted_state
    running = "was restarted" if run.restarted else "was not restarted"
    return f"the unit on the host was not read back; the service {running}; run k26ctl status PROFILE"


def _interrupted(run: DeployRun, before: Snapshot) -> Interrupted:
    """Say exactly which state the host was left in, and remember it on the host.

    A second Ctrl-C (people press it twice) is held until the read-back ends and then dropped: the
    read-back is bounded by the connection's timeouts, and it is the only account of the host."""
    desired_sha = sha256_text(run.desired_unit)
    state = _state_after_interrupt(run)
    try:
        with deferred_interrupts():
            on_disk = read_unit(run.host, run.unit_path)
            sha = sha256_text(on_disk) if on_disk is not None else None
            which = "the new" if sha == desired_sha else "the old" if sha == before.unit_sha else "an unknown"
            running = "restarted" if run.restarted else "not restarted (still running the old unit)"
            state = f"{which} unit is in place ({run.unit_path}, sha {str(sha)[:12]}); service was {running}"
            run.interrupted_state = state  # a later Ctrl-C (while the lock is released) keeps this account
            run.result.verdict = "interrupted"
            run.result.message = "interrupted"
            if run.facts is not None and run.result.plan is not None:
                _record(run, before, run.result.plan, unit_sha_now=sha)
    except KeyboardInterrupt:
        pass  # the second Ctrl-C, raised once the read-back above had finished or failed
    except (K26Error, OSError, EOFError) as exc:
        # EOFError: paramiko's word for a transport that died, e.g. when Ctrl-C cut one of its writes
        state = f"unknown ({str(exc) or type(exc).__name__}); run k26ctl status PROFILE"
    return Interrupted(f"interrupted: {state}", _INTERRUPTED_HINT)
