"""What was live on the host before a search, and putting it back (`bisect-config reset`).

The unit text and the applied patch set are captured into the session file when the search starts,
so the reset does not depend on anything the steps may have changed on the host since.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from k26ctl.profile import LoadedProfile


def capture_live(loaded: LoadedProfile, *, accept_new_host_key: bool = False) -> dict[str, Any]:
    from k26ctl.deploy.facts import gather_facts
    from k26ctl.remote import connect
    from k26ctl.remote.systemd import Systemd
    from k26ctl.render import unit_name, unit_path

    profile = loaded.profile
    with connect(profile, accept_new_host_key=accept_new_host_key) as host:
        facts = gather_facts(host, Systemd(host, unit_name(profile)), profile, unit_path(profile))
        return {
            "host": getattr(host, "name", "") or "",
            "unit": unit_name(profile),
            "unit_path": facts.unit_path,
            "unit_text": facts.unit_text,
            "unit_sha": facts.unit_sha,
            "patches": facts.applied_patches,
            "running": facts.unit_state.running,
            "profile": facts.last.profile if facts.last is not None else None,
            "captured": time.time(),
        }


@dataclass
class RestoreResult:
    ready: bool
    message: str
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"ready": self.ready, "message": self.message, "seconds": round(self.seconds, 2)}


def restore_live(
    loaded: LoadedProfile,
    original: dict[str, Any],
    *,
    on_event: Any = None,
    accept_new_host_key: bool = False,
) -> RestoreResult:
    """Put the captured unit and patch set back, restart (or stop, if it was not running), wait."""
    from k26ctl.deploy.facts import gather_facts
    from k26ctl.deploy.model import DeployResult
    from k26ctl.deploy.pipeline import Context, Snapshot, operator
    from k26ctl.deploy.steps import StepLog
    from k26ctl.remote import connect
    from k26ctl.remote.systemd import Systemd
    from k26ctl.render import unit_name, unit_path

    profile = loaded.profile
    started = time.monotonic()
    unit, path = unit_name(profile), unit_path(profile)
    log = StepLog(on_event)
    with connect(profile, accept_new_host_key=accept_new_host_key) as host:
        result = DeployResult(profile=profile.name or "", host=getattr(host, "name", "") or "", unit=unit)
        with host.lock(profile.service.name, holder=operator()):
            systemd = Systemd(host, unit)
            ctx = Context(profile, host, systemd, unit, path, "", log, result)
            ctx.facts = facts = gather_facts(host, systemd, profile, path)
            target = Snapshot(original.get("unit_text"), list(original.get("patches") or []))
            from k26ctl.deploy.restore import restore_snapshot

            ready = restore_snapshot(
                ctx,
                target,
                current_patches=facts.applied_patches,
                reason="bisect-config reset: the deployment live before the search",
                source=None,
            )
            if target.unit_text is not None and not original.get("running"):
                systemd.stop()
                ready = True
                state = "restored and stopped (it was not running before the search)"
            else:
                state = "restored and ready" if ready else "restored, but the service did not become ready"
    sha = str(original.get("unit_sha") or "none")[:12]
    return RestoreResult(
        ready, f"unit sha {sha}, patches {original.get('patches') or []}: {state}", time.monotonic() - started
    )
