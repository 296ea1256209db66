"""Smoke suites: the prompts a server must answer sensibly, as YAML.

A suite lists prompts with their kind (which sets the detector thresholds), the API to use (chat or
the native /generate, which reports per-request accept length), token limits, temperatures,
per-prompt `chat_template_kwargs`, and optional prompt-aware expectations, each with a severity.
A name without a path resolves to a suite shipped in `k26ctl/smoke/suites/`.

Structured output: a prompt may declare `tools` (sent as the chat request's `tools`, answered through
the server's `--tool-call-parser`) and a JSON `schema` for its answer (sent as `response_format` where
the server runs a grammar backend, otherwise only checked); the `tool_call` and `json_schema`
expectations judge them (k26ctl/smoke/structured.py). A suite with tools needs a tool-call parser.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from k26ctl.errors import ConfigError
from k26ctl.smoke.kinds import KINDS
from k26ctl.smoke.structured import unsupported

CheckType = Literal[
    "contains",
    "not_contains",
    "regex",
    "answer",
    "json",
    "python",
    "repeats",
    "min_tokens",
    "tool_call",
    "json_schema",
]
STRUCTURED_CHECKS = ("tool_call", "json_schema")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Expectation(_Strict):
    """One prompt-aware check. `value` is the text, pattern, answer or word; `count` the number of
    repeats or tokens. A `warn` expectation is reported but does not fail the suite."""

    type: CheckType
    value: str | None = None
    count: int | None = Field(default=None, ge=0)
    severity: Literal["fail", "warn"] = "fail"

    @model_validator(mode="after")
    def _needs(self) -> Expectation:
        if self.type == "json_schema" and self.value:
            raise ValueError("expectation 'json_schema' takes no value: it uses the prompt's schema")
        if self.type in ("contains", "not_contains", "regex", "answer", "repeats") and not self.value:
            raise ValueError(f"expectation '{self.type}' needs a value")
        if self.type in ("repeats", "min_tokens") and self.count is None:
            raise ValueError(f"expectation '{self.type}' needs a count")
        return self


class ToolSpec(_Strict):
    """A function the chat request declares (`tools: [{type: function, function: ...}]`)."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})

    @model_validator(mode="after")
    def _schema_known(self) -> ToolSpec:
        problem = unsupported(self.parameters, f"tool {self.name} parameters")
        if problem:
            raise ValueError(problem)
        return self

    def to_request(self) -> dict[str, Any]:
        # never `strict`: a strict tool turns tool_choice auto into a grammar (0.5.15
        # function_call_parser.py:240-255), which DDTree refuses and a CPU server dies of
        function = {"name": self.name, "description": self.description, "parameters": self.parameters}
        return {"type": "function", "function": function}


class PromptSpec(_Strict):
    id: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    kind: str = "prose"
    prompt: str | None = None
    messages: list[dict[str, str]] | None = None
    system: str | None = None
    api: Literal["chat", "generate"] = "chat"
    max_tokens: int = Field(default=200, ge=1)
    temperatures: list[float] | None = None  # None: the suite's temperatures
    chat_template_kwargs: dict[str, Any] | None = None
    check_reasoning: bool = True
    ignore: list[str] = Field(default_factory=list)  # detector names that do not apply (repeat-a-word)
    tools: list[ToolSpec] | None = None  # sent as the chat request's tools (needs --tool-call-parser)
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")  # the JSON answer's schema
    expect: list[Expectation] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_input(self) -> PromptSpec:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError(f"prompt '{self.id}': give exactly one of 'prompt' or 'messages'")
        if self.api == "generate" and self.prompt is None:
            raise ValueError(f"prompt '{self.id}': api 'generate' takes a plain 'prompt' text")
        if self.kind not in KINDS:
            raise ValueError(f"prompt '{self.id}': unknown kind '{self.kind}' (known: {', '.join(KINDS)})")
        self._structured_ok()
        return self

    def _structured_ok(self) -> None:
        if (self.tools or self.schema_ is not None) and self.api != "chat":
            raise ValueError(f"prompt '{self.id}': tools and schema need api 'chat'")
        if self.schema_ is not None:
            problem = unsupported(self.schema_, f"prompt '{self.id}' schema")
            if problem:
                raise ValueError(problem)
        types = {check.type for check in self.expect}
        if "tool_call" in types and not self.tools:
            raise ValueError(f"prompt '{self.id}': expectation 'tool_call' needs 'tools'")
        if "json_schema" in types and self.schema_ is None:
            raise ValueError(f"prompt '{self.id}': expectation 'json_schema' needs a 'schema'")
        if self.tools and len({t.name for t in self.tools}) != len(self.tools):
            raise ValueError(f"prompt '{self.id}': two tools with the same name")

    @property
    def structured(self) -> bool:
        """Answered through the chat endpoint's parsers (tools) or with a schema: never by token ids."""
        return bool(self.tools) or self.schema_ is not None

    def chat_messages(self) -> list[dict[str, str]]:
        if self.messages is not None:
            return list(self.messages)
        messages = [{"role": "system", "content": self.system}] if self.system else []
        return [*messages, {"role": "user", "content": self.prompt or ""}]

    def prompt_text(self) -> str:
        """The user-visible prompt, for echo detection."""
        if self.prompt is not None:
            return self.prompt
        return "\n".join(m.get("content", "") for m in self.messages or [] if m.get("role") == "user")


class Suite(_Strict):
    name: str
    description: str = ""
    temperatures: list[float] = Field(default_factory=lambda: [0.0, 0.7])
    top_p: float | None = Field(default=None, gt=0, le=1)
    seed: int | None = None
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    determinism: bool = True  # send every temperature-0 request twice; the answers must agree
    expectations: bool = True  # run the prompts' expect blocks (a lab suite may switch them off)
    prompts: list[PromptSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> Suite:
        seen: set[str] = set()
        for p in self.prompts:
            if p.id in seen:
                raise ValueError(f"duplicate prompt id '{p.id}'")
            seen.add(p.id)
        return self

    @property
    def needs_tool_call_parser(self) -> bool:
        """Some prompt declares tools: the server must run with --tool-call-parser to answer them."""
        return any(p.tools for p in self.prompts)

    def temperatures_for(self, prompt: PromptSpec) -> list[float]:
        return list(prompt.temperatures if prompt.temperatures is not None else self.temperatures)


def suites_dir() -> Path:
    return Path(__file__).parent / "suites"


def shipped_suites() -> list[str]:
    return sorted(p.stem for p in suites_dir().glob("*.yaml"))


def resolve_suite_path(name_or_path: str | Path) -> Path:
    """A path is used as is; a bare name (no directory, no suffix) means a shipped suite."""
    path = Path(name_or_path)
    if path.exists() or path.is_symlink():  # a dangling or looping link: the reader says why
        return path
    if len(path.parts) == 1 and not path.suffix:
        shipped = suites_dir() / f"{path.name}.yaml"
        if shipped.exists():
            return shipped
        raise ConfigError(
            f"no shipped suite named '{path.name}'", f"shipped suites: {', '.join(shipped_suites())}"
        )
    raise ConfigError(
        f"suite file not found: {path}", f"or use a shipped suite: {', '.join(shipped_suites())}"
    )


def parse_suite(data: Any, where: str = "suite") -> Suite:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: a suite must be a mapping with 'name' and 'prompts'")
    try:
        return Suite.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"{where}: {loc}: {err['msg']}", "see k26ctl/smoke/suites/default.yaml") from None


def load_suite(name_or_path: str | Path | None = None) -> Suite:
    """Load a suite file, or a shipped suite by name (default: 'default')."""
    from k26ctl import inputs, yamlsafe

    path = resolve_suite_path(name_or_path or "default")
    text = inputs.read_text(path, what="suite", max_bytes=inputs.MAX_DATA_BYTES)
    try:
        data = yamlsafe.load(text, str(path))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}", "fix the YAML syntax") from None
    return parse_suite(data, str(path))
