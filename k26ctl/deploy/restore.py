"""Returning the host to the state before the last change: the previous unit text (kept on the host
by checksum) and the previous patch set, then restart and wait.

The target is the `previous_*` state of the last history record that changed something. A rollback
is itself recorded as a change, so a second rollback returns to where the first one started.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from k26ctl import __version__
from k26ctl.deploy import apply as ops
from k26ctl.deploy.history import DeployRecord, keep_current_unit, last_load_seconds
from k26ctl.deploy.interrupts import deferred_interrupts
from k26ctl.deploy.model import DeployOptions, DeployResult, EventCallback
from k26ctl.deploy.plan import Plan, UnitChange, sha256_text
from k26ctl.deploy.session import (
    Connect,
    DeployRun,
    Snapshot,
    copy_path,
    now_iso,
    open_service,
    operator,
    write_record,
)
from k26ctl.deploy.steps import StepLog
from k26ctl.deploy.wait import read_unit_state, wait_ready
from k26ctl.errors import ExitCode, K26Error, UsageError
from k26ctl.patches.host import apply_patches, revert_patches
from k26ctl.profile import LoadedProfile


def rollback_target(records: Sequence[DeployRecord]) -> tuple[int, DeployRecord] | None:
    """The last record that changed the host (its `previous_*` fields are the target)."""
    for index in range(len(records) - 1, -1, -1):
        if records[index].changed:
            return index, records[index]
    return None


def _source_record(records: Sequence[DeployRecord], before: int, unit_sha: str | None) -> DeployRecord | None:
    """The record that produced the state being restored (for its profile and speculative settings)."""
    for record in reversed(records[:before]):
        if record.unit_sha == unit_sha:
            return record
    return None


def restore_snapshot(
    run: DeployRun,
    target: Snapshot,
    *,
    current_patches: Sequence[str],
    reason: str,
    source: DeployRecord | None,
) -> bool:
    """Put `target` back on the host, restart, wait; record it. True when the service is ready."""
    log, host, profile = run.log, run.host, run.profile
    on_disk = host.read_file(run.unit_path, sudo=True)
    before_sha = sha256_text(on_disk) if on_disk is not None else None
    with deferred_interrupts():
        to_revert = [n for n in current_patches if n not in target.patches]
        to_apply = [n for n in target.patches if n not in current_patches]
        if to_revert or to_apply:
            with log.step("rollback-patches", "restoring the previous patch set") as handle:
                if to_revert:
                    revert_patches(host, profile, to_revert)
                if to_apply:
                    apply_patches(host, profile, to_apply)
                handle.changed(
                    ", ".join([*(f"revert {n}" for n in to_revert), *(f"apply {n}" for n in to_apply)])
                )
        with log.step("rollback-unit", f"restoring {run.unit_path}") as handle:
            if target.unit_text is None:
                ops.remove_unit(host, run.systemd, run.unit, run.unit_path)
                handle.changed("there was no unit before: removed it and stopped the service")
            elif target.unit_sha != before_sha:
                if before_sha is not None:  # so that a second rollback can return here
                    keep_current_unit(host, profile.service.name, run.unit_path, before_sha)
                ops.write_unit(host, run.unit_path, target.unit_text)
                run.systemd.daemon_reload()
                handle.changed(f"sha {str(target.unit_sha)[:12]}")
            else:
                handle.ok("the unit on disk is already the previous one")
    ready = target.unit_text is None
    restarted = False
    load_seconds = None
    if target.unit_text is not None:
        with log.step("rollback-restart", f"restarting {run.unit}") as handle:
            restart = ops.restart_service(host, run.systemd, run.unit, read_unit_state(run.systemd))
            restarted = True
            handle.changed()
        facts = run.facts
        readiness = wait_ready(
            host,
            run.systemd,
            profile,
            cursor=restart.cursor,
            baseline=restart.baseline,
            armed=restart.armed,
            expected_load_seconds=last_load_seconds(facts.history) if facts else None,
            on_progress=lambda p: log.emit("progress", p.phase, **p.__dict__),
            on_line=lambda line: log.emit("log", line),
        )
        ready = readiness.ready
        load_seconds = readiness.server_load_seconds
        status = "ok" if ready else "failed"
        log.add("rollback-readiness", status, readiness.outcome.reason, readiness.wall_seconds)
        if not ready:
            for line in readiness.outcome.lines:
                log.emit("journal", line)
    proven = source is not None and source.verdict == "ok"
    verdict = "failed" if not ready else ("ok" if proven else "unverified")
    write_record(
        run,
        DeployRecord(
            time=now_iso(),
            operator=operator(),
            kind="rollback",
            profile=source.profile if source else "",
            fingerprint=source.fingerprint if source else "",
            unit_path=run.unit_path,
            unit_sha=target.unit_sha,
            unit_copy=copy_path(profile, target.unit_sha),
            previous_unit_sha=before_sha,
            previous_unit_copy=copy_path(profile, before_sha),
            unit_backup=None,
            patches=sorted(target.patches),
            previous_patches=sorted(current_patches),
            speculative=source.speculative if source else {},
            changed=True,
            restarted=restarted,
            running_unit_sha=target.unit_sha if restarted else None,
            running_patches=sorted(target.patches) if restarted else None,
            load_seconds=load_seconds,
            smoke={"ran": False},
            verdict=verdict,
            message=reason,
            k26ctl_version=__version__,
        ),
    )
    return ready


def rollback(
    loaded: LoadedProfile,
    opts: DeployOptions | None = None,
    on_event: EventCallback | None = None,
    *,
    connect: Connect | None = None,
) -> DeployResult:
    """Restore the unit and patch set that were in place before the last change on the host."""
    opts = opts or DeployOptions()
    profile = loaded.profile
    started = time.monotonic()
    log = StepLog(on_event)
    result: DeployResult | None = None
    try:
        with open_service(
            profile,
            log=log,
            kind="rollback",
            accept_new_host_key=opts.accept_new_host_key,
            lock_wait=opts.lock_wait,
            connect=connect,
        ) as run:
            result, host, systemd, path = run.result, run.host, run.systemd, run.unit_path
            facts = run.read_facts("reading the host's state and history")
            found = rollback_target(facts.history)
            if found is None:
                raise UsageError(
                    f"nothing to roll back: no recorded change for {profile.service.name} on {result.host}",
                    "k26ctl status PROFILE shows the history",
                )
            index, record = found
            text = None
            if record.previous_unit_sha is not None and record.previous_unit_sha == facts.unit_sha:
                text = facts.unit_text  # the change was to the patches only: the unit stays
            elif record.previous_unit_sha is not None:
                raw = host.read_file(record.previous_unit_copy or "", sudo=True)
                if raw is None or sha256_text(raw) != record.previous_unit_sha:
                    raise K26Error(
                        f"the previous unit (sha {record.previous_unit_sha[:12]}) is no longer on the host",
                        f"restore it from the unit's backup ({record.unit_backup or 'none recorded'})",
                    )
                text = raw.decode()
            target = Snapshot(text, list(record.previous_patches))
            applied_now = facts.applied_patches
            if not opts.yes and opts.confirm is None:
                raise UsageError(
                    "a rollback changes the host and there is no terminal to confirm it: nothing was changed",
                    "pass --yes (or set K26CTL_YES=1)",
                )
            what_unit = (
                f"restore unit sha {target.unit_sha[:12]}"
                if target.unit_sha
                else "remove the unit (there was none before)"
            )
            summary = (
                f"{what_unit} and patches [{', '.join(target.patches)}] "
                f"(undoing the {record.kind} of {record.time})"
            )
            log.add("plan", "ok", summary)
            if not opts.yes and opts.confirm is not None:
                preview = Plan(unit=UnitChange(path, facts.unit_sha, target.unit_sha or "", ""))
                preview.restart, preview.restart_reasons = True, [summary]
                if not opts.confirm(preview):
                    raise K26Error("rollback cancelled: nothing was changed")
            source = _source_record(facts.history, index, record.previous_unit_sha)
            ready = restore_snapshot(
                run, target, current_patches=applied_now, reason=f"rollback by {operator()}", source=source
            )
            result.changed = result.restarted = True
            result.verdict = "ok" if ready else "failed"
            result.exit_code = ExitCode.OK if ready else ExitCode.FAILED
            result.message = summary if ready else "rolled back, but the service did not become ready"
            state = read_unit_state(systemd).describe() if target.unit_text is not None else "removed"
            result.host_state = f"previous unit and patches restored; service {state}"
    finally:
        if result is not None:
            result.steps = log.steps
            result.wall_seconds = time.monotonic() - started
    assert result is not None
    return result
