"""The shapes bisect state must have when k26ctl reads it back: the session file, its log records,
and the markers of a `bisect-config log` file. Extra keys are ignored (a newer k26ctl may write more);
a wrong type, an unknown verdict or a missing field is a validation error naming the field."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from k26ctl.search.verdict import Verdict


class SpecFields(BaseModel):
    """The fields of a search's spec, each of its type (extra keys are ignored)."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    mode: Literal["numeric", "set"]
    profile: str | None = None
    param: str | None = None
    candidates: list[Any] = Field(default_factory=list, max_length=100_000)
    good_profile: str | None = None
    bad_profile: str | None = None
    changes: list[dict[str, Any]] = Field(default_factory=list)
    sets: list[str] = Field(default_factory=list)
    run: str | None = None
    deploy: bool = True
    tries: int = Field(default=1, ge=1, le=100)
    verify_ends: bool = True
    load_failure_is_bad: bool = False
    refine: bool = True
    cwd: str = "."
    original: dict[str, Any] | None = None  # session files only: what was live before the search
    created: float = 0.0


class SpecShape(SpecFields):
    """What a spec marker must hold before a replay trusts it: the fields, and a complete search."""

    @model_validator(mode="after")
    def _complete(self) -> SpecShape:
        if self.mode == "numeric" and (not self.profile or not self.param or len(self.candidates) < 2):
            raise ValueError("a numeric search needs profile, param and at least two candidates")
        if self.mode == "set":
            if not self.good_profile or not self.bad_profile:
                raise ValueError("a set search needs good_profile and bad_profile")
            for change in self.changes:
                if not isinstance(change.get("key"), str) or not {"good", "bad"} <= change.keys():
                    raise ValueError("each change needs key, good and bad")
        return self


class StepMarkShape(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    assignment: dict[str, Any]
    verdict: Verdict
    seconds: float = Field(default=0.0, ge=0)
    restarted: bool = False


class SessionFileShape(BaseModel):
    """`<session>.json`: the spec, and the outcome once the search ended."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    name: str = ""
    spec: SpecFields
    outcome: dict[str, Any] | None = None


class StartShape(BaseModel):
    """A log record announcing a step (before anything is deployed)."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    event: Literal["start"]
    step: int = Field(ge=1)
    assignment: dict[str, Any]
    purpose: str = ""


class FinishShape(BaseModel):
    """A log record with a step's verdict."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    event: Literal["finish"]
    step: int = Field(ge=1)
    assignment: dict[str, Any]
    verdict: Verdict
    seconds: float = Field(default=0.0, ge=0)
    restarted: bool = False
    tries: list[str] = Field(default_factory=list)
    detail: str = ""
    replayed: bool = False
    load_seconds: float | None = Field(default=None, ge=0)
    phases: dict[str, Any] | None = None


def log_record_shape(record: dict[str, Any]) -> type[BaseModel] | None:
    """The shape of one session log record by its event; None for events this version does not use."""
    event = record.get("event")
    if event == "start":
        return StartShape
    if event == "finish":
        return FinishShape
    if isinstance(event, str):
        return None
    return FinishShape  # no event, or not a string: validation names the field
