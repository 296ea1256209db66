"""Byte-level tokenizer ordered like GPT-2's byte table, plus a few special tokens.

GPT-2 numbers the printable bytes first ("!" .. "~", then Latin-1 printables) and the rest after,
so token 0 is "!": a model whose logits turn NaN and whose argmax falls back to index 0 prints
"!!!!", which is what a poisoned SGLang server printed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<think>",
    "</think>",
    "<|mask|>",
    "<|reserved_0|>",
    "<|reserved_1|>",
)


def _gpt2_byte_order() -> list[int]:
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("\xa1"), ord("\xac") + 1))
        + list(range(ord("\xae"), ord("\xff") + 1))
    )
    return printable + [b for b in range(256) if b not in printable]


class ByteTokenizer:
    def __init__(self) -> None:
        self.id_to_byte = _gpt2_byte_order()
        self.byte_to_id = {b: i for i, b in enumerate(self.id_to_byte)}
        self.special_ids = {tok: 256 + i for i, tok in enumerate(SPECIAL_TOKENS)}
        self.id_to_special = {i: tok for tok, i in self.special_ids.items()}
        self._special_re = re.compile("(" + "|".join(re.escape(t) for t in SPECIAL_TOKENS) + ")")

    @property
    def vocab_size(self) -> int:
        return 256 + len(SPECIAL_TOKENS)

    @property
    def eos_id(self) -> int:
        return self.special_ids["<|endoftext|>"]

    @property
    def im_end_id(self) -> int:
        return self.special_ids["<|im_end|>"]

    def encode(self, text: str, allow_special: bool = True) -> list[int]:
        pieces = self._special_re.split(text) if allow_special else [text]
        ids: list[int] = []
        for piece in pieces:
            if not piece:
                continue
            if allow_special and piece in self.special_ids:
                ids.append(self.special_ids[piece])
            else:
                ids.extend(self.byte_to_id[b] for b in piece.encode("utf-8"))
        return ids

    def decode(self, ids: Iterable[int], skip_special: bool = False) -> str:
        out = bytearray()
        for i in ids:
            if i < 256:
                out.append(self.id_to_byte[i])
            elif not skip_special and i in self.id_to_special:
                out.extend(self.id_to_special[i].encode())
        return out.decode("utf-8", errors="replace")


def render_chat(
    messages: list[dict[str, str]], thinking: bool = True, add_generation_prompt: bool = True
) -> str:
    """The lab model's chat template. With thinking off the assistant turn opens with an empty think block."""
    text = ""
    for message in messages:
        content = message.get("content") or ""
        if not isinstance(content, str):
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        text += f"<|im_start|>{message.get('role', 'user')}\n{content}<|im_end|>\n"
    if add_generation_prompt:
        text += "<|im_start|>assistant\n"
        if not thinking:
            text += "<think></think>"
    return text
