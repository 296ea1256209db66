"""The lab stand-in's tool-call parser against SGLang's own kimi_k2 parser, in each installed release.

The real `KimiK2Detector.detect_and_parse` runs in the release's venv (a subprocess: SGLang's imports
stay out of this interpreter) on the same texts; content and calls must agree, broken ones included.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from k26ctl.lab.real.releases import RELEASES, installed, venv_dir
from k26ctl.lab.server.tool_calls import message_fields, parse

pytestmark = pytest.mark.realsglang

WEATHER = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"properties": {"city": {}}}},
}
BOOKS = {
    "type": "function",
    "function": {"name": "search_books", "parameters": {"properties": {"query": {}}}},
}
BEGIN, END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"


def call(call_id: str, arguments: str, end: str = "<|tool_call_end|>") -> str:
    return f"<|tool_call_begin|>{call_id}<|tool_call_argument_begin|>{arguments}{end}"


CASES: list[tuple[str, list[dict[str, Any]]]] = [
    ("The capital of France is Paris.", [WEATHER]),
    ("Let me look. " + BEGIN + call("functions.get_weather:0", '{"city": "Paris"}') + END, [WEATHER]),
    (
        BEGIN
        + call("functions.get_weather:0", '{"city": "Paris"}')
        + call("search_books:1", '{"query": "bees", "limit": 2}')
        + END,
        [WEATHER, BOOKS],
    ),
    # the tool-argument fault: the call never reaches its end marker
    (
        f'{BEGIN}<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{{"city=I toto',
        [WEATHER],
    ),
    # closed, but the arguments are not JSON: passed on as they are
    (BEGIN + call("functions.get_weather:0", '{"city": parameter=parameter=Paris}') + END, [WEATHER]),
    # bare counters: the only tool, or the one whose parameter names match
    (BEGIN + call("3", '{"city": "Paris"}') + END, [WEATHER]),
    (BEGIN + call("0", '{"query": "bees"}') + END, [WEATHER, BOOKS]),
    (BEGIN + call("0", "{not json}") + END, [WEATHER, BOOKS]),
    (BEGIN + call("functions.get_weather:0", '"Paris"') + END, [WEATHER]),  # not an object: no call
]

REAL = """
import json, sys
from sglang.srt.entrypoints.openai.protocol import Tool
from sglang.srt.function_call.kimik2_detector import KimiK2Detector
out = []
for text, tools in json.load(sys.stdin):
    result = KimiK2Detector().detect_and_parse(text, [Tool.model_validate(t) for t in tools])
    out.append([result.normal_text, [[c.name, c.parameters] for c in result.calls]])
print(json.dumps(out))
"""


def stand_in(text: str, tools: list[dict[str, Any]]) -> list[Any]:
    parsed = parse(text, tools)
    if parsed is None:
        return [text, []]
    content, calls = parsed
    return [content, [[c.name, c.arguments] for c in calls]]


@pytest.mark.parametrize("version", RELEASES)
def test_stand_in_parses_as_the_release_does(version: str) -> None:
    if not installed(version):
        pytest.skip(f"real SGLang {version} not installed: run `bash scripts/bootstrap.sh --real-sglang`")
    python = venv_dir(version) / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c", REAL], input=json.dumps(CASES), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    real = json.loads(done.stdout.strip().splitlines()[-1])
    assert real == [stand_in(text, tools) for text, tools in CASES]


def test_message_fields_follow_serving_chat() -> None:
    text = BEGIN + call("functions.get_weather:0", '{"city": "Paris"}') + call("search_books:7", "{}") + END
    content, calls, finish = message_fields("Sure. " + text, [WEATHER, BOOKS], "stop")
    assert content == "Sure. " and finish == "tool_calls"
    assert calls is not None and [(c["id"], c["index"], c["type"]) for c in calls] == [
        ("functions.get_weather:0", 0, "function"),
        ("functions.search_books:1", 1, "function"),  # numbered within the answer, not by the model's :7
    ]
    assert message_fields("Paris.", [WEATHER], "stop") == ("Paris.", None, "stop")
    assert message_fields(BEGIN + "<|tool_call_begin|>x", [WEATHER], "length") == ("", [], "length")
