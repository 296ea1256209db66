"""What the next start will find on the host: its JIT caches warm or cold, and how much of its weight
files the page cache holds. Read-only; the figures go into the plan's expected downtime and, for the
start that follows, into the host's deploy history."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from k26ctl.deploy.downtime import WEIGHTS_CACHED, Conditions
from k26ctl.deploy.history import DeployRecord
from k26ctl.errors import K26Error
from k26ctl.profile import Profile
from k26ctl.remote.base import Host
from k26ctl.render import jit_cache_root


def last_started_release(records: Sequence[DeployRecord]) -> str | None:
    """The SGLang release the host's last recorded restart started."""
    for record in reversed(records):
        if record.restarted and record.sglang_version:
            return record.sglang_version
    return None


def jit_cache_bytes(host: Host, root: str) -> int:
    """Bytes under the cache directory (0 when it does not exist yet)."""
    res = host.run(
        ["sh", "-c", 'du -sb -- "$1" 2>/dev/null | cut -f1', "k26ctl", root], sudo=True, timeout=120
    )
    text = res.stdout.strip()
    return int(text) if text.isdigit() else 0


def jit_cache_state(
    host: Host, profile: Profile, records: Sequence[DeployRecord], release: str | None
) -> tuple[str | None, str]:
    """("warm" | "cold" | None, why). None: k26ctl does not manage the caches, it cannot tell."""
    root = jit_cache_root(profile)
    if root is None:
        return None, "restart.jit_cache is off"
    previous = last_started_release(records)
    if previous and release and previous != release:
        return "cold", f"the release changes ({previous} -> {release})"
    try:
        size = jit_cache_bytes(host, root)
    except K26Error as exc:
        return None, f"{root} not read: {exc.one_line()}"
    if size == 0:
        return "cold", f"{root} is empty"
    return "warm", f"{root} holds {size / (1 << 20):.1f} MiB"


def conditions_json(jit: str | None, why: str, resident: int | None, total: int | None) -> dict[str, Any]:
    share = None if resident is None or not total else round(resident / total, 4)
    return {
        "jit_cache": jit or "unknown",
        "jit_cache_why": why,
        "weights_resident": share,
        "weights_bytes": total,
    }


def as_conditions(data: dict[str, Any]) -> Conditions:
    share = data.get("weights_resident")
    jit = data.get("jit_cache")
    return Conditions(
        jit_cache=jit if jit in ("warm", "cold") else None,
        weights_cached=None if share is None else share >= WEIGHTS_CACHED,
    )
