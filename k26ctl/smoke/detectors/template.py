"""Family `template`: chat-template and tokenizer debris, and answers that are not answers.

- special_token / role_leak: special tokens that should never reach the text, a role name glued to the
  answer, an invented next conversation turn;
- partial_special_token: control-token names with their brackets cut off ("<start_turn", "im_end|>");
- role_opening: a role tag opening the answer ("assistant\\n...", "<|assistant|>");
- end_marker_loop: bracketed stop words written again and again ("[END] [NO MORE] [STOP] [END]");
- invented_turn: an invented next few-shot turn ("Question: ... Answer: ...") after the answer;
- tokenizer_leak / mojibake: BPE markers and byte tokens (Ġ, Ċ, ▁, <0x0A>), wrongly decoded bytes;
- prompt_echo: the answer is the prompt.

A new detector belongs here when its evidence is a token, a template's markup or the prompt.
"""

from __future__ import annotations

import re

from k26ctl.smoke.finding import Finding, excerpt

_SPECIAL_TOKEN = re.compile(
    r"<\|[A-Za-z0-9_.:\- ]{1,40}\|>"  # <|im_start|>, <|endoftext|>, <|eot_id|>, Kimi's <|im_user|> ...
    "|<\uff5c[^\uff5c>]{1,40}\uff5c>"  # DeepSeek's full-width bars
    r"|</?s>|<unk>|<pad>|<mask>|<bos>|<eos>|<eod>|<sep>|<cls>"
    r"|<extra_id_\d+>|<end_of_turn>|<start_of_turn>|<\|?reserved_special_token_\d+\|?>"
    r"|\[(?:PAD|UNK|CLS|SEP|MASK|BOS|EOS)\]|\[/?INST\]|<</?SYS>>"
    r"|\[control_\d+\]|<unused\d+>|<\|?reserved_\d+\|?>"  # Mistral v3 and Gemma placeholders
)
# A raw gpt-oss ("harmony") generation is written in its own markup: a text that starts with a channel
# header carries these tokens as format, not as a leak.
_HARMONY_HEADER = re.compile(r"\s*<\|channel\|>\w+(?: to=\S+)?(?:<\|constrain\|>\S+)?<\|message\|>")
_HARMONY_FORMAT = frozenset(
    ("<|channel|>", "<|message|>", "<|end|>", "<|start|>", "<|constrain|>", "<|return|>")
)
# A chat template's role name glued to the answer's last word or sentence ("... people. Iassistant"), or
# alone on its line after the answer: the end-of-turn token was not honoured. (A text that starts with a
# role line is a transcript of the whole template, decoded on purpose.)
_GLUED_ROLE = re.compile(
    r"(?:(?<=[^\W\d_])assistant|(?<=[.!?\u3002\uff01\uff1f])\s?(?:assistant|user|model))(?=[ \t]*(?:\n|$))"
    r"|(?<=\n)(?:assistant|user|model)(?=[ \t]*\n)"
)
_TRANSCRIPT = re.compile(r"\s*(?:system|user)[ \t]*\n")
_ROLE_TURN = re.compile(r"(?:^|\n|</\w+>)\s*(Human|### Instruction|### Human|<\|user\|>|USER):", re.MULTILINE)
# _GLUED_ROLE and _ROLE_TURN start with look-arounds or alternations, which the regex engine tries at
# every position of a multi-megabyte answer; these literal-led patterns find where they can match.
_ROLE_WORD_AT_LINE_END = re.compile(r"(?:assistant|user|model)[ \t]*(?:\n|$)")
_TURN_LABEL = re.compile(r"(?:Human|### Instruction|### Human|<\|user\|>|USER):")


def detect_special_tokens(text: str, prompt: str | None = None) -> list[Finding]:
    """Special tokens that should never reach the text, and an invented next conversation turn."""
    findings: list[Finding] = []
    in_prompt = set(_SPECIAL_TOKEN.findall(prompt)) if prompt else set()
    if _HARMONY_HEADER.match(text):
        in_prompt |= _HARMONY_FORMAT
    matches = [m for m in _SPECIAL_TOKEN.finditer(text) if m.group() not in in_prompt]
    if matches:
        kinds = sorted({m.group() for m in matches})
        start, end = matches[0].start(), matches[-1].end()
        findings.append(
            Finding(
                "special_token",
                float(len(matches)),
                1.0,
                (start, end),
                excerpt(text, start, end),
                f"{len(matches)} leaked special token(s): {', '.join(kinds[:5])}",
            )
        )
    close = text.find("</think>")
    if close >= 0 and "<think>" not in text[:close] and not (prompt and "</think>" in prompt):
        findings.append(
            Finding(
                "special_token",
                1.0,
                1.0,
                (close, close + 8),
                excerpt(text, close, close + 8),
                "a stray </think> inside the answer (thinking leaked or the reasoning split failed)",
            )
        )
    glued = _GLUED_ROLE.search(text) if _ROLE_WORD_AT_LINE_END.search(text) else None
    transcript = _TRANSCRIPT.match(text) is not None
    echoed = prompt is not None and glued is not None and glued.group().strip() in prompt
    if glued and text[: glued.start()].strip() and not transcript and not echoed:
        findings.append(
            Finding(
                "role_leak",
                1.0,
                1.0,
                (glued.start(), len(text)),
                excerpt(text, max(0, glued.start() - 20), len(text)),
                f"the chat template's role name '{glued.group().strip()}' follows the answer (end of turn "
                "not honoured)",
            )
        )
    turn = _ROLE_TURN.search(text) if _TURN_LABEL.search(text) else None
    if (
        turn
        and turn.start() > 0
        and text[: turn.start()].strip()
        and not (prompt and turn.group(1) in prompt)
    ):
        findings.append(
            Finding(
                "role_leak",
                1.0,
                1.0,
                (turn.start(), len(text)),
                excerpt(text, turn.start(), len(text)),
                f"the answer goes on with an invented '{turn.group(1)}:' turn (end of turn not honoured)",
            )
        )
    return findings


def _normalise(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip().lower()


def _whole_echo(text: str, why: str) -> Finding:
    return Finding("prompt_echo", 1.0, 1.0, (0, len(text)), excerpt(text, 0, len(text)), why)


def detect_prompt_echo(text: str, prompt: str | None) -> list[Finding]:
    """The answer is the prompt (or mostly the prompt): a template or position bug."""
    if not prompt:
        return []
    answer = _normalise(text)
    question = _normalise(prompt)
    if not answer:
        return []
    # A question said back is no answer, however short; a short statement said back may be one
    # ("Hello" to "Hello").
    if answer == question and question.endswith("?") and " " in question:
        return [_whole_echo(text, "the output is the prompt's question, said back")]
    if len(question) < 12:
        return []
    if answer == question or (
        answer.startswith(question) and len(answer) - len(question) < 0.2 * len(question)
    ):
        return [_whole_echo(text, "the output repeats the prompt and adds almost nothing")]
    # said back, then said back again: an echoed-prompt loop (a reasoning trace may quote the prompt
    # inside its thoughts, but does not open with it)
    said = answer.count(question) if answer.startswith(question) else 0
    if said >= 2:
        return [
            Finding(
                "prompt_echo",
                float(said),
                2.0,
                (0, len(text)),
                excerpt(text, 0, len(text)),
                f"the output says the prompt back {said} times (an echoed-prompt loop)",
            )
        ]
    if answer.startswith(question):
        return [
            Finding(
                "prompt_echo",
                0.5,
                1.0,
                (0, len(prompt)),
                excerpt(text, 0, len(prompt)),
                "the output starts by repeating the prompt",
                severity="warn",
            )
        ]
    return []


# ---- tokenizer leaks -----------------------------------------------------------------------------

# GPT-2 style byte-level BPE shows a space as Ġ (U+0120) and a newline as Ċ (U+010A); SentencePiece
# shows a space as ▁ (U+2581). Glued to letters or digits they are a detokenizer that was skipped.
_BPE_MARKER = re.compile(r"[\u0120\u010a\u2581](?=[^\W_])|(?<=[^\W_])[\u0120\u010a\u2581]")
_BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>")
_OTHER_BLOCKS = re.compile("[\u2580\u2582-\u259f]")
BPE_MARKERS = 2
# Only text with Latin-1 or Latin Extended letters can be UTF-8 decoded as Latin-1/cp1252.
_MOJIBAKE_CANDIDATE = re.compile("[\u0080-\u024f]")


def detect_tokenizer_leak(text: str) -> list[Finding]:
    """BPE space/newline markers glued to words, byte tokens such as <0x0A>, and mojibake (UTF-8 bytes
    shown as Latin-1 or as the byte-level BPE alphabet, ftfy's `badness` > 0 with `is_bad`)."""
    findings: list[Finding] = []
    # The look-around pattern is slow over a long text: run it only where a marker character occurs.
    has_marker = "\u0120" in text or "\u010a" in text or "\u2581" in text
    markers = list(_BPE_MARKER.finditer(text)) if has_marker else []
    byte_tokens = list(_BYTE_TOKEN.finditer(text)) if "<0x" in text else []
    # SentencePiece's marker glued to a word, in a text without the other block elements that draw a
    # bar chart ("▁▂▃▅"), is a leak by itself.
    spaced = any(m.group() == "\u2581" for m in markers) and not _OTHER_BLOCKS.search(text)
    if len(markers) >= BPE_MARKERS or byte_tokens or spaced:
        hits = sorted(markers + byte_tokens, key=lambda m: m.start())
        start, end = hits[0].start(), hits[-1].end()
        kinds = sorted({m.group() for m in hits})[:4]
        findings.append(
            Finding(
                "tokenizer_leak",
                float(len(hits)),
                float(BPE_MARKERS if not byte_tokens else 1),
                (start, end),
                excerpt(text, start, end),
                f"{len(hits)} tokenizer marker(s) or byte token(s) in the text ({', '.join(kinds)})",
            )
        )
    if _MOJIBAKE_CANDIDATE.search(text):
        from ftfy import badness

        score = badness.badness(text)
        if score >= 1 and badness.is_bad(text):
            findings.append(
                Finding(
                    "mojibake",
                    float(score),
                    1.0,
                    (0, len(text)),
                    excerpt(text, 0, len(text)),
                    f"{score} sequence(s) of UTF-8 bytes shown as single characters (mojibake)",
                )
            )
    return findings


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


def detect_partial_tokens(text: str, prompt: str | None = None, *, min_tokens: int) -> list[Finding]:
    """Two or more control-token names of chat templates written as text (their brackets missing or
    broken): the template's tokens are being generated as pieces ("I can end_turn tell_a_ joke")."""
    if not _NAME_HINT.search(text):
        return []  # no piece of any control-token name: the full pattern need not run
    prose = _FENCE.sub(lambda m: " " * len(m.group()), text)
    hits = [m for m in _PARTIAL_TOKEN.finditer(prose) if not _is_whole_token(m.group())]
    if prompt:
        hits = [m for m in hits if m.group().strip("<|>") not in prompt]
    if len(hits) < min_tokens:
        return []
    start, end = hits[0].start(), hits[-1].end()
    names = ", ".join(dict.fromkeys(m.group() for m in hits[:6]))
    return [
        Finding(
            "partial_special_token",
            float(len(hits)),
            float(min_tokens),
            (start, end),
            excerpt(text, start, end),
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
            excerpt(text, 0, match.end() + 20),
            f"the answer starts with the role tag {match.group().strip()!r} (template header in the text)",
        )
    ]


_MARKER = re.compile(
    r"\[(?:END|STOP|DONE|EOS|EOT|FIN|FINISH|FINISHED|NO MORE|END OF (?:TEXT|RESPONSE|ANSWER|OUTPUT)"
    r"|COMPLETE|TERMINATE|EXIT|HALT)\]",
    re.IGNORECASE,
)


def detect_end_markers(text: str, *, min_markers: int) -> list[Finding]:
    """Bracketed stop words ("[END]", "[STOP]", "[NO MORE]") three times or more: a model that cannot
    emit its end-of-sequence token writes stand-ins for it instead, again and again."""
    if "[" not in text:
        return []
    hits = list(_MARKER.finditer(text))
    if len(hits) < min_markers:
        return []
    start, end = hits[0].start(), hits[-1].end()
    names = ", ".join(dict.fromkeys(m.group().upper() for m in hits[:5]))
    return [
        Finding(
            "end_marker_loop",
            float(len(hits)),
            float(min_markers),
            (start, end),
            excerpt(text, start, end),
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
            excerpt(text, start, len(text)),
            f"after the answer the text invents a new '{label}:' turn with its answer (end of turn not "
            "honoured)",
        )
    ]


# An instruction template's turn header on a line of its own ("### Instruction:", "### Response:",
# "### Human:"): the markup of a prompt format, which a chat answer never writes to its reader.
_TEMPLATE_HEADER = re.compile(
    r"(?im)^[ \t]*#{2,4}[ \t]*(instruction|question|input|human|user|prompt|response|answer|assistant|output)"
    r"[ \t]*:[ \t]*$"
)
_ASKING = frozenset(("instruction", "question", "input", "human", "user", "prompt"))


def detect_template_turns(text: str, prompt: str | None = None, *, min_headers: int) -> list[Finding]:
    """After some answer, the text writes instruction-template turn headers of both sides ("###
    Question:" then "### Response:"): it runs on past the end of its turn into invented turns. Headers
    the prompt itself uses, or ones inside a code block, are the user's format, not a run-on."""
    if "#" not in text:
        return []
    shown = _FENCE.sub(lambda m: " " * len(m.group()), text) if "`" in text else text
    headers = list(_TEMPLATE_HEADER.finditer(shown))
    if len(headers) < min_headers or not shown[: headers[0].start()].strip():
        return []
    labels = [m.group(1).lower() for m in headers]
    if not any(label in _ASKING for label in labels) or all(label in _ASKING for label in labels):
        return []  # both sides of a turn: one asking, one answering
    if prompt and _TEMPLATE_HEADER.search(prompt):
        return []
    start = headers[0].start()
    return [
        Finding(
            "template_turns",
            float(len(headers)),
            float(min_headers),
            (start, len(text)),
            excerpt(text, start, len(text)),
            f"{len(headers)} instruction-template turn headers after the answer "
            f"({', '.join(dict.fromkeys(m.group().strip() for m in headers[:4]))}): it runs on past its turn",
        )
    ]


# The opening of a markup tag or special token at the very end, right after the last sentence: " The
# girl is eating a hamburger.<", "...done.</", "...ok!<|": the first piece of a stop marker printed
# before generation stopped.
_DANGLING_OPENER = re.compile(r"[.!?\u3002\uff01\uff1f][ \t]?(<[|/]?[A-Za-z_|]{0,12})\s*$")


def detect_dangling_marker(text: str) -> list[Finding]:
    """The text ends on an opened '<' (and at most a few letters of a tag name) right after its last
    sentence: a stop marker that leaked its first token."""
    base = max(0, len(text) - 40)
    match = _DANGLING_OPENER.search(text, base)
    if match is None:
        return []
    start = match.start(1)
    return [
        Finding(
            "dangling_marker",
            1.0,
            1.0,
            (start, len(text)),
            excerpt(text, max(0, start - 30), len(text)),
            f"the text ends on {match.group(1)!r} after its last sentence (a stop marker's first piece)",
        )
    ]
