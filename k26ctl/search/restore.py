"""What was live on the host before a search, and putting it back (`bisect-config reset`, `sweep reset`).

The unit text and the applied patch set are captured into the session file when the search starts,
so the reset does not depend on anything the steps may have changed on the host since.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from k26ctl.deploy.restore import restore_snapshot
from k26ctl.deploy.session import Snapshot, open_service
from k26ctl.deploy.steps import StepLog
from k26ctl.profile import LoadedProfile


def capture_live(loaded: LoadedProfile, *, accept_new_host_key: bool = False) -> dict[str, Any]:
    with open_service(loaded.profile, accept_new_host_key=accept_new_host_key, lock=False) as run:
        facts = run.read_facts()
        return {
            "host": run.host.name,
            "unit": run.unit,
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
    reason: str = "reset: the deployment live before the search",
) -> RestoreResult:
    """Put the captured unit and patch set back, restart (or stop, if it was not running), wait."""
    profile = loaded.profile
    started = time.monotonic()
    with open_service(
        profile, log=StepLog(on_event), accept_new_host_key=accept_new_host_key, lock_wait=0.0
    ) as run:
        facts = run.read_facts()
        target = Snapshot(original.get("unit_text"), list(original.get("patches") or []))
        ready = restore_snapshot(
            run,
            target,
            current_patches=facts.applied_patches,
            reason=reason,
            source=None,
        )
        if target.unit_text is not None and not original.get("running"):
            run.systemd.stop()
            ready = True
            state = "restored and stopped (it was not running before the search)"
        else:
            state = "restored and ready" if ready else "restored, but the service did not become ready"
    sha = str(original.get("unit_sha") or "none")[:12]
    return RestoreResult(
        ready, f"unit sha {sha}, patches {original.get('patches') or []}: {state}", time.monotonic() - started
    )
