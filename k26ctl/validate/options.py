"""SGLang's option table (generated from a real release) and an argv parser that reads flags as it would."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from k26ctl.errors import ConfigError
from k26ctl.validate.findings import Finding

OPTION_TABLE = Path(__file__).resolve().parent.parent / "data" / "sglang_options.json"
SGLANG_ENTRYPOINTS = ("sglang.launch_server", "sglang")
# Profile keys that own a flag: passing the flag through extra_args as well is a conflict.
PROFILE_KEY_FOR_DEST = {
    "model_path": "sglang.model_path",
    "served_model_name": "sglang.served_model_name",
    "host": "sglang.host",
    "port": "sglang.port",
    "tp_size": "sglang.tp_size",
    "attention_backend": "sglang.attention_backend",
    "page_size": "sglang.page_size",
    "speculative_algorithm": "spec.algorithm",
    "speculative_draft_model_path": "spec.draft_model_path",
    "speculative_num_draft_tokens": "spec.block_size",
    "speculative_dflash_block_size": "spec.block_size",
    "speculative_ddtree_budget": "spec.ddtree.budget",
    "api_key": "sglang.api_key_env",
}


@dataclass(frozen=True)
class Option:
    flags: tuple[str, ...]
    dest: str
    takes_value: bool
    nargs: int | str | None
    choices: tuple[str, ...] | None
    deprecated: bool
    replacement: str | None
    hidden: bool
    source: str


@dataclass
class OptionTable:
    sglang_version: str
    options: tuple[Option, ...]
    algorithms: tuple[str, ...]
    pr_algorithms: tuple[str, ...]
    by_flag: dict[str, Option] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.by_flag = {flag: option for option in self.options for flag in option.flags}

    def lookup(self, flag: str) -> Option | None:
        return self.by_flag.get(flag)

    def prefix_matches(self, flag: str) -> list[Option]:
        """Options argparse would accept `flag` for as an abbreviation (SGLang leaves allow_abbrev on)."""
        seen: dict[str, Option] = {}
        for name, option in self.by_flag.items():
            if name.startswith(flag):
                seen[option.dest] = option
        return list(seen.values())

    def did_you_mean(self, flag: str) -> str | None:
        match = difflib.get_close_matches(flag, list(self.by_flag), n=1, cutoff=0.6)
        return match[0] if match else None


@cache
def load_option_table(path: Path = OPTION_TABLE) -> OptionTable:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot read the SGLang option table {path}: {exc}",
            "regenerate it: scripts/gen_sglang_options.py",
        ) from None
    options = tuple(
        Option(
            flags=tuple(o["flags"]),
            dest=o["dest"],
            takes_value=bool(o["takes_value"]),
            nargs=o.get("nargs"),
            choices=tuple(o["choices"]) if o.get("choices") is not None else None,
            deprecated=bool(o.get("deprecated")),
            replacement=o.get("replacement"),
            hidden=bool(o.get("hidden")),
            source=o.get("source", ""),
        )
        for o in raw["options"]
    )
    algos = raw.get("speculative_algorithms", {})
    return OptionTable(
        sglang_version=raw["sglang_version"],
        options=options,
        algorithms=tuple(algos.get("release", [])),
        pr_algorithms=tuple(a for k, v in algos.items() if k != "release" for a in v),
    )


# ---- argv parsed against the table --------------------------------------------------------------


@dataclass
class ParsedArgs:
    """dest -> the values given, in order (flags without a value record "true")."""

    values: dict[str, list[str]] = field(default_factory=dict)
    env_ref_dests: set[str] = field(default_factory=set)

    def get(self, dest: str) -> str | None:
        got = self.values.get(dest)
        return got[-1] if got else None

    def has(self, dest: str) -> bool:
        return dest in self.values

    def integer(self, dest: str) -> int | None:
        value = self.get(dest)
        if value is None:
            return None
        try:
            return int(value)
        except ValueError:
            return None


def parse_flags(
    words: list[str], table: OptionTable, env_ref_positions: Iterable[int] = ()
) -> tuple[ParsedArgs, list[Finding]]:
    """Read SGLang flags from argv (after `python -m entrypoint`) the way its parser would."""
    refs = set(env_ref_positions)
    parsed = ParsedArgs()
    findings: list[Finding] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("--") or word == "--":
            findings.append(
                Finding(
                    "error",
                    "flags/unexpected-argument",
                    f"unexpected argument {word!r}: SGLang takes no positional arguments",
                    "check sglang.extra_args: every value must follow its --flag",
                )
            )
            continue
        flag, has_inline, inline = word.partition("=")
        option = table.lookup(flag)
        if option is None:
            option = _resolve_unknown(flag, table, findings)
            if option is None:
                # Skip what looks like the unknown flag's value so it is not reported again.
                if i < len(words) and not words[i].startswith("--") and not has_inline:
                    i += 1
                continue
        if option.deprecated:
            replacement = option.replacement or "see SGLang's --help"
            extra = " (or set sglang.cuda_graph: disabled)" if option.dest == "disable_cuda_graph" else ""
            findings.append(
                Finding(
                    "warning",
                    "flags/deprecated",
                    f"{flag} is deprecated in SGLang {table.sglang_version}",
                    f"use {replacement}{extra}",
                )
            )
        if not option.takes_value:
            if has_inline:
                findings.append(
                    Finding(
                        "error",
                        "flags/unexpected-value",
                        f"{flag} takes no value (got {word!r})",
                        f"write {flag}",
                    )
                )
            parsed.values.setdefault(option.dest, []).append("true")
            continue
        values: list[str] = []
        if has_inline:
            values = [inline]
        elif option.nargs in ("+", "*") or isinstance(option.nargs, int):
            limit = option.nargs if isinstance(option.nargs, int) else len(words)
            while i < len(words) and not words[i].startswith("--") and len(values) < limit:
                if i in refs:
                    parsed.env_ref_dests.add(option.dest)
                values.append(words[i])
                i += 1
        elif i < len(words) and (not words[i].startswith("--") or words[i] == "--"):
            if i in refs:
                parsed.env_ref_dests.add(option.dest)
            values = [words[i]]
            i += 1
        if not values and option.nargs not in ("*", "?"):
            findings.append(
                Finding("error", "flags/missing-value", f"{flag} needs a value", f"write {flag} VALUE")
            )
            continue
        if option.choices is not None:
            for value in values:
                if value not in option.choices:
                    guess = difflib.get_close_matches(value, list(option.choices), n=1, cutoff=0.5)
                    hint = (
                        f"did you mean {guess[0]!r}?"
                        if guess
                        else f"choices: {', '.join(option.choices[:20])}"
                    )
                    findings.append(
                        Finding(
                            "error", "flags/invalid-choice", f"{flag} {value!r} is not a valid choice", hint
                        )
                    )
        if option.dest in parsed.values:
            findings.append(
                Finding(
                    "error",
                    "flags/duplicate",
                    f"{flag} is given more than once (SGLang keeps only the last value)",
                    _duplicate_hint(option.dest),
                )
            )
        parsed.values.setdefault(option.dest, []).extend(values or [""])
    return parsed, findings


def _duplicate_hint(dest: str) -> str:
    key = PROFILE_KEY_FOR_DEST.get(dest)
    if key:
        return f"remove it from sglang.extra_args and set {key} instead"
    return "remove the extra copy from sglang.extra_args"


def _resolve_unknown(flag: str, table: OptionTable, findings: list[Finding]) -> Option | None:
    matches = table.prefix_matches(flag)
    if len(matches) == 1:
        canonical = matches[0].flags[0]
        findings.append(
            Finding(
                "warning",
                "flags/abbreviated",
                f"{flag} is not an SGLang flag; argparse accepts it only as an abbreviation of {canonical}",
                f"write {canonical}",
            )
        )
        return matches[0]
    guess = table.did_you_mean(flag)
    if len(matches) > 1:
        names = ", ".join(sorted(m.flags[0] for m in matches)[:5])
        findings.append(
            Finding("error", "flags/ambiguous", f"{flag} is ambiguous ({names})", "write the full flag")
        )
    else:
        findings.append(
            Finding(
                "error",
                "flags/unknown",
                f"unknown SGLang flag {flag} (not in SGLang {table.sglang_version} or DDTree PR #29907)",
                f"did you mean {guess}?"
                if guess
                else "see `python -m sglang.launch_server --help` on the host",
            )
        )
    return None
