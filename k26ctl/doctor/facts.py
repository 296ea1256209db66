"""What doctor collected from a host: typed, JSON-serialisable, the same shape in a bundle."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Fact(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Gpu(_Fact):
    index: int
    name: str
    driver: str
    compute_cap: str
    memory_total_mib: int | None = None


class GpuFacts(_Fact):
    ok: bool
    error: str | None = None
    gpus: list[Gpu] = Field(default_factory=list)
    cuda_driver: str | None = None  # the CUDA version the driver supports (nvidia-smi's header)
    nvcc: str | None = None  # the toolkit under service.cuda_home, if any


class SGLangFacts(_Fact):
    root: str | None = None
    version: str | None = None
    python: str | None = None
    error: str | None = None


class TreeFacts(_Fact):
    git: bool = False
    toplevel: str | None = None
    revision: str | None = None
    describe: str | None = None
    changed: list[str] = Field(default_factory=list)  # `git status --porcelain` lines, tracked files
    error: str | None = None


class PatchFact(_Fact):
    name: str
    state: str
    message: str
    target: str


class UnitFacts(_Fact):
    path: str
    exists: bool
    matches_profile: bool | None = None
    active: str = ""
    sub: str = ""
    restarts: str = ""
    text: str | None = None  # secrets removed


class JournalFacts(_Fact):
    lines: list[str] = Field(default_factory=list)
    dropped: int = 0  # lines of the load left out in the middle (the first and the last are kept)
    error: str | None = None


class HttpFacts(_Fact):
    reachable: bool = False
    error: str | None = None
    server_info_path: str | None = None
    server_info_status: int | None = None
    server_info_keys: list[str] = Field(default_factory=list)
    identity: dict[str, Any] = Field(default_factory=dict)  # the keys k26ctl reads, secrets removed
    models_status: int | None = None
    model_ids: list[str] = Field(default_factory=list)
    metrics_status: int | None = None
    metric_names: list[str] = Field(default_factory=list)


class ProfileFacts(_Fact):
    name: str
    service: str
    served_name: str
    model_path: str
    algorithm: str
    draft_model_path: str | None = None
    enable_metrics: bool = True
    patches: list[str] = Field(default_factory=list)  # the patches the profile asks for


class RuleFinding(_Fact):
    level: str
    code: str
    message: str
    hint: str = ""


class Facts(_Fact):
    host: str
    collected: str
    profile: ProfileFacts
    gpu: GpuFacts
    sglang: SGLangFacts
    tree: TreeFacts
    patches: list[PatchFact] = Field(default_factory=list)
    patches_error: str | None = None
    unit: UnitFacts
    journal: JournalFacts
    http: HttpFacts
    rules: list[RuleFinding] = Field(
        default_factory=list
    )  # the cross-flag rules, judged with the host's release
    # (release, accept length) the same configuration reached on another SGLang release, if any
    earlier_release_accept: tuple[str, float] | None = None
