"""Weights before the stop: how much of the next start's weight files is in the host's page cache, and
reading the rest ahead while the old server still serves.

A start whose weights are not cached (a changed model path, a reboot, a network filesystem) spends
most of its downtime reading them. Read while the old process serves, the same bytes cost no
downtime. The work runs on the host with its own Python (`k26ctl/remote/pagecache.py`: mincore(2) for
residency, a rate-bounded sequential read for the read-ahead); it is bounded in rate and time, stops
when k26ctl stops reading it (Ctrl-C), and is reported in the deploy's result.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from k26ctl.errors import K26Error, RemoteCommandError
from k26ctl.profile import Profile
from k26ctl.remote.base import Host

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
RESIDENT_ENOUGH = 0.9  # `auto` reads ahead below this share
MB = 1_000_000

# $1.. directories: the weight files directly in them or one level down, with their sizes
_FIND = r"""
for dir in "$@"; do
  [ -d "$dir" ] || continue
  find "$dir" -maxdepth 2 -type f \( -name '*.safetensors' -o -name '*.bin' -o -name '*.pt' \
    -o -name '*.pth' -o -name '*.gguf' \) -print
done
"""


def helper_source() -> str:
    from importlib.resources import files

    return files("k26ctl.remote").joinpath("pagecache.py").read_text(encoding="utf-8")


def model_dirs(profile: Profile) -> list[str]:
    """The weight directories the next start reads (a hub id is not a directory: nothing to read)."""
    paths = [profile.sglang.model_path, profile.spec.draft_model_path]
    return [p for p in paths if p and p.startswith("/")]


def weight_files(host: Host, profile: Profile) -> list[str]:
    dirs = model_dirs(profile)
    if not dirs:
        return []
    res = host.run(["sh", "-c", _FIND, "k26ctl", *dirs], sudo=True, timeout=120)
    return sorted({line for line in res.stdout.splitlines() if line.endswith(WEIGHT_SUFFIXES)})


@dataclass(frozen=True)
class Residency:
    bytes: int
    resident: int
    files: int

    @property
    def share(self) -> float:
        return self.resident / self.bytes if self.bytes else 1.0


def _last_json(text: str) -> dict[str, Any]:
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            data: dict[str, Any] = json.loads(line)
            return data
    raise ValueError("no answer")


def residency(host: Host, python: str, files: list[str]) -> Residency:
    if not files:
        return Residency(0, 0, 0)
    res = host.run([python, "-c", helper_source(), "residency", *files], sudo=True, timeout=600)
    try:
        data = _last_json(res.stdout)
    except ValueError as exc:
        raise RemoteCommandError(
            f"page-cache residency on {host.name}: {res.stderr.strip()[-200:] or exc}",
            f"check that {python} runs on the host",
        ) from None
    if "error" in data:
        raise RemoteCommandError(f"page-cache residency on {host.name}: {data['error']}", "")
    return Residency(int(data["bytes"]), int(data["resident"]), len(files))


@dataclass
class ReadaheadReport:
    files: int
    bytes: int
    resident_before: int
    resident_after: int | None = None
    bytes_read: int = 0
    seconds: float = 0.0
    rate_mb_s: float | None = None
    limit_mb_s: float = 0.0
    outcome: str = "skipped"  # skipped | done | stopped | time-limit | failed
    reason: str = ""
    progress: list[tuple[float, int]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("progress")
        return data

    def summary(self) -> str:
        gib = 1 << 30
        before = f"{self.resident_before / gib:.2f}/{self.bytes / gib:.2f} GiB in the page cache"
        if self.outcome == "skipped":
            return f"{before}; not read ahead ({self.reason})"
        after = f"{(self.resident_after or 0) / gib:.2f} GiB" if self.resident_after is not None else "?"
        rate = f" at {self.rate_mb_s:.0f} MB/s (limit {self.limit_mb_s:.0f})" if self.rate_mb_s else ""
        read = f"read {self.bytes_read / gib:.2f} GiB in {self.seconds:.1f} s{rate}"
        return f"{before} -> {after}; {read} ({self.outcome})"


ProgressFn = Callable[[int, int, float], None]  # bytes read, bytes to read, seconds


def read_ahead(
    host: Host,
    profile: Profile,
    *,
    found: tuple[list[str], Residency] | None = None,
    on_progress: ProgressFn | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> ReadaheadReport:
    """Residency, then (as `restart.readahead` says) the read-ahead, then residency again. `found`: the
    weight files and their residency as just measured (the plan did), to save the host two commands."""
    settings = profile.restart
    python = profile.sglang.python
    if found is None:
        files = weight_files(host, profile)
        before = residency(host, python, files)
    else:
        files, before = found
    report = ReadaheadReport(
        files=len(files),
        bytes=before.bytes,
        resident_before=before.resident,
        limit_mb_s=settings.readahead_rate_mb_s,
    )
    if not files:
        report.reason = "no weight files in " + (", ".join(model_dirs(profile)) or "a local directory")
        return report
    if settings.readahead == "never":
        report.reason = "restart.readahead is never"
        return report
    if settings.readahead == "auto" and before.share >= RESIDENT_ENOUGH:
        report.reason = f"{before.share:.0%} already cached"
        return report
    argv = [
        python,
        "-c",
        helper_source(),
        "readahead",
        str(settings.readahead_rate_mb_s * MB),
        str(settings.readahead_max_seconds),
        *files,
    ]
    start = clock()
    final: dict[str, Any] | None = None
    stream = host.stream(argv, sudo=True, timeout=settings.readahead_max_seconds + 60)
    try:
        for line in stream:
            if not line.startswith("{"):
                continue
            data = json.loads(line)
            if "progress" in data:
                report.progress.append((float(data["seconds"]), int(data["progress"])))
                if on_progress is not None:
                    on_progress(int(data["progress"]), before.bytes, float(data["seconds"]))
            else:
                final = data
    except KeyboardInterrupt:
        report.outcome, report.reason = "stopped", "interrupted"
        report.seconds = clock() - start
        raise
    except K26Error as exc:
        report.outcome, report.reason = "failed", exc.one_line()
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()  # stops the read on the host
    if final is not None:
        if "error" in final:
            report.outcome, report.reason = "failed", str(final["error"])
        else:
            report.bytes_read = int(final["bytes_read"])
            report.seconds = float(final["seconds"])
            why = str(final.get("stopped") or "")
            report.outcome = (
                "done" if final.get("done") else ("time-limit" if why == "time limit" else "stopped")
            )
            report.reason = why
            if report.seconds > 0:
                report.rate_mb_s = round(report.bytes_read / MB / report.seconds, 1)
    report.resident_after = residency(host, python, files).resident
    return report
