"""Structured output checks: the schema subset, tool calls as SGLang returns them, and the suite fields."""

from __future__ import annotations

import json
from typing import Any

import pytest

from k26ctl.errors import ConfigError
from k26ctl.smoke.checks import run_checks, structured_checks
from k26ctl.smoke.runner import structured_traits
from k26ctl.smoke.structured import json_schema_findings, schema_problem, tool_call_findings, unsupported
from k26ctl.smoke.suite import load_suite, parse_suite

WEATHER: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city"],
    "additionalProperties": False,
}
BOOKS: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 5}},
    "required": ["query"],
}
TOOLS = {"get_weather": WEATHER, "search_books": BOOKS}


def call(name: Any, arguments: Any, index: int = 0) -> dict[str, Any]:
    return {
        "id": f"functions.{name}:{index}",
        "index": index,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"city": "Paris", "unit": "celsius"}, None),
        ({"city": "Paris"}, None),
        ({"unit": "celsius"}, "$: missing required property 'city'"),
        ({"city": 7}, "$.city: expected string, got integer"),
        ({"city": "Paris", "unit": "kelvin"}, "$.unit: 'kelvin' is not one of ['celsius', 'fahrenheit']"),
        ({"city": "Paris", "country": "FR"}, "$: unexpected property 'country'"),
        (["Paris"], "$: expected object, got array"),
    ],
)
def test_schema_subset(value: Any, problem: str | None) -> None:
    assert schema_problem(value, WEATHER) == problem


def test_schema_numbers_booleans_and_items() -> None:
    assert schema_problem({"query": "bees", "limit": 2}, BOOKS) is None
    assert schema_problem({"query": "bees", "limit": 2.0}, BOOKS) is None  # JSON has one number type
    assert schema_problem({"query": "bees", "limit": 9}, BOOKS) == "$.limit: 9 is above the maximum 5"
    assert schema_problem({"query": "bees", "limit": True}, BOOKS) == "$.limit: expected integer, got boolean"
    listed = {"type": "array", "items": {"type": "number"}, "minItems": 2}
    assert schema_problem([1, 2.5], listed) is None
    assert schema_problem([1], listed) == "$: 1 items, at least 2 required"
    assert schema_problem([1, "x"], listed) == "$[1]: expected number, got string"
    assert schema_problem(None, {"type": ["string", "null"]}) is None


def test_keywords_outside_the_subset_are_refused_not_ignored() -> None:
    assert unsupported(WEATHER) is None
    assert unsupported({"type": "string", "pattern": "^a"}) == (
        "schema: unsupported keyword 'pattern' (supported: additionalProperties, description, enum, items, "
        "maxItems, maximum, minItems, minimum, properties, required, title, type)"
    )
    assert (
        unsupported({"properties": {"a": {"type": "date"}}})
        == "schema.properties.a.type: unknown type 'date'"
    )


def test_a_good_tool_call_passes() -> None:
    calls = [call("get_weather", '{"city": "Paris", "unit": "celsius"}')]
    assert tool_call_findings(calls, TOOLS, "", expected="get_weather") == []


def test_ngram_style_corrupted_arguments_are_named() -> None:
    calls = [call("get_weather", '{"city": "parameter=parameter=Paris"')]
    (finding,) = tool_call_findings(calls, TOOLS, "")
    assert finding.detector == "tool_call_arguments" and finding.severity == "fail"
    assert finding.message.startswith(
        'arguments of get_weather are not JSON: \'{"city": "parameter=parameter'
    )


def test_every_way_a_call_goes_wrong_has_its_own_line() -> None:
    assert [f.reason() for f in tool_call_findings(None, TOOLS, "")] == [
        "tool_call: no tool call parsed (no message.tool_calls)"
    ]
    assert [f.reason() for f in tool_call_findings([], TOOLS, "", finish_reason="length")] == [
        "tool_call: no tool call parsed (message.tool_calls is empty: a call section began but no complete "
        "call parsed; the answer ran to its token limit)"
    ]
    raw = "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    assert tool_call_findings(None, TOOLS, raw)[0].message.endswith("; the content holds raw call text)")
    calls = [
        call("get_wether", "{}"),
        call("get_weather", '{"city": "Paris", "unit": "kelvin"}', 1),
        call("search_books", {"query": "bees"}, 2),  # a mapping: what protocol.py also allows
        {"id": "x", "type": "function"},
    ]
    assert [f.reason() for f in tool_call_findings(calls, TOOLS, "", expected="get_time")] == [
        "tool_call_name: tool call 0 names 'get_wether', which the request did not declare "
        "(get_weather, search_books)",
        "tool_call_arguments: arguments of get_weather do not fit its parameters: "
        "$.unit: 'kelvin' is not one of ['celsius', 'fahrenheit']",
        "tool_call: tool call 3 has no function object",
        "tool_call_name: expected a call of get_time, got get_wether, get_weather, search_books",
    ]


def test_json_schema_answer() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    assert json_schema_findings('{"city": "Paris"}', schema) == []
    (broken,) = json_schema_findings('{"city": "Par', schema)
    assert broken.reason().startswith("json_schema: the answer is not JSON: Unterminated string")
    (wrong,) = json_schema_findings('{"town": "Paris"}', schema)
    assert (
        wrong.reason()
        == "json_schema: the answer does not fit its schema: $: missing required property 'city'"
    )


SUITE: dict[str, Any] = {
    "name": "tools",
    "prompts": [
        {
            "id": "weather",
            "prompt": "What is the weather in Paris?",
            "tools": [{"name": "get_weather", "parameters": WEATHER}],
            "expect": [{"type": "tool_call", "value": "get_weather"}],
        },
        {
            "id": "paris",
            "kind": "json",
            "prompt": "Describe Paris as JSON.",
            "schema": {"type": "object", "required": ["city"]},
            "expect": [{"type": "json_schema"}, {"type": "contains", "value": "Paris"}],
        },
    ],
}


def test_suite_declares_tools_and_schemas() -> None:
    suite = parse_suite(SUITE)
    weather, paris = suite.prompts
    assert suite.needs_tool_call_parser and weather.structured and paris.structured
    assert weather.tools is not None and weather.tools[0].to_request() == {
        "type": "function",
        "function": {"name": "get_weather", "description": "", "parameters": WEATHER},
    }
    # the text checks skip the structured ones; structured_checks judges them
    assert run_checks(paris.expect, '{"city": "Paris"}') == []
    assert structured_checks(paris, '```json\n{"city": "Paris"}\n```', None) == []
    good = [call("get_weather", json.dumps({"city": "Paris"}))]
    assert structured_checks(weather, "", good) == []
    (missing,) = structured_checks(weather, "", None)
    assert missing.reason() == "tool_call: no tool call parsed (no message.tool_calls)"
    assert structured_checks(weather.model_copy(update={"expect": []}), "", None) == []
    assert not parse_suite({"name": "x", "prompts": [{"id": "a", "prompt": "b"}]}).needs_tool_call_parser


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"expect": [{"type": "tool_call"}], "tools": None}, "expectation 'tool_call' needs 'tools'"),
        ({"api": "generate"}, "tools and schema need api 'chat'"),
        (
            {"tools": [{"name": "f", "parameters": {"type": "object", "oneOf": []}}]},
            "unsupported keyword 'oneOf'",
        ),
        ({"tools": [{"name": "f"}, {"name": "f"}]}, "two tools with the same name"),
    ],
)
def test_bad_structured_prompts_are_one_line_config_errors(change: dict[str, Any], message: str) -> None:
    prompt = {**SUITE["prompts"][0], **change}
    with pytest.raises(ConfigError, match=message):
        parse_suite({"name": "bad", "prompts": [prompt]})


def test_server_traits_decide_parser_reason_and_response_format() -> None:
    def info(**args: Any) -> dict[str, Any]:
        return {"server_args": args}

    assert structured_traits(None).no_tool_parser is None and not structured_traits(None).grammar
    plain = structured_traits(info(grammar_backend="xgrammar", tool_call_parser="kimi_k2"))
    assert plain.no_tool_parser is None and plain.grammar
    assert (
        structured_traits(info(grammar_backend="xgrammar", speculative_algorithm="DDTREE")).grammar is False
    )
    assert structured_traits(info(grammar_backend="none")).grammar is False
    assert structured_traits(info(grammar_backend="xgrammar", device="cpu")).grammar is False
    dflash = {"server_args": {"grammar_backend": "xgrammar", "speculative_algorithm": "DFLASH"}}
    assert structured_traits({**dflash, "version": "0.5.15"}).grammar is False  # refused at admission
    assert structured_traits({**dflash, "version": "0.5.23"}).grammar is True
    assert structured_traits(dflash).grammar is False  # release unknown
    assert structured_traits(info()).no_tool_parser == (
        "the server runs without --tool-call-parser (sglang.tool_call_parser)"
    )


def test_shipped_suites_load() -> None:
    for name in ("default", "lab-tools"):
        load_suite(name)
    assert load_suite("lab-tools").needs_tool_call_parser


def test_validate_warns_when_the_suite_has_tool_calls_and_the_server_no_parser(tmp_path: Any) -> None:
    from k26ctl.profile import load_profile
    from k26ctl.resources import profiles_dir
    from k26ctl.validate import validate_profile

    def codes(*overrides: str) -> list[str]:
        loaded = load_profile(profiles_dir() / "ddtree-b7.yaml", list(overrides))
        return validate_profile(loaded.profile, systemd=False).codes()

    assert "smoke/no-tool-call-parser" not in codes()  # the Kimi profiles set kimi_k2
    assert "smoke/no-tool-call-parser" in codes("sglang.tool_call_parser=null")
    # given through extra_args, the flag counts as set
    assert "smoke/no-tool-call-parser" not in codes(
        "sglang.tool_call_parser=null", "sglang.extra_args=['--tool-call-parser', 'kimi_k2']"
    )
    plain = tmp_path / "plain.yaml"
    plain.write_text("name: plain\nprompts: [{id: a, prompt: hello}]\n")
    assert "smoke/no-tool-call-parser" not in codes("sglang.tool_call_parser=null", f"smoke.suite={plain}")
    assert "smoke/no-tool-call-parser" not in codes(
        "sglang.tool_call_parser=null", "smoke.suite=/missing.yaml"
    )


def test_the_watch_canary_leaves_structured_prompts_out() -> None:
    from k26ctl.watch.canary import canary_suite

    pool = canary_suite(load_suite("default"))
    assert {"tool-call", "json-schema"} & {p.id for p in pool.prompts} == set()
    assert "prose" in {p.id for p in pool.prompts}
