"""Greedy self-consistency probes against the real lab server (python -m k26ctl.lab.serve).

Every broken lab variant is caught; the subtle one is caught while the text detectors pass it; an
unflushed probe is fooled by the prefix cache; a refused flush is reported, never passed over.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest

pytest.importorskip("torch", reason="the lab server needs torch")

from k26ctl.smoke import SmokeOptions, SmokeTarget, load_suite, run_smoke
from k26ctl.smoke.client import SGLangClient
from k26ctl.smoke.detectors import score_text
from k26ctl.smoke.probes import ProbeAnswer, ProbeReport, run_probes
from k26ctl.smoke.runner import _probe_findings
from tests.support.lab_server import lab_server

pytestmark = pytest.mark.lab

# Findings that do not come from reading the text: speculative statistics, determinism, probes,
# and the prompts' own expectations.
NOT_TEXT = ("accept_", "measured_", "nondeterministic", "self_consistency", "probes_", "expect.")


def answers_one_at_a_time(url: str) -> tuple[list[ProbeAnswer], SGLangClient]:
    """The lab suite's temperature-0 answers, one request in flight at a time (concurrency 1)."""
    client = SGLangClient(url, timeout=60)
    answers = []
    for prompt in load_suite("lab").prompts:
        if prompt.api == "generate":
            tc = client.generate_tokens(text=prompt.prompt, temperature=0.0, max_new_tokens=prompt.max_tokens)
        else:
            ids = client.tokenize_chat(prompt.chat_messages(), prompt.chat_template_kwargs)
            tc = client.generate_tokens(input_ids=ids, temperature=0.0, max_new_tokens=prompt.max_tokens)
        answers.append(ProbeAnswer(prompt.id, tc.prompt_ids, tc.output_ids))
    return answers, client


def text_detector_failures(report: Any) -> list[str]:
    return [
        f"{r.name}: {f.detector}"
        for r in report.results
        for f in r.failures
        if not f.detector.startswith(NOT_TEXT)
    ]


VARIANTS = {
    "budget-8": ("ddtree-b16", ["spec.ddtree.budget=8"], {}),
    "budget-12": ("ddtree-b16", ["spec.ddtree.budget=12"], {}),
    "budget-16-nan": ("ddtree-b16", [], {"K26LAB_UNVISITED": "nan"}),
    "budget-16-stale": ("ddtree-b16", [], {"K26LAB_UNVISITED": "stale"}),
    "mask-only": ("ddtree-b16", [], {"K26LAB_BUG_SCOPE": "mask-only", "K26LAB_UNVISITED": "stale"}),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_probes_catch_broken_variant_at_concurrency_1_and_2(variant: str) -> None:
    profile, overrides, env = VARIANTS[variant]
    with lab_server(profile, env=env, overrides=overrides) as server:
        answers, client = answers_one_at_a_time(server.url)
        with client:
            alone = run_probes(client, answers, concurrency=1)
        suite = run_smoke(SmokeTarget(server.url), load_suite("lab"), options=SmokeOptions(concurrency=2))
    assert suite.probes is not None and suite.probes.flushed
    assert suite.probes.verdict == "fail", suite.probes.to_json()
    assert any(f.detector == "self_consistency" for r in suite.results for f in r.findings)
    assert not suite.passed
    if variant == "mask-only":
        # one request at a time is correct in this variant: nothing to see, and nothing is seen
        assert alone.verdict == "pass", alone.to_json()
    else:
        assert alone.flushed and alone.verdict == "fail", alone.to_json()


def test_subtle_variant_fools_every_text_detector_but_not_the_probes() -> None:
    """Two greedy requests in one batch (one /generate with two inputs, so the pairing is fixed): the
    second request's text passes every text detector, and the probes over all its tokens fail it."""
    prompts = {p.id: p for p in load_suite("lab").prompts}
    pair = [prompts["long-lighthouse"], prompts["long-bees"]]
    with lab_server("ddtree-b7-subtle") as server, SGLangClient(server.url) as client:
        ids = [
            httpx.post(server.url + "/v1/tokenize", json={"prompt": p.prompt}).json()["tokens"] for p in pair
        ]
        body = {"input_ids": ids, "sampling_params": {"temperature": 0, "max_new_tokens": 300}}
        out = httpx.post(server.url + "/generate", json=body, timeout=120, trust_env=False).json()
        answers = [ProbeAnswer(p.id, i, o["output_ids"]) for p, i, o in zip(pair, ids, out, strict=True)]
        probes = run_probes(client, answers, concurrency=2, n_positions=300)
    for prompt, answer in zip(pair, out, strict=True):
        verdict = score_text(answer["text"], prompt=prompt.prompt, kind=prompt.kind, finish_reason="length")
        assert not verdict.degenerate, (prompt.id, verdict.reasons)  # every text detector passes both
    first, second = probes.answers
    assert first.mismatches == []  # the first request of the batch is right
    assert probes.rule.answer_fails(len(second.mismatches)), second  # the second is not
    assert probes.verdict == "fail" and probes.flushed


def test_subtle_variant_fails_the_suite_through_the_probes() -> None:
    with lab_server("ddtree-b7-subtle") as server:
        report = run_smoke(SmokeTarget(server.url), load_suite("lab"), options=SmokeOptions(concurrency=2))
    assert report.probes is not None and report.probes.flushed
    assert report.probes.verdict == "fail", report.probes.to_json()
    assert any(f.detector == "self_consistency" for r in report.results for f in r.findings)
    assert not report.passed
    # how much the text detectors saw in this run (timing decides which requests share a batch)
    print("text detector failures:", text_detector_failures(report))


def test_unflushed_probe_is_fooled_by_the_prefix_cache() -> None:
    """The answers' own KV stays in the prefix cache; probes served from it agree with the garbage.
    (Width cap 6: the NaN rows the unpatched verify leaves poison the KV it writes, '!!!!' follows.)"""
    with lab_server(
        "ddtree-b16", overrides=["spec.ddtree.max_topk=6"], env={"K26LAB_UNVISITED": "nan"}
    ) as server:
        answers, client = answers_one_at_a_time(server.url)
        with client:
            unflushed = run_probes(client, answers, concurrency=2, flush=False)
            flushed = run_probes(client, answers, concurrency=2)
    assert not unflushed.flushed and flushed.flushed
    key = lambda m: (m.prompt_id, m.position)  # noqa: E731
    fooled = {key(m) for m in flushed.mismatches} - {key(m) for m in unflushed.mismatches}
    # most corrupted tokens look right to a probe that reads the answers' own cached KV
    assert len(fooled) * 2 >= len(flushed.mismatches) > 20, (len(fooled), len(flushed.mismatches))
    assert unflushed.to_json()["flushed"] is False and "not flushed" in (unflushed.note or "")
    assert flushed.verdict == "fail"


def test_refused_flush_is_reported_and_weakens_the_verdict() -> None:
    with lab_server("ddtree-b7") as server:
        answers, client = answers_one_at_a_time(server.url)
        busy = threading.Thread(
            target=httpx.post,
            args=(server.url + "/generate",),
            kwargs={
                "json": {
                    "text": "Bees live",
                    "sampling_params": {"max_new_tokens": 1500, "ignore_eos": True},
                },
                "timeout": 120,
                "trust_env": False,
            },
        )
        with client:
            busy.start()
            for _ in range(500):  # until the long request is running
                info = client.server_info() or {}
                if info.get("internal_states", [{}])[0].get("num_running_reqs"):
                    break
                time.sleep(0.01)
            probes = run_probes(client, answers[:2], concurrency=2, flush_timeout=0)
        busy.join()
    assert probes.flushed is False
    assert "refused to flush" in (probes.note or "")
    assert probes.verdict == "weak-pass"
    data = probes.to_json()
    assert data["flushed"] is False and data["verdict"] == "weak-pass"
    findings = _probe_findings(probes, [])
    assert [(f.detector, f.severity) for f in findings] == [("probes_unflushed", "warn")]
    assert "weaker" in findings[0].message


def test_report_json_has_the_probes_object() -> None:
    with lab_server("ddtree-b7") as server:
        report = run_smoke(SmokeTarget(server.url), load_suite("lab"), options=SmokeOptions(concurrency=2))
    data = report.to_json()["probes"]
    assert set(data) >= {"checked", "mismatches", "flushed", "first_mismatch"}
    assert data["checked"] >= 14 * 24 and data["flushed"] is True
    assert report.passed, report.summary()
    off = ProbeReport(supported=False, flushed=False, note="x")
    assert off.verdict == "skipped"
