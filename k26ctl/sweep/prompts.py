"""The shipped chat prompts of the load measurement, rendered through a chat template for /generate.

/generate takes raw text (SGLang applies no template there), and it is the endpoint whose meta_info
carries `completion_tokens` and `spec_verify_ct` per request, so the template is applied here:
`chatml` (<|im_start|>role ... <|im_end|>, the lab model's) or `kimi_k2` (Kimi K2's
<|im_user|>user<|im_middle|> ... <|im_end|> markup).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from k26ctl.errors import UsageError

TEMPLATES = ("chatml", "kimi_k2")
PROMPTS_FILE = Path(__file__).with_name("prompts.yaml")


def load_prompts(path: Path | None = None) -> list[list[dict[str, str]]]:
    where = path or PROMPTS_FILE
    from k26ctl import inputs, yamlsafe

    text = inputs.read_text(
        where, what="prompts file", max_bytes=inputs.MAX_DATA_BYTES, hint="give a YAML list"
    )
    try:
        data: Any = yamlsafe.load(text, str(where))
    except yaml.YAMLError as exc:
        raise UsageError(
            f"cannot read prompts {where}: {exc}", "give a YAML list of {messages: [...]}"
        ) from None
    if not isinstance(data, list) or not data:
        raise UsageError(
            f"{where}: expected a non-empty YAML list", "each item: {messages: [{role, content}]}"
        )
    prompts = []
    for number, item in enumerate(data, 1):
        messages = item.get("messages") if isinstance(item, dict) else None
        if not isinstance(messages, list) or not all(
            isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages
        ):
            raise UsageError(f"{where}: item {number} needs messages: [{{role, content}}, ...]")
        prompts.append([{"role": str(m.get("role", "user")), "content": m["content"]} for m in messages])
    return prompts


def render(messages: list[dict[str, str]], template: str) -> str:
    if template == "chatml":
        body = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return body + "<|im_start|>assistant\n"
    if template == "kimi_k2":
        body = "".join(
            f"<|im_{m['role'] if m['role'] in ('system', 'user', 'assistant') else 'user'}|>"
            f"{m['role']}<|im_middle|>{m['content']}<|im_end|>"
            for m in messages
        )
        return body + "<|im_assistant|>assistant<|im_middle|>"
    raise UsageError(f"unknown chat template {template!r}", f"use one of {', '.join(TEMPLATES)}")
