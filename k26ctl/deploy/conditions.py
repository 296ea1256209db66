"""What the next start will find on the host: its JIT caches warm or cold, and how much of its weight
files the page cache holds. Read-only; the figures go into the plan's expected downtime and, for the
start that follows, into the host's deploy history."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from k26ctl.deploy.downtime import Conditions
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


# $1 the cache root: "<files> <bytes>" of the regular files under it ("0 0" when it does not exist;
# empty directories, which the libraries make at import, do not make a cache warm)
_CACHE_SIZE = r"""
[ -d "$1" ] || { echo "0 0"; exit 0; }
files=$(find "$1" -type f | wc -l)
bytes=$(du -sb -- "$1" | cut -f1)
echo "$files $bytes"
"""


def jit_cache_files(host: Host, root: str) -> tuple[int, int]:
    """(files, bytes) under the cache directory."""
    res = host.run(["sh", "-c", _CACHE_SIZE, "k26ctl", root], sudo=True, timeout=120)
    parts = res.stdout.split()
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        return 0, 0
    return int(parts[0]), int(parts[1])


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
        files, size = jit_cache_files(host, root)
    except K26Error as exc:
        return None, f"{root} not read: {exc.one_line()}"
    if files == 0:
        return "cold", f"{root} holds no cached kernels"
    return "warm", f"{root} holds {files} files, {size / (1 << 20):.1f} MiB"


def conditions_json(jit: str | None, why: str, resident: int | None, total: int | None) -> dict[str, Any]:
    share = None if resident is None or not total else round(resident / total, 4)
    return {
        "jit_cache": jit or "unknown",
        "jit_cache_why": why,
        "weights_resident": share,
        "weights_bytes": total,
    }


def as_conditions(data: dict[str, Any]) -> Conditions:
    return Conditions.from_record(data)
