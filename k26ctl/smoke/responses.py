"""The shapes of the SGLang answers k26ctl reads, as pydantic models.

Each endpoint's answer is validated before any field is used, so a wrong type (`completion_tokens:
"abc"`, `meta_info: "x"`, `{"data": 5}`) is one `ResponseError` naming the field, which the runner
records as a failed request, instead of a TypeError deep in the report. Unknown fields are ignored:
SGLang adds fields between releases. Numbers must be finite.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


class ModelCard(_Answer):
    id: str


class ModelList(_Answer):
    data: list[ModelCard]


class ChatMessage(_Answer):
    content: str | None = None
    reasoning_content: str | None = None
    # kept as sent: a malformed call is judged by the tool-call check (smoke/structured.py), not refused
    tool_calls: list[Any] | None = None


class ChatChoice(_Answer):
    message: ChatMessage
    finish_reason: str | None = None


class Usage(_Answer):
    completion_tokens: int | None = Field(default=None, ge=0)


class ChatCompletion(_Answer):
    choices: list[ChatChoice] = Field(min_length=1)
    usage: Usage | None = None


class FinishReason(_Answer):
    type: str | None = None


class MetaInfo(_Answer):
    finish_reason: str | FinishReason | None = None
    completion_tokens: int | None = Field(default=None, ge=0)
    spec_accept_length: float | None = Field(default=None, ge=0)
    spec_verify_ct: int | None = Field(default=None, ge=0)


TokenId = Annotated[StrictInt, Field(ge=0)]


class GenerateAnswer(_Answer):
    text: str
    meta_info: MetaInfo | None = None
    output_ids: list[TokenId] | None = None
    prompt_token_ids: list[TokenId] | None = None


class TokenizeAnswer(_Answer):
    tokens: list[TokenId]


class DetokenizeAnswer(_Answer):
    text: str


class InternalState(_Answer):
    avg_spec_accept_length: float | None = None


class ServerInfo(_Answer):
    """Only what k26ctl reads is checked; the whole document is kept for the baseline identity."""

    version: str | None = None
    internal_states: list[InternalState] | None = None
    server_args: dict[str, Any] | None = None


M = TypeVar("M", bound=BaseModel)


def shape_problem(exc: ValidationError) -> str:
    """One line naming the first wrong field, without echoing the (possibly huge) value."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "body"
    more = f" (+{len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return f"{loc}: {err['msg']}{more}"


def parse_answer(model: type[M], data: Any) -> M:
    """Validate; raises ValueError with `shape_problem`'s text on a wrong shape."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ValueError(shape_problem(exc)) from None
