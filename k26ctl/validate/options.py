"""SGLang's option table (generated from a real release) and an argv parser that reads flags as it would."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from k26ctl.validate.findings import Finding
from k26ctl.validate.releases import ReleaseCatalog, load_catalog

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
    """The options one SGLang release accepts (or, with no release named, any release does)."""

    sglang_version: str  # a label for messages: "0.5.23", or "0.5.14-0.5.23" when no version is known
    options: tuple[Option, ...]
    algorithms: tuple[str, ...]
    pr_algorithms: tuple[str, ...]
    release: str | None = None
    note: str = ""
    catalog: ReleaseCatalog | None = field(default=None, repr=False)
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


def _option(record: dict[str, Any]) -> Option:
    deprecated = record.get("deprecated")
    nargs = record.get("nargs")
    choices = record.get("choices")
    return Option(
        flags=tuple(record["flags"]),
        dest=str(record["dest"]),
        takes_value=bool(record.get("value")),
        nargs=nargs if isinstance(nargs, (int, str)) else None,
        choices=tuple(str(c) for c in choices) if isinstance(choices, list) else None,
        deprecated=bool(deprecated),
        replacement=deprecated if isinstance(deprecated, str) else None,
        hidden=bool(record.get("hidden")),
        source=str(record.get("source", "")),
    )


@cache
def load_option_table(version: str | None = None) -> OptionTable:
    """The table for the host's SGLang version (sglang.version); every release merged without one."""
    catalog = load_catalog()
    resolved = catalog.resolve(version)
    label = resolved.release or catalog.span
    return OptionTable(
        sglang_version=label,
        options=tuple(_option(r) for r in catalog.records_for(resolved.release)),
        algorithms=tuple(catalog.algorithms_for(resolved.release)),
        pr_algorithms=tuple(catalog.branch_algorithms),
        release=resolved.release,
        note=resolved.note,
        catalog=catalog,
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
            findings.extend(_choice_findings(flag, option, values, table))
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


def _choice_findings(flag: str, option: Option, values: list[str], table: OptionTable) -> Iterator[Finding]:
    assert option.choices is not None
    for value in values:
        if value in option.choices:
            continue
        elsewhere = table.catalog.releases_with_choice(flag, value) if table.catalog else []
        if table.release is not None and elsewhere:
            yield Finding(
                "error",
                "flags/invalid-choice",
                f"{flag} {value!r} is not a choice in SGLang {table.release} (it is in {_span(elsewhere)})",
                f"choices in {table.release}: {', '.join(option.choices[:20])}",
            )
            continue
        guess = difflib.get_close_matches(value, list(option.choices), n=1, cutoff=0.5)
        where = "" if table.release else "any "

        yield Finding(
            "error",
            "flags/invalid-choice",
            f"{flag} {value!r} is not a valid choice in {where}SGLang {table.sglang_version}",
            f"did you mean {guess[0]!r}?" if guess else f"choices: {', '.join(option.choices[:20])}",
        )


def _span(releases: list[str]) -> str:
    return releases[0] if len(releases) == 1 else f"{releases[0]}-{releases[-1]}"


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
    if len(matches) > 1:
        names = ", ".join(sorted(m.flags[0] for m in matches)[:5])
        elsewhere = table.catalog.releases_with_flag(flag) if table.catalog else []
        history = ""
        if table.release is not None and elsewhere:
            history = f"; {_not_in_release(flag, table, elsewhere).message}"
        findings.append(
            Finding(
                "error", "flags/ambiguous", f"{flag} is ambiguous ({names}){history}", "write the full flag"
            )
        )
        return None
    elsewhere = table.catalog.releases_with_flag(flag) if table.catalog else []
    if table.release is not None and elsewhere:
        findings.append(_not_in_release(flag, table, elsewhere))
        return None
    guess = table.did_you_mean(flag)
    findings.append(
        Finding(
            "warning",
            "flags/unknown",
            f"{flag} is not in the option table of SGLang {table.sglang_version} (nor the DDTree branch):"
            " the host's own parser decides (validate --remote; deploy asks it before applying)",
            f"did you mean {guess}?" if guess else "see `python -m sglang.launch_server --help` on the host",
        )
    )
    return None


def _not_in_release(flag: str, table: OptionTable, elsewhere: list[str]) -> Finding:
    """A flag other releases have but the host's does not: say which release removed or added it."""
    assert table.catalog is not None and table.release is not None
    releases = table.catalog.releases
    here = releases.index(table.release)
    older = [r for r in elsewhere if releases.index(r) < here]
    if older:
        removed_in = releases[releases.index(older[-1]) + 1]
        record = table.catalog.last_record(flag) or {}
        replacement = record.get("deprecated")
        hint = f"use {replacement}" if isinstance(replacement, str) else "remove it"
        return Finding(
            "error",
            "flags/removed",
            f"{flag} was removed in SGLang {removed_in} (last in {older[-1]}); the host runs {table.release}",
            hint,
        )
    return Finding(
        "error",
        "flags/not-in-release",
        f"{flag} is new in SGLang {elsewhere[0]}; the host runs {table.release}, which does not have it",
        "remove it, or upgrade the host's SGLang (then set sglang.version)",
    )
