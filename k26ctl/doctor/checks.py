"""The facts of a host against the conformance inventory: one row per thing k26ctl depends on.

Pure (no I/O): `doctor` runs it on facts it just collected, `doctor --explain` on a bundle's facts.
A row is `match` (the host has what k26ctl expects), `new` (the host differs from what was verified:
k26ctl may still work, the row says what could go wrong), `unreadable` (k26ctl cannot read it, and the
row says what it will not be able to do), `info`, or a rule's level (`error`, `warning`).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from k26ctl.doctor.facts import Facts
from k26ctl.doctor.inventory import Inventory
from k26ctl.validate.crossflag import journal_accept_findings
from k26ctl.validate.releases import version_key

BAD = ("unreadable", "error")
# lines that read like an error without being one of the fatal lines readiness matches
ERROR_LOOKING = re.compile(r"\b(?:ERROR|CRITICAL|FATAL)\b|Traceback \(most recent call last\)|\w+Error: ")
MAX_LISTED = 8


@dataclass(frozen=True)
class Row:
    area: str
    item: str
    status: str  # match | new | unreadable | info | error | warning
    seen: str
    affects: str = ""

    def to_json(self) -> dict[str, str]:
        return asdict(self)


def _listed(items: list[str]) -> str:
    shown = ", ".join(items[:MAX_LISTED])
    return shown + (f" and {len(items) - MAX_LISTED} more" if len(items) > MAX_LISTED else "")


def check(facts: Facts, inventory: Inventory) -> list[Row]:
    return [
        *_gpu_rows(facts, inventory),
        *_sglang_rows(facts, inventory),
        *_patch_rows(facts),
        *_unit_rows(facts),
        *_journal_rows(facts, inventory),
        *_http_rows(facts, inventory),
        *_rule_rows(facts),
    ]


def exit_code(rows: list[Row]) -> int:
    """1 where k26ctl cannot read something it depends on or a rule says the host will fail."""
    return 1 if any(r.status in BAD for r in rows) else 0


def _gpu_rows(facts: Facts, inv: Inventory) -> list[Row]:
    gpu = facts.gpu
    if not gpu.ok:
        return [Row("gpu", "nvidia-smi", "unreadable", gpu.error or "no answer", inv.gpu.affects_unreadable)]
    rows = []
    kinds: dict[tuple[str, str], int] = {}
    for g in gpu.gpus:
        kinds[(g.name, g.compute_cap)] = kinds.get((g.name, g.compute_cap), 0) + 1
    for (name, cap), count in kinds.items():
        seen = f"{count} x {name}, compute capability {cap}"
        known = inv.gpu.known.get(cap)
        rows.append(Row("gpu", "GPU", "match" if known else "new", seen, known or inv.gpu.affects_new))
    drivers = sorted({g.driver for g in gpu.gpus})
    seen = f"driver {', '.join(drivers) or '?'}, CUDA {gpu.cuda_driver or '?'} (driver)" + (
        f", nvcc {gpu.nvcc}" if gpu.nvcc else ", no nvcc under service.cuda_home"
    )
    rows.append(
        Row("gpu", "driver / CUDA", "info", seen, "not in the inventory: SGLang's wheels bring their own")
    )
    return rows


def _sglang_rows(facts: Facts, inv: Inventory) -> list[Row]:
    sg, tree = facts.sglang, facts.tree
    if sg.error or not sg.version:
        why = sg.error or "the tree has no version"
        return [
            Row(
                "sglang",
                "version",
                "unreadable",
                why,
                "the option table (validate), the mask-bug rule, the patch plan",
            )
        ]
    rows: list[Row] = []
    first, last = (version_key(v) for v in inv.sglang.option_tables.split("-"))
    key = version_key(sg.version)
    where = f"{sg.version} at {sg.root} ({sg.python})"
    if sg.version in inv.sglang.verified:
        rows.append(Row("sglang", "version", "match", where, f"verified in {inv.document}"))
    elif key is not None and first is not None and last is not None and first <= key <= last:
        rows.append(Row("sglang", "version", "new", where, inv.sglang.affects_unverified))
    else:
        rows.append(
            Row(
                "sglang",
                "version",
                "new",
                where,
                f"{inv.sglang.affects_no_table}; {inv.sglang.affects_unverified}",
            )
        )
    if tree.error:
        rows.append(Row("sglang", "source tree", "info", tree.error))
    elif not tree.git:
        rows.append(Row("sglang", "source tree", "info", "an installed package (no git tree)"))
    else:
        changed = [line[3:] for line in tree.changed]
        seen = f"git {(tree.revision or '?')[:12]} ({tree.describe or 'no tag'})" + (
            f", {len(changed)} local change(s): {_listed(changed)}" if changed else ", no local changes"
        )
        affects = "patch anchors are judged on this tree as it is; local changes may move or remove them"
        rows.append(Row("sglang", "source tree", "new" if changed else "info", seen, affects))
    return rows


def _patch_rows(facts: Facts) -> list[Row]:
    if facts.patches_error:
        return [
            Row(
                "patches",
                "anchors",
                "unreadable",
                facts.patches_error,
                "`k26ctl patch` cannot plan on this tree",
            )
        ]
    rows = []
    for p in facts.patches:
        if p.state == "refused" and p.name in facts.profile.patches:
            refused = "the profile lists it, and `k26ctl patch` (so deploy) refuses to apply it here"
            rows.append(Row("patches", p.name, "unreadable", p.message, refused))
        elif p.state == "refused":
            rows.append(
                Row(
                    "patches",
                    p.name,
                    "info",
                    f"not for this tree (the profile does not list it): {p.message}",
                )
            )
        else:
            rows.append(Row("patches", p.name, "match", f"{p.state}: {p.message}", "anchors found"))
    return rows


def _unit_rows(facts: Facts) -> list[Row]:
    unit = facts.unit
    state = f"{unit.active}/{unit.sub}, restarts {unit.restarts or '?'}"
    if not unit.exists:
        missing = f"no unit at {unit.path} ({state})"
        return [Row("unit", "unit file", "new", missing, "nothing deployed yet: `k26ctl deploy` creates it")]
    if unit.matches_profile:
        return [Row("unit", "unit file", "match", f"{unit.path}: the profile's unit, {state}")]
    differs = f"{unit.path} differs from the profile, {state}"
    return [Row("unit", "unit file", "new", differs, "`k26ctl deploy --diff` shows how")]


def _journal_rows(facts: Facts, inv: Inventory) -> list[Row]:
    journal = facts.journal
    if journal.error:
        return [
            Row(
                "journal",
                "one load",
                "unreadable",
                journal.error,
                "readiness reads no load phase, ready line or fatal line",
            )
        ]
    dropped = f" ({journal.dropped} in the middle left out)" if journal.dropped else ""
    rows = [Row("journal", "one load", "info", f"{len(journal.lines)} lines since the last start{dropped}")]
    running = facts.unit.active == "active"
    speculative = facts.profile.algorithm not in ("NONE", "")
    for entry in inv.journal:
        pattern = re.compile(entry.pattern)
        count = sum(1 for line in journal.lines if pattern.search(line))
        if count:
            rows.append(Row("journal", entry.id, "match", f"seen {count} time(s)", entry.affects))
        elif entry.expected and running and journal.lines:
            rows.append(Row("journal", entry.id, "unreadable", "not in this load's lines", entry.affects))
        elif entry.id == "decode-line" and speculative and running:
            rows.append(
                Row(
                    "journal",
                    entry.id,
                    "info",
                    "no decode line yet (no traffic since the start?)",
                    entry.affects,
                )
            )
    rows.extend(_error_line_rows(journal.lines))
    return rows


def _error_line_rows(lines: list[str]) -> list[Row]:
    """Fatal lines readiness knows (an error on a running host is worth a look), and error-looking
    lines it does not know: new to the inventory, so a deploy would not stop on them."""
    from k26ctl.deploy.journal_scan import fatal_pattern

    fatal = [(name, line) for line in lines if (name := fatal_pattern(line))]
    unknown = [line for line in lines if ERROR_LOOKING.search(line) and not fatal_pattern(line)]
    rows = []
    if fatal:
        name, line = fatal[-1]
        seen = f"{len(fatal)} fatal line(s), the last ({name}): {line[:300]}"
        rows.append(Row("journal", "fatal lines", "error", seen, "deploy's readiness fails on these"))
    if unknown:
        seen = f"{len(unknown)} line(s), the first: {unknown[0][:300]}"
        affects = "readiness does not stop on them; if the server died, the process exit still shows it"
        rows.append(Row("journal", "error-looking lines", "new", seen, affects))
    return rows


def _http_rows(facts: Facts, inv: Inventory) -> list[Row]:
    http = facts.http
    if not http.reachable:
        why = http.error or "the server does not answer"
        return [Row("http", e.path, "unreadable", why, e.affects) for e in inv.http]
    rows: list[Row] = []
    info_ep, models_ep, metrics_ep = (
        next(e for e in inv.http if e.path == p) for p in ("/server_info", "/v1/models", "/metrics")
    )
    if http.server_info_status == 200:
        alias = " (the deprecated alias)" if http.server_info_path == info_ep.alias else ""
        rows.append(
            Row("http", info_ep.path, "match", f"{http.server_info_path}{alias}: 200", info_ep.affects)
        )
        missing = [k for k in inv.server_info.keys if k not in http.server_info_keys]
        if missing:
            rows.append(
                Row(
                    "http",
                    "server_info keys",
                    "unreadable",
                    f"missing: {_listed(missing)}",
                    inv.server_info.affects,
                )
            )
        else:
            rows.append(
                Row("http", "server_info keys", "match", f"all {len(inv.server_info.keys)} read keys present")
            )
        reported = http.identity.get("version")
        if reported and facts.sglang.version and str(reported) != facts.sglang.version:
            rows.append(
                Row(
                    "http",
                    "server version",
                    "new",
                    f"the server says {reported}, the tree {facts.sglang.version}",
                    "the running server is not the installed tree: restart it",
                )
            )
    else:
        rows.append(
            Row(
                "http",
                info_ep.path,
                "unreadable",
                f"status {http.server_info_status} (also {info_ep.alias})",
                info_ep.affects,
            )
        )
    if http.models_status == 200 and facts.profile.served_name in http.model_ids:
        rows.append(
            Row("http", models_ep.path, "match", f"serves {facts.profile.served_name}", models_ep.affects)
        )
    elif http.models_status == 200:
        rows.append(
            Row(
                "http",
                models_ep.path,
                "new",
                f"serves {_listed(http.model_ids)}, not {facts.profile.served_name}",
                models_ep.affects,
            )
        )
    else:
        rows.append(
            Row("http", models_ep.path, "unreadable", f"status {http.models_status}", models_ep.affects)
        )
    rows.extend(_metrics_rows(facts, inv, metrics_ep.affects))
    return rows


def _metrics_rows(facts: Facts, inv: Inventory, affects: str) -> list[Row]:
    http = facts.http
    if http.metrics_status != 200:
        status = "unreadable" if facts.profile.enable_metrics else "info"
        return [Row("http", "/metrics", status, f"status {http.metrics_status}", affects)]
    names = set(http.metric_names)
    speculative = facts.profile.algorithm not in ("NONE", "")
    wanted = [n for n in inv.metrics.names if speculative or n not in inv.metrics.speculative_only]
    missing = [n for n in wanted if n not in names]
    rows = [
        Row("http", "/metrics", "unreadable" if missing else "match",
            f"missing: {_listed(missing)}" if missing else f"all {len(wanted)} inventory names present",
            inv.metrics.affects)
    ]  # fmt: skip
    new = sorted(n for n in names if n.startswith("sglang:") and n not in inv.metrics.names)
    if new:
        rows.append(
            Row(
                "http",
                "/metrics (new names)",
                "new",
                f"{len(new)}: {_listed(new)}",
                "none: k26ctl does not read them",
            )
        )
    return rows


def _rule_rows(facts: Facts) -> list[Row]:
    rows = [
        Row("rules", f.code, f.level, f.message, f.hint)
        for f in facts.rules
        if f.code.startswith(("crossflag/", "ddtree/", "known-bug/", "attention/"))
    ]
    runtime = journal_accept_findings(
        facts.journal.lines,
        algorithm=facts.profile.algorithm,
        earlier_release_accept=facts.earlier_release_accept,
    )
    rows += [Row("rules", f.code, f.level, f.message, f.hint) for f in runtime]
    return rows


def summary(rows: list[Row]) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    return counts
