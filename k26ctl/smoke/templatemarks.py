"""Chat-template debris that the full special-token patterns of `detectors` do not match:

- partial special tokens: names of the control tokens of common chat templates (ChatML, Llama 3,
  Mistral, Gemma, Qwen, Kimi, DeepSeek, Phi) with their brackets cut off or broken
  ("<start_turn", "end_turn", "im_end|>", "eot_id");
- a role tag opening the answer ("assistant\\n...", "<|assistant|>", "ASSISTANT:"): the template's
  header was decoded into the text;
- end-marker loops: bracketed stop words written again and again ("[END] [NO MORE] [STOP] [END]");
- an invented next few-shot turn ("Question: ... Answer: ...") after the answer, when the prompt
  asked one question and shows no such labels.

Each finding names the marker and its span.
"""

from __future__ import annotations

import re

from k26ctl.smoke.finding import Finding


def _excerpt(text: str, start: int, end: int, limit: int = 60) -> str:
    piece = text[start:end]
    return piece if len(piece) <= limit else piece[: limit - 3] + "..."


# Control-token names of the common templates. Each is matched as a word of its own (underscores
# and bars around it belong to the token), never inside a longer identifier.
# fmt: off
_TOKEN_NAMES = (
    "im_start", "im_end", "im_sep", "im_user", "im_assistant", "im_system", "im_middle",
    "eot_id", "start_header_id", "end_header_id", "begin_of_text", "end_of_text", "eom_id",
    "start_of_turn", "end_of_turn", "start_turn", "end_turn", "endoftext", "endofprompt",
    "fim_prefix", "fim_middle", "fim_suffix", "tool_call_begin", "tool_calls_section_begin",
    "begin_of_sentence", "end_of_sentence", "end_of_sentence",
)
# fmt: on
_PARTIAL_TOKEN = re.compile(
    r"(?<![A-Za-z0-9])(?:<\|?|\|)?(?:" + "|".join(sorted(set(_TOKEN_NAMES), key=len, reverse=True)) + r")"
    r"(?:\|?>|\|)?(?![A-Za-z0-9])"
    r"|<(?:start|end)(?=[ _\n\"'>]|$)"  # Gemma's "<start_of_turn>" cut after its first word
)
_NAME_HINT = re.compile(r"im_|_id\b|_of_|_turn|endof|fim_|tool_call|<start|<end")
# Inside code (identifiers, regular expressions, configuration) these names are fine.
_FENCE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.DOTALL)
PARTIAL_TOKENS = 2


def detect_partial_tokens(text: str, prompt: str | None = None) -> list[Finding]:
    """Two or more control-token names of chat templates written as text (their brackets missing or
    broken): the template's tokens are being generated as pieces ("I can end_turn tell_a_ joke")."""
    if not _NAME_HINT.search(text):
        return []  # no piece of any control-token name: the full pattern need not run
    prose = _FENCE.sub(lambda m: " " * len(m.group()), text)
    hits = [m for m in _PARTIAL_TOKEN.finditer(prose) if not _is_whole_token(m.group())]
    if prompt:
        hits = [m for m in hits if m.group().strip("<|>") not in prompt]
    if len(hits) < PARTIAL_TOKENS:
        return []
    start, end = hits[0].start(), hits[-1].end()
    names = ", ".join(dict.fromkeys(m.group() for m in hits[:6]))
    return [
        Finding(
            "partial_special_token",
            float(len(hits)),
            float(PARTIAL_TOKENS),
            (start, end),
            _excerpt(text, start, end),
            f"{len(hits)} pieces of chat-template control tokens in the text ({names})",
        )
    ]


def _is_whole_token(piece: str) -> bool:
    """Whole tokens ("<|im_end|>") are the special-token detector's."""
    return piece.startswith("<|") and piece.endswith("|>")


_ROLE_OPENING = re.compile(
    r"\s*(?:<\|?(?:assistant|im_assistant|model)\|?>"  # <|assistant|>, Kimi's <|im_assistant|>
    r"|(?:assistant|model|ASSISTANT|Assistant)[ \t]*(?::[ \t]*)?\n"  # a role header line
    r"|(?:ASSISTANT|<\|?assistant\|?>)[ \t]*:)"
)


def detect_role_opening(text: str, prompt: str | None = None) -> list[Finding]:
    """The answer opens with the assistant's role tag ("assistant\\n...", "<|assistant|>"): the
    chat template's header reached the text (a skipped special token or a wrong template)."""
    match = _ROLE_OPENING.match(text)
    if match is None or not text[match.end() :].strip():
        return []
    if prompt and match.group().strip() in prompt:
        return []
    return [
        Finding(
            "role_leak",
            1.0,
            1.0,
            (match.start(), match.end()),
            _excerpt(text, 0, match.end() + 20),
            f"the answer starts with the role tag {match.group().strip()!r} (template header in the text)",
        )
    ]


_MARKER = re.compile(
    r"\[(?:END|STOP|DONE|EOS|EOT|FIN|FINISH|FINISHED|NO MORE|END OF (?:TEXT|RESPONSE|ANSWER|OUTPUT)"
    r"|COMPLETE|TERMINATE|EXIT|HALT)\]",
    re.IGNORECASE,
)
END_MARKERS = 3


def detect_end_markers(text: str) -> list[Finding]:
    """Bracketed stop words ("[END]", "[STOP]", "[NO MORE]") three times or more: a model that cannot
    emit its end-of-sequence token writes stand-ins for it instead, again and again."""
    if "[" not in text:
        return []
    hits = list(_MARKER.finditer(text))
    if len(hits) < END_MARKERS:
        return []
    start, end = hits[0].start(), hits[-1].end()
    names = ", ".join(dict.fromkeys(m.group().upper() for m in hits[:5]))
    return [
        Finding(
            "end_marker_loop",
            float(len(hits)),
            float(END_MARKERS),
            (start, end),
            _excerpt(text, start, end),
            f"{len(hits)} bracketed end markers ({names}): the end of sequence is written, not emitted",
        )
    ]


_NEXT_TURN = re.compile(
    r"\n[ \t]*(Question|Q|Input|Instruction|Query)[ \t]*:.*?\n[ \t]*(?:Answer|A|Output|Response)[ \t]*:",
    re.DOTALL,
)


def detect_invented_turn(text: str, prompt: str | None) -> list[Finding]:
    """After answering, the text goes on with a new "Question: ... Answer:" pair that the prompt
    never used: few-shot style run-on past the end of the turn. Needs the prompt (a quiz the user
    asked for looks the same)."""
    if not prompt:
        return []
    match = _NEXT_TURN.search(text)
    if match is None or not text[: match.start()].strip():
        return []
    label = match.group(1)
    if re.search(rf"(?m)^\s*{label}\s*:", prompt) or re.search(r"(?i)quiz|question|q&a|exam|test", prompt):
        return []
    start = match.start() + 1
    return [
        Finding(
            "role_leak",
            1.0,
            1.0,
            (start, len(text)),
            _excerpt(text, start, len(text)),
            f"after the answer the text invents a new '{label}:' turn with its answer (end of turn not "
            "honoured)",
        )
    ]
