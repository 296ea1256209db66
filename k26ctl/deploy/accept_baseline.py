"""Accept-length baselines per configuration, kept on the host beside the deploy history.

A configuration is the model, the drafter, the host's SGLang release and the speculative flags: the
things that decide how many draft tokens a verify pass keeps. Every passing smoke run (and sweep point)
on the host records the accept length and tokens/s it measured under that key. A later deploy of the
same key compares: below 95 % of the baseline (the rule vLLM's CI applies to its speculative-decoding
acceptance) is a warning naming both numbers; below the user's `smoke.accept_fail_ratio` it fails. A
key seen for the first time says it has no baseline yet. A run that warned does not move the baseline,
so a slow slide cannot teach it a lower value.

The file (`/var/lib/k26ctl/<service>/accept-baselines.json`) holds one entry per key with its last
samples; the baseline is their median.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from k26ctl.deploy.history import state_dir

if TYPE_CHECKING:
    from k26ctl.profile import Profile
    from k26ctl.remote.base import Host

FORMAT = "k26ctl-accept-baselines/1"
WARN_RATIO = 0.95
MAX_SAMPLES = 9
MAX_KEYS = 200
NOTHING_ACCEPTED = 1.05  # as smoke/acceptance.py


def baselines_path(service: str) -> str:
    return f"{state_dir(service)}/accept-baselines.json"


def config_key(profile: Profile, release: str | None) -> dict[str, Any]:
    """What decides the accept length: model, drafter, SGLang release, speculative flags."""
    spec = profile.spec
    return {
        "model": profile.sglang.model_path,
        "drafter": spec.draft_model_path,
        "sglang": release or "unknown",
        "speculative": {
            "algorithm": spec.algorithm.value,
            "block_size": spec.block_size,
            "num_steps": spec.num_steps,
            "eagle_topk": spec.eagle_topk,
            "draft_attention_backend": spec.draft_attention_backend,
            "ddtree": spec.ddtree.model_dump(mode="json"),
            "attention_backend": profile.sglang.attention_backend,
            "page_size": profile.sglang.page_size,
            "patches": sorted(profile.patches),
        },
    }


def key_id(key: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def describe_key(key: dict[str, Any]) -> str:
    spec = key.get("speculative") or {}
    return (
        f"{key.get('model')} + {key.get('drafter') or 'no drafter'}, {spec.get('algorithm')}"
        f" on SGLang {key.get('sglang')}"
    )


class Sample(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    accept_length: float = Field(gt=0)
    tokens_per_s: float | None = Field(default=None, ge=0)
    when: str
    source: str  # "deploy smoke" | "sweep point"


class Entry(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    key: dict[str, Any]
    samples: list[Sample] = Field(default_factory=list)

    @property
    def accept_length(self) -> float:
        return float(statistics.median(s.accept_length for s in self.samples))

    @property
    def tokens_per_s(self) -> float | None:
        rates = [s.tokens_per_s for s in self.samples if s.tokens_per_s is not None]
        return float(statistics.median(rates)) if rates else None


class BaselineFile(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    format: Literal["k26ctl-accept-baselines/1"] = "k26ctl-accept-baselines/1"
    entries: dict[str, Entry] = Field(default_factory=dict)

    def entry(self, key: dict[str, Any]) -> Entry | None:
        found = self.entries.get(key_id(key))
        return found if found is not None and found.samples else None

    def same_config_other_release(self, key: dict[str, Any]) -> Entry | None:
        """The newest entry of the same model, drafter and flags on another SGLang release."""
        rest = {k: v for k, v in key.items() if k != "sglang"}
        matches = [
            e
            for e in self.entries.values()
            if e.samples
            and e.key.get("sglang") != key.get("sglang")
            and {k: v for k, v in e.key.items() if k != "sglang"} == rest
        ]
        return max(matches, key=lambda e: e.samples[-1].when, default=None)

    def for_config(self, key: dict[str, Any]) -> Entry | None:
        """The key's entry, else the newest of the same configuration on another release."""
        return self.entry(key) or self.same_config_other_release(key)

    def add(self, key: dict[str, Any], sample: Sample) -> None:
        entry = self.entries.setdefault(key_id(key), Entry(key=key))
        entry.samples = [*entry.samples, sample][-MAX_SAMPLES:]
        if len(self.entries) > MAX_KEYS:
            oldest = sorted(self.entries, key=lambda k: self.entries[k].samples[-1].when)
            for stale in oldest[: len(self.entries) - MAX_KEYS]:
                del self.entries[stale]

    def to_text(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=1, sort_keys=True) + "\n"


def parse_baselines(raw: bytes | None, where: str) -> BaselineFile:
    """The host's file; a damaged one raises BadStateError (exit 78) naming the file and the field."""
    if not raw:
        return BaselineFile()
    from k26ctl import statefile

    hint = f"move {where} aside: the next passing smoke records a new baseline"
    return statefile.parse_document(raw, BaselineFile, what="accept-length baselines", where=where, hint=hint)


def read_baselines(host: Host, service: str) -> BaselineFile:
    path = baselines_path(service)
    return parse_baselines(host.read_file(path, sudo=True), f"{host.name}:{path}")


def write_baselines(host: Host, service: str, data: BaselineFile) -> None:
    host.run(["mkdir", "-p", state_dir(service)], sudo=True, check=True)
    host.write_file_atomic(
        baselines_path(service), data.to_text().encode(), mode=0o644, sudo=True, backup=False
    )


@dataclass(frozen=True)
class Comparison:
    status: Literal["no-baseline", "ok", "warning", "failed"]
    key: dict[str, Any]
    accept_length: float
    tokens_per_s: float | None
    baseline: float | None = None
    baseline_tokens_per_s: float | None = None
    baseline_samples: int = 0
    fail_ratio: float | None = None
    message: str = ""

    @property
    def ratio(self) -> float | None:
        return self.accept_length / self.baseline if self.baseline else None

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "key": self.key,
            "key_id": key_id(self.key),
            "accept_length": round(self.accept_length, 4),
            "tokens_per_s": round(self.tokens_per_s, 2) if self.tokens_per_s is not None else None,
            "baseline": round(self.baseline, 4) if self.baseline is not None else None,
            "baseline_tokens_per_s": (
                round(self.baseline_tokens_per_s, 2) if self.baseline_tokens_per_s is not None else None
            ),
            "baseline_samples": self.baseline_samples,
            "ratio": round(self.ratio, 4) if self.ratio is not None else None,
            "warn_below": WARN_RATIO,
            "fail_below": self.fail_ratio,
            "message": self.message,
        }


def compare(
    data: BaselineFile,
    key: dict[str, Any],
    accept_length: float,
    tokens_per_s: float | None,
    *,
    fail_ratio: float | None = None,
) -> Comparison:
    """This run against the key's baseline: ok, a warning below 95 %, a failure below `fail_ratio`."""
    entry = data.entry(key)
    args: dict[str, Any] = {"key": key, "accept_length": accept_length, "tokens_per_s": tokens_per_s}
    if entry is None:
        message = f"accept length {accept_length:.2f}: no baseline yet for {describe_key(key)}"
        earlier = data.same_config_other_release(key)
        if earlier is not None and accept_length <= NOTHING_ACCEPTED < earlier.accept_length:
            return Comparison(
                "failed",
                **args,
                fail_ratio=fail_ratio,
                message=f"accept length {accept_length:.2f} on SGLang {key.get('sglang')}, where the same"
                f" configuration accepted {earlier.accept_length:.2f} on SGLang {earlier.key.get('sglang')}:"
                " stuck at 1 after the upgrade (sgl-project/sglang#24795)",
            )
        return Comparison("no-baseline", **args, fail_ratio=fail_ratio, message=message + " (recorded now)")
    base = entry.accept_length
    ratio = accept_length / base
    rate = f", {tokens_per_s:.1f} tok/s" if tokens_per_s is not None else ""
    base_rate = f", {entry.tokens_per_s:.1f} tok/s" if entry.tokens_per_s is not None else ""
    said = (
        f"accept length {accept_length:.2f}{rate} against the baseline {base:.2f}{base_rate}"
        f" ({ratio:.0%}; median of {len(entry.samples)} passing run(s) of {describe_key(key)})"
    )
    found: dict[str, Any] = {
        **args,
        "baseline": base,
        "baseline_tokens_per_s": entry.tokens_per_s,
        "baseline_samples": len(entry.samples),
        "fail_ratio": fail_ratio,
    }
    if fail_ratio is not None and ratio < fail_ratio:
        return Comparison("failed", **found, message=f"{said}: below smoke.accept_fail_ratio {fail_ratio:g}")
    if ratio < WARN_RATIO:
        return Comparison(
            "warning", **found, message=f"{said}: below {WARN_RATIO:.0%} of the baseline; a weaker drafter?"
        )
    return Comparison("ok", **found, message=said)


def sample_of(accept_length: float, tokens_per_s: float | None, source: str) -> Sample:
    when = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return Sample(accept_length=round(accept_length, 4), tokens_per_s=tokens_per_s, when=when, source=source)


def records_baseline(comparison: Comparison) -> bool:
    """Whether this run becomes a sample: a first run, or one at or above the warning mark."""
    return comparison.status in ("no-baseline", "ok")


def smoke_tokens_per_s(report: Any) -> float | None:
    """Tokens per second over the smoke run's own requests (completion tokens / their time)."""
    timed = [r for r in report.results if r.completion_tokens and r.elapsed > 0]
    seconds = sum(r.elapsed for r in timed)
    return round(sum(r.completion_tokens for r in timed) / seconds, 2) if seconds else None


def judge_on_host(
    host: Host, profile: Profile, report: Any, *, source: str, version: str | None = None
) -> Comparison | None:
    """A smoke report's accept length against its configuration's baseline on `host`; a passing run at
    or above the warning mark is recorded as a sample. None without speculation or a measured value.
    `version` is the host's SGLang release (found on the host when not given)."""
    measured = report.measured_accept_length
    if measured is None or profile.spec.algorithm.value == "NONE":
        return None
    if version is None:
        version = _host_version(host, profile)
    data = read_baselines(host, profile.service.name)
    key = config_key(profile, version)
    rate, fail_ratio = smoke_tokens_per_s(report), profile.smoke.accept_fail_ratio
    found = compare(data, key, measured, rate, fail_ratio=fail_ratio)
    if report.passed and records_baseline(found):
        data.add(key, sample_of(measured, found.tokens_per_s, source))
        write_baselines(host, profile.service.name, data)
    return found


def _host_version(host: Host, profile: Profile) -> str | None:
    from k26ctl.errors import K26Error
    from k26ctl.patches.host import locate_sglang

    try:
        return locate_sglang(host, profile).version or profile.sglang.version
    except K26Error:
        return profile.sglang.version
