"""The watcher's pieces without a server: state machine, canary suite, load parsing, verdicts, metrics,
state files, the CLI's refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from prometheus_client import generate_latest

from k26ctl.smoke.baseline import BaselineComparison, PromptParity
from k26ctl.smoke.detectors import Finding
from k26ctl.smoke.probes import AnswerProbes, Mismatch, ProbeReport
from k26ctl.smoke.report import RequestResult, SmokeReport
from k26ctl.smoke.suite import load_suite
from k26ctl.watch.canary import CycleResult, canary_slice, canary_suite, cycle_period, slice_count
from k26ctl.watch.load import Load, flush_refusal, parse_load
from k26ctl.watch.machine import UNKNOWN, StateMachine
from k26ctl.watch.metrics import Identity, WatchMetrics
from k26ctl.watch.rules import alert_rules
from k26ctl.watch.store import WatchStore, target_key
from k26ctl.watch.verdict import DEGRADED, FAILING, HEALTHY, UNREACHABLE, JudgeRules, judge
from tests.support.cli import run_k26ctl as _k26

ROOT = Path(__file__).resolve().parents[2]


# ---- state machine -------------------------------------------------------------------------------


def test_a_first_healthy_verdict_is_taken_at_once_and_a_bad_one_needs_its_recheck() -> None:
    machine = StateMachine()
    assert machine.state == UNKNOWN and not machine.needs_recheck(HEALTHY)
    assert machine.settle(HEALTHY).changed and machine.state == HEALTHY
    assert machine.needs_recheck(FAILING)
    with pytest.raises(ValueError):
        machine.settle(FAILING)


def test_one_bad_cycle_that_the_recheck_does_not_confirm_changes_nothing() -> None:
    machine = StateMachine(HEALTHY)
    transition = machine.settle(FAILING, HEALTHY)
    assert not transition.changed and machine.state == HEALTHY and machine.unconfirmed == 1
    assert machine.changes == []


def test_a_confirmed_change_takes_the_rechecks_verdict_both_ways() -> None:
    machine = StateMachine(HEALTHY)
    assert machine.settle(FAILING, FAILING).changed and machine.state == FAILING
    assert not machine.needs_recheck(FAILING)
    assert machine.settle(FAILING).changed is False
    # back to health needs its re-check too; two disagreeing bad verdicts end at the latest
    assert not machine.settle(HEALTHY, FAILING).changed
    assert machine.settle(HEALTHY, HEALTHY).changed and machine.state == HEALTHY
    assert machine.settle(FAILING, DEGRADED).changed and machine.state == DEGRADED
    assert [(t.before, t.after) for t in machine.changes] == [
        (HEALTHY, FAILING),
        (FAILING, HEALTHY),
        (HEALTHY, DEGRADED),
    ]


# ---- canary suite --------------------------------------------------------------------------------


def test_the_canary_pool_holds_every_greedy_prompt_capped_without_repeats() -> None:
    suite = canary_suite(load_suite("lab"), prompts=3, max_tokens=40)
    assert sorted(p.id for p in suite.prompts) == sorted(p.id for p in load_suite("lab").prompts)
    assert all(p.max_tokens <= 40 and p.temperatures == [0.0] and p.expect == [] for p in suite.prompts)
    assert suite.determinism is False and suite.expectations is False and suite.name == "lab-canary"
    again = canary_suite(load_suite("lab"), prompts=3, max_tokens=40)
    assert [p.id for p in again.prompts] == [p.id for p in suite.prompts]  # seeded: the same order


def test_slices_cover_the_pool_at_a_fixed_size_and_repeat() -> None:
    pool = canary_suite(load_suite("lab"), prompts=3)
    count = slice_count(pool, 3)
    assert count == 3  # 7 greedy prompts in slices of 3
    slices = [[p.id for p in canary_slice(pool, 3, i).prompts] for i in range(count)]
    assert all(len(ids) == 3 for ids in slices)
    assert {pid for ids in slices for pid in ids} == {p.id for p in pool.prompts}
    # the next pass asks the same slices in a rotated order: every prompt meets every batch place
    again = [p.id for p in canary_slice(pool, 3, count + 1).prompts]
    assert sorted(again) == sorted(slices[1]) and again == slices[1][1:] + slices[1][:1]
    assert cycle_period(pool, 3) == 9
    places = {
        (p.id, i)
        for step in range(cycle_period(pool, 3))
        for i, p in enumerate(canary_slice(pool, 3, step).prompts)
    }
    assert {(pid, i) for pid in slices[0] for i in range(3)} <= places


def test_the_slice_cursor_survives_runs_and_each_slice_has_its_baseline(tmp_path: Path) -> None:
    store = WatchStore(tmp_path)
    assert store.next_slice(3) == 0
    store.advance_slice(0, 3)
    assert WatchStore(tmp_path).next_slice(3) == 1
    store.advance_slice(2, 3)
    assert store.next_slice(3) == 0
    assert store.slice_baseline(0, 1) == store.baseline
    assert store.slice_baseline(1, 3) != store.slice_baseline(2, 3)
    store.slice_baseline(1, 3).write_text("{}")
    assert store.forget_baseline() and not store.slice_baseline(1, 3).exists()


def test_a_suite_without_two_greedy_prompts_is_refused() -> None:
    from k26ctl.errors import ConfigError

    base = load_suite("lab")
    sampled = base.model_copy(update={"temperatures": [0.7], "prompts": base.prompts[:1]})
    with pytest.raises(ConfigError, match="needs 2"):
        canary_suite(sampled)


# ---- load ----------------------------------------------------------------------------------------

_METRICS = """# HELP sglang:num_running_reqs Running requests
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="a"} 2.0
sglang:num_running_reqs{model_name="b"} 1.0
# HELP sglang:num_queue_reqs Queued requests
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="a"} 4.0
"""


def test_load_sums_the_servers_label_sets_and_refuses_a_flush_while_busy() -> None:
    load = parse_load(_METRICS)
    assert load == Load(queued=4.0, running=3.0) and not load.idle
    assert flush_refusal(load) == "the server is serving others (3 running, 4 queued)"
    assert flush_refusal(Load(0.0, 0.0)) is None
    assert flush_refusal(None) is None  # no /metrics: SGLang's own flush refuses a busy server
    assert parse_load("# nothing here\n") is None
    # every TP rank repeating its scheduler's figures (--enable-metrics-for-all-schedulers) counts once
    ranks = "".join(
        f'sglang:num_queue_reqs{{model_name="a",tp_rank="{r}",dp_rank="0"}} 2.0\n' for r in range(8)
    )
    ranks += 'sglang:num_queue_reqs{model_name="a",tp_rank="0",dp_rank="1"} 1.0\n'
    assert parse_load(ranks) == Load(queued=3.0, running=0.0)
    assert parse_load("garbage{{{ 1\n") is None


# ---- verdicts ------------------------------------------------------------------------------------


def _result(name: str, text: str = "fine words", **fields: object) -> RequestResult:
    result = RequestResult(name, "prose", "chat", 0.0, 0)
    result.text, result.completion_tokens, result.elapsed = text, 20, 0.5
    for key, value in fields.items():
        setattr(result, key, value)
    return result


def _cycle(results: list[RequestResult], **fields: object) -> CycleResult:
    report = SmokeReport("http://x", "m", "lab-canary", 2, results)
    for key, value in fields.items():
        setattr(report, key, value)
    return CycleResult(0.0, 1.0, report=report)


def _probes(mismatches: int) -> ProbeReport:
    wrong = [Mismatch("a", 0, k, 1, 2, "x", "y") for k in range(mismatches)]
    return ProbeReport(True, True, [AnswerProbes("a", 0, 32, wrong), AnswerProbes("b", 0, 32)])


def test_clean_answers_are_healthy_and_unreachable_is_its_own_state() -> None:
    verdict = judge(_cycle([_result("a"), _result("b")], probes=_probes(1)))
    assert verdict.state == HEALTHY, verdict.reasons
    assert verdict.evidence["probes"] == {"checked": 64, "mismatches": 1, "flushed": True}
    assert judge(CycleResult(0.0, 0.0, unreachable="refused")).state == UNREACHABLE


def test_probe_failures_fail_with_the_first_mismatch_decoded_as_evidence() -> None:
    verdict = judge(_cycle([_result("a"), _result("b")], probes=_probes(5)))
    assert verdict.state == FAILING
    assert verdict.evidence["first_mismatch"] == {
        "prompt_id": "a",
        "position": 0,
        "expected": "x",
        "got": "y",
    }


def test_a_detector_failure_fails_and_is_counted_per_detector() -> None:
    bad = _result("a", "!!!!")
    bad.findings = [Finding("bang_run", 40, 8, (0, 4), "!!!!", "40 x '!' in a row")]
    verdict = judge(_cycle([bad, _result("b")]))
    assert verdict.state == FAILING and verdict.detector_failures == {"bang_run": 1}
    assert verdict.evidence["first_failure"]["detector"] == "bang_run"


def test_errors_on_some_requests_degrade_and_on_all_fail() -> None:
    assert judge(_cycle([_result("a", error="HTTP 500"), _result("b")])).state == DEGRADED
    assert judge(_cycle([_result("a", error="HTTP 500"), _result("b", error="HTTP 500")])).state == FAILING


def test_an_accept_floor_degrades_while_a_collapse_fails() -> None:
    floor = Finding("measured_accept_floor", 2.0, 3.0, (0, 0), "", "accept length 2.00 below the floor 3.00")
    collapse = Finding("measured_accept_collapse", 1.1, 1.5, (0, 0), "", "collapse")
    assert judge(_cycle([_result("a"), _result("b")], suite_findings=[floor])).state == DEGRADED
    assert judge(_cycle([_result("a"), _result("b")], suite_findings=[collapse])).state == FAILING


def _parity(matches: list[bool]) -> BaselineComparison:
    prompts = [PromptParity(f"p{i}", m, None if m else 3) for i, m in enumerate(matches)]
    consistent = tuple(p.prompt_id for p in prompts if not p.match)
    return BaselineComparison(sum(matches) / len(matches), 1.0, prompts, {}, consistent)


def test_drift_in_most_answers_degrades_and_a_single_near_tie_does_not() -> None:
    results = [_result("a"), _result("b"), _result("c")]
    one = judge(_cycle(results, baseline=_parity([True, True, False])))
    assert one.state == HEALTHY and one.drifted == 1
    most = judge(_cycle(results, baseline=_parity([False, False, True])))
    assert most.state == DEGRADED and "--rebaseline" in most.reasons[0]


def test_a_slow_canary_degrades_only_with_a_latency_limit() -> None:
    slow = [_result("a", elapsed=12.0), _result("b")]
    assert judge(_cycle(slow)).state == HEALTHY
    assert judge(_cycle(slow), JudgeRules(max_latency=10.0)).state == DEGRADED


# ---- metrics -------------------------------------------------------------------------------------


def test_metrics_carry_the_state_the_cost_and_the_labels() -> None:
    metrics = WatchMetrics(Identity("gpu1", "kimi", "ddtree-b7"))
    bad = _result("a", "!!!!")
    bad.findings = [Finding("bang_run", 40, 8, (0, 4), "!!!!", "40 x '!'")]
    cycle = _cycle([bad, _result("b")], probes=_probes(5), requests_sent=11)
    metrics.record_cycle(cycle, judge(cycle))
    metrics.set_state(FAILING)
    text = generate_latest(metrics.registry).decode()
    labels = 'host="gpu1",model="kimi",profile="ddtree-b7"'
    assert f'k26ctl_watch_state{{{labels},state="failing"}} 1.0' in text
    assert f'k26ctl_watch_state{{{labels},state="healthy"}} 0.0' in text
    assert f'k26ctl_watch_detector_failures_total{{detector="bang_run",{labels}}} 1.0' in text
    assert f"k26ctl_watch_probes_mismatched_total{{{labels}}} 5.0" in text
    assert f"k26ctl_watch_canary_requests_total{{{labels}}} 11.0" in text
    assert f'k26ctl_watch_cycles_total{{{labels},verdict="failing"}} 1.0' in text


def test_metrics_export_the_accept_length_over_its_baseline_and_whether_it_should_accept() -> None:
    from k26ctl.smoke.acceptance import AcceptRule

    metrics = WatchMetrics(Identity("gpu1", "kimi", "eagle3"))
    metrics.set_accept_baseline(3.2)
    results = [_result("a", verify_ct=10), _result("b", verify_ct=10)]  # 40 tokens in 20 passes: 2.0
    cycle = _cycle(results, accept_rule=AcceptRule("EAGLE3", 4.0))
    metrics.record_cycle(cycle, judge(cycle))
    text = generate_latest(metrics.registry).decode()
    labels = 'host="gpu1",model="kimi",profile="eagle3"'
    assert f"k26ctl_watch_accept_length{{{labels}}} 2.0" in text
    assert f"k26ctl_watch_accept_baseline{{{labels}}} 3.2" in text
    assert f"k26ctl_watch_accept_baseline_ratio{{{labels}}} 0.625" in text
    assert f"k26ctl_watch_speculative_meant_to_accept{{{labels}}} 1.0" in text
    lookup = _cycle(results, accept_rule=AcceptRule("NGRAM", None))
    metrics.record_cycle(lookup, judge(lookup))
    assert (
        f"k26ctl_watch_speculative_meant_to_accept{{{labels}}} 0.0"
        in generate_latest(metrics.registry).decode()
    )


def test_the_textfile_is_written_whole(tmp_path: Path) -> None:
    metrics = WatchMetrics(Identity("h", "m", "p"))
    path = tmp_path / "k26ctl_watch.prom"
    metrics.write_textfile(path)
    assert "k26ctl_watch_state" in path.read_text() and list(tmp_path.iterdir()) == [path]


# ---- state files ---------------------------------------------------------------------------------


def test_target_keys_are_safe_directory_names() -> None:
    assert target_key("k26lab-ddtree-b7", None) == "k26lab-ddtree-b7"
    assert target_key(None, "http://127.0.0.1:30000/v1") == "url-127.0.0.1_30000_v1"
    assert target_key("../../etc", None) == "etc"


def test_history_keeps_changes_and_last_is_replaced(tmp_path: Path) -> None:
    store = WatchStore(tmp_path)
    store.append_history({"before": "healthy", "after": "failing"})
    store.append_history({"before": "failing", "after": "healthy"})
    store.write_last({"state": "healthy"})
    store.write_last({"state": "failing"})
    assert [r["after"] for r in store.read_history()] == ["failing", "healthy"]
    assert store.read_last() == {"state": "failing"}
    store.baseline.write_text("{}")
    assert store.forget_baseline() and not store.forget_baseline()


# ---- CLI -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "give either a PROFILE or --url URL"),
        (("--url", "ftp://x"), "needs http:// or https://"),
        (("--url", "http://127.0.0.1:9", "--interval", "0"), "--interval 0"),
        (("--url", "http://127.0.0.1:9", "--metrics-port", "70000"), "not a port number"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], message: str) -> None:
    proc = _k26("watch", "run", *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_once_against_nothing_is_unreachable_69_with_a_json_line(tmp_path: Path) -> None:
    proc = _k26(
        "watch", "--url", "http://127.0.0.1:9", "--once", "--json", env={"XDG_STATE_HOME": str(tmp_path)}
    )
    assert proc.returncode == 69, proc.stderr
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    assert record["state"] == "unreachable" and record["changed"] is True
    assert "cannot reach the server" in record["reasons"][0]


def test_rules_prints_the_shipped_alert_rules() -> None:
    proc = _k26("watch", "rules")
    assert proc.returncode == 0 and proc.stdout == alert_rules()
    names = [r["alert"] for g in yaml.safe_load(proc.stdout)["groups"] for r in g["rules"]]
    assert {"K26ServerFailing", "K26ServerUnreachable", "K26CanaryStale"} <= set(names)


def test_rebaseline_forgets_the_stored_baseline_and_says_so(tmp_path: Path) -> None:
    url = "http://127.0.0.1:9"
    baseline = tmp_path / "k26ctl" / "watch" / target_key(None, url) / "baseline.json"
    baseline.parent.mkdir(parents=True)
    baseline.write_text("{}")
    proc = _k26("watch", "--url", url, "--once", "--rebaseline", env={"XDG_STATE_HOME": str(tmp_path)})
    assert proc.returncode == 69 and not baseline.exists()
    assert f"baseline {baseline} removed" in proc.stderr
