"""The tool-argument verify fault, in an engine run in this process: one wrong token inside a Kimi K2
call's arguments, and every other token the healthy engine's."""

from __future__ import annotations

import pytest

from tests.lab_server.helpers import STOPS, TOKENIZER, render_chat

torch = pytest.importorskip("torch", reason="the lab needs torch")

from k26ctl.lab.server.drafter import NGramDrafter  # noqa: E402
from k26ctl.lab.server.engine import Engine, SpecSettings  # noqa: E402
from k26ctl.lab.server.numerics import Numerics, ToolArguments  # noqa: E402
from k26ctl.lab.server.tree_loader import BUNDLED_TREE, import_tree  # noqa: E402
from k26ctl.lab.server.weights import TOOLS_DRAFT_DIR, TOOLS_MODEL_DIR, load_model  # noqa: E402

pytestmark = pytest.mark.lab

BEGIN = "<|tool_call_argument_begin|>"


def test_corrupt_only_a_quote_inside_an_argument_span_and_only_once() -> None:
    spans = ToolArguments(TOKENIZER.encode)
    quote = TOKENIZER.encode('"')[0]

    def corrupt(text: str, token: int = quote) -> bool:
        return spans.corrupt(TOKENIZER.encode(text), token)

    assert not corrupt("She said ")
    assert corrupt(f'<|tool_call_begin|>functions.f:0{BEGIN}{{"city') and corrupt(f'x{BEGIN}{{"city": ')
    assert not corrupt(f"{BEGIN}{{")  # the opening {" stays, or no parser would find the call
    assert not corrupt(f'{BEGIN}{{"city', TOKENIZER.encode("x")[0])  # quotes only
    assert not corrupt(f'{BEGIN}{{"city=: ')  # one wrong token per span
    assert not corrupt(f'{BEGIN}{{"a": 1}}<|tool_call_end|>')  # the span has closed
    assert corrupt(f'{BEGIN}{{"a=: 1}}<|tool_call_end|><|tool_call_begin|>g:1{BEGIN}{{"b')


def run(fault: str, question: str) -> str:
    torch.set_num_threads(1)
    model = load_model(TOOLS_MODEL_DIR)
    drafter = NGramDrafter.load(TOOLS_DRAFT_DIR, model.config.vocab_size)
    spec = SpecSettings("DDTREE", block_size=8, budget=7, max_topk=1)
    engine = Engine(model, import_tree(BUNDLED_TREE), spec, drafter, numerics=Numerics(verify_fault=fault))
    prompt = TOKENIZER.encode(render_chat([{"role": "user", "content": question}], thinking=False))
    (req,) = engine.generate([prompt], 220, STOPS)
    return TOKENIZER.decode(req.output_ids)


def test_the_fault_changes_one_argument_character_and_nothing_else() -> None:
    healthy = run("none", "What is the weather in Paris?")
    assert healthy.startswith("<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0") and (
        f'{BEGIN}{{"city": "Paris", "unit": "celsius"}}<|tool_call_end|>' in healthy
    )
    faulty = run("tool-arguments", "What is the weather in Paris?")
    # the KV keeps the right token, so the model goes on unharmed: one character differs, a quote
    assert len(faulty) == len(healthy)
    (where,) = [i for i, (a, b) in enumerate(zip(healthy, faulty, strict=True)) if a != b]
    assert (healthy[where], faulty[where]) == ('"', "=")
    assert healthy.index(BEGIN) < where < healthy.index("<|tool_call_end|>")
    plain = "Explain how plants make food."
    assert run("tool-arguments", plain) == run("none", plain)
