"""The smoke page's content, from a smoke JSON document (also the `smoke` part of a deploy's)."""

from __future__ import annotations

import json
from typing import Any

from k26ctl.report import charts
from k26ctl.report.spans import finding_field, pieces
from k26ctl.report.values import as_dict, dicts
from k26ctl.report.values import num as _num

# Server arguments that decide speculative decoding's behaviour, shown first; the rest are listed below.
KEY_ARG_PREFIXES = (
    "speculative_",
    "attention_backend",
    "enable_deterministic_inference",
    "tp_size",
    "page_size",
    "disable_overlap_schedule",
    "disable_cuda_graph",
    "disable_radix_cache",
)


def server_facts(doc: dict[str, Any]) -> dict[str, Any]:
    server = as_dict(doc.get("server"))
    args = as_dict(server.get("server_args"))
    key = [(k, v) for k, v in args.items() if str(k).startswith(KEY_ARG_PREFIXES)]
    rest = [(k, v) for k, v in args.items() if not str(k).startswith(KEY_ARG_PREFIXES)]
    return {
        "release": server.get("version"),
        "model": server.get("model") or doc.get("model"),
        "deterministic": bool(doc.get("deterministic_server")),
        "key_args": key,
        "other_args": rest,
        "other": [(k, v) for k, v in server.items() if k not in ("version", "model", "server_args")],
    }


def _probe_answers(doc: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    probes = as_dict(doc.get("probes"))
    out = {}
    for answer in probes.get("answers") or []:
        if isinstance(answer, dict):
            out[(str(answer.get("prompt_id")), int(answer.get("attempt") or 0))] = answer
    return out


def _token(text: Any) -> str:
    """A decoded token as a quoted string, so that a space or a newline can be seen."""
    return json.dumps(text, ensure_ascii=False) if isinstance(text, str) else "?"


def _token_strip(answer: dict[str, Any]) -> dict[str, Any]:
    """The probed positions of one answer, each marked same or different, with the decoded tokens."""
    checked = int(_num(answer.get("checked")) or 0)
    listed = {
        int(m["position"]): m
        for m in dicts(answer.get("mismatch_tokens"))
        if _num(m.get("position")) is not None
    }
    wrong = {int(p) for p in answer.get("mismatch_positions") or [] if isinstance(p, int)}
    width = max([checked, *(p + 1 for p in wrong)]) if (checked or wrong) else 0
    decoded = [
        {"position": p, "expected": _token(m.get("expected")), "got": _token(m.get("got"))}
        for p, m in sorted(listed.items())
        if "expected" in m or "got" in m
    ]
    shown = {d["position"] for d in decoded}
    return {
        "checked": checked,
        "mismatches": len(wrong),
        "cells": [{"position": p, "wrong": p in wrong} for p in range(width)],
        "decoded": decoded,
        "undecoded": sorted(wrong - shown),
    }


def _result_view(index: int, result: dict[str, Any], probes: dict[tuple[str, int], dict[str, Any]]) -> dict:
    findings = [f for f in result.get("findings") or [] if isinstance(f, dict)]
    spans: dict[str, list[tuple[int, int, int]]] = {"text": [], "reasoning": []}
    numbered = []
    for number, finding in enumerate(findings, start=1):
        where = finding_field(finding)
        if where is not None:
            start, end = finding["span"]
            spans[where].append((start, end, number))
        numbered.append({**finding, "number": number, "where": where})
    text = str(result.get("text") or "")
    reasoning = str(result.get("reasoning") or "")
    probe = None
    if _num(result.get("temperature")) == 0.0:
        answer = probes.get((str(result.get("prompt_id")), int(result.get("attempt") or 0)))
        probe = _token_strip(answer) if answer else None
    return {
        "anchor": f"r{index}",
        "r": result,
        "findings": numbered,
        "text_pieces": pieces(text, spans["text"]),
        "reasoning_pieces": pieces(reasoning, spans["reasoning"]) if reasoning else [],
        "probe": probe,
    }


def accept_chart(doc: dict[str, Any], name: str) -> Any:
    results = [r for r in doc.get("results") or [] if isinstance(r, dict)]
    measured: list[tuple[str, float]] = []
    for r in results:
        accept = _num(r.get("accept_length"))
        if accept is not None:
            measured.append((str(r.get("name")), accept))
    if not measured:
        return None
    floor = _num(doc.get("min_accept_length"))
    with charts.figure(7.0, 0.9 + 0.24 * len(measured)) as fig:
        ax = fig.subplots()
        names = [n for n, _ in measured][::-1]
        values = [a for _, a in measured][::-1]
        below = [floor is not None and a < floor for a in values]
        colours = [charts.BAD if b else charts.GOOD for b in below]
        rows = range(len(values))  # positions, not names: two requests may share a name
        ax.barh(rows, values, color=colours, hatch=["//" if b else "" for b in below], edgecolor="none")
        ax.set_yticks(rows, names)
        for y, (value, low) in enumerate(zip(values, below, strict=True)):
            ax.text(value, y, f" {value:.2f}" + (" below floor" if low else ""), va="center", fontsize=8)
        if floor is not None:
            ax.axvline(floor, color=charts.BAD, linestyle="--", linewidth=1.2)
            ax.text(floor, len(values) - 0.4, f" floor {floor:g}", color=charts.BAD, fontsize=8, va="bottom")
        ax.set_xlabel("accept length (tokens per verify pass, meta_info)")
        ax.set_xlim(0, max([*values, floor or 0.0]) * 1.3)
        ax.grid(axis="y", visible=False)
        ax.tick_params(axis="y", labelsize=8)
        return charts.svg(fig, name, "Accept length per request against the floor")


def accept_rule_view(doc: dict[str, Any]) -> dict[str, Any] | None:
    """How the run's accept length was judged (the document's `accept_rule`), with the warnings it
    gave: each mark the verdict compares against, and the prior run a collapse is measured from."""
    rule = as_dict(doc.get("accept_rule"))
    if not rule:
        return None
    prior = as_dict(rule.get("prior"))
    marks = [
        ("expected up to", _num(rule.get("longest")), "the longest accept length this configuration allows"),
        ("low below", _num(rule.get("low_below")), "a warning: slower than it could be, not wrong"),
        ("nothing accepted at", _num(rule.get("nothing_accepted_at")), "fails: the drafter accepts nothing"),
        ("floor", _num(rule.get("floor")), "fails: --min-accept-length / smoke.min_accept_length"),
        ("collapse at", _num(prior.get("collapse_at")), "fails: lost half the gain the prior run had"),
    ]
    return {
        "algorithm": rule.get("algorithm"),
        "measured": _num(doc.get("accept_length")),
        "marks": [{"name": n, "value": v, "meaning": m} for n, v, m in marks if v is not None],
        "prior": prior or None,
        "warnings": [str(w) for w in doc.get("warnings") or [] if isinstance(w, str)],
    }


def smoke_view(doc: dict[str, Any], name: str = "smoke") -> dict[str, Any]:
    probes = _probe_answers(doc)
    results = [r for r in doc.get("results") or [] if isinstance(r, dict)]
    return {
        "doc": doc,
        "facts": server_facts(doc),
        "results": [_result_view(i, r, probes) for i, r in enumerate(results)],
        "accept_chart": accept_chart(doc, f"{name}-accept"),
        "probes": (as_dict(doc.get("probes")) or None),
        "suite_findings": [f for f in doc.get("suite_findings") or [] if isinstance(f, dict)],
        "accept_rule": accept_rule_view(doc),
    }
