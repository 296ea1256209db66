"""The lab model's training documents, rendered from the committed texts in data/."""

from __future__ import annotations

from pathlib import Path

from k26ctl.lab.server.tokenizer import render_chat

DATA_DIR = Path(__file__).resolve().parent / "data"


def _paragraphs(text: str) -> list[str]:
    return [p.strip() for p in text.split("\n\n") if p.strip()]


def parse_chats(text: str) -> list[tuple[str, str, str]]:
    """`Q:`/`T:`/`A:` blocks separated by blank lines -> (question, thinking, answer)."""
    chats = []
    for block in text.split("\n\nQ: "):
        block = block.strip()
        if block.startswith("Q: "):
            block = block[3:]
        question, rest = block.split("\nT: ", 1)
        thinking, answer = rest.split("\nA: ", 1)
        chats.append((question.strip(), thinking.strip(), answer.strip()))
    return chats


# Chats whose answers are Kimi K2 tool calls (and one JSON object): only the tool-call checkpoint
# (k26lab-tiny-tools) is trained on them, so the shipped k26lab-tiny and its outputs stay as they are.
TOOL_CHATS = "tools.txt"


def documents(data_dir: Path = DATA_DIR, tools: bool = False) -> list[str]:
    docs = [p + "<|endoftext|>" for p in _paragraphs((data_dir / "prose.txt").read_text())]
    chats = (data_dir / "chats.txt").read_text()
    if tools:
        chats = chats.rstrip("\n") + "\n\n" + (data_dir / TOOL_CHATS).read_text()
    for question, thinking, answer in parse_chats(chats):
        user = [{"role": "user", "content": question}]
        docs.append(render_chat(user) + f"<think>{thinking}</think>{answer}<|im_end|><|endoftext|>")
        docs.append(render_chat(user, thinking=False) + f"{answer}<|im_end|><|endoftext|>")
    return docs
