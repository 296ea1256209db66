"""The shapes sweep state must have when k26ctl reads it back: the session file and its log records.
Extra keys are ignored; a wrong type or a missing field is a validation error naming the field."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Shape(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


class ParamShape(_Shape):
    key: str
    values: list[Any] = Field(min_length=1)


class ObjectiveShape(_Shape):
    concurrency: int = Field(ge=1)
    max_ttft_p99_ms: float | None = None
    max_itl_p99_ms: float | None = None


class SweepSpecShape(_Shape):
    profile: str
    params: list[ParamShape]
    concurrency: list[int]
    objective: ObjectiveShape
    sets: list[str] = Field(default_factory=list)
    max_restarts: int = 12
    rounds: int = 2
    requests_per_level: int = 16
    max_new_tokens: int = 128
    template: str = "chatml"
    controls: bool = True
    original: dict[str, Any] | None = None
    created: float = 0.0


class SweepFileShape(_Shape):
    """`<session>.json`."""

    name: str = ""
    spec: SweepSpecShape


class LevelShape(_Shape):
    concurrency: int
    requests: int = Field(ge=0)
    errors: int = Field(ge=0)
    output_tokens_per_s: float
    accept_length: float | None = None
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p99_ms: float | None = None
    seconds: float = 0.0
    wall_output_tokens_per_s: float | None = None


class PointShape(_Shape):
    """A measured point."""

    event: Literal["point"]
    number: int = Field(ge=0)
    assignment: dict[str, Any]
    role: str = "search"
    label: str = ""
    up: bool = False
    coherent: bool = False
    restarted: bool = False
    seconds: float = 0.0
    detail: str = ""
    levels: list[LevelShape] = Field(default_factory=list)
    phases: dict[str, Any] | None = None


class PointStartShape(_Shape):
    """A point announced before it is deployed."""

    event: Literal["start"]
    number: int = Field(ge=0)
    assignment: dict[str, Any]
    role: str = "search"


def log_record_shape(record: dict[str, Any]) -> type[BaseModel] | None:
    event = record.get("event")
    if event == "start":
        return PointStartShape
    if event == "point" or not isinstance(event, str):
        return PointShape
    return None
