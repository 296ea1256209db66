"""Suites, prompt-aware checks, baselines and offline scoring: the pure pieces of the smoke package."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from k26ctl.errors import ConfigError
from k26ctl.smoke.baseline import Baseline, BaselineEntry, compare, first_divergence
from k26ctl.smoke.checks import extract_block, run_check
from k26ctl.smoke.offline import score_lines
from k26ctl.smoke.suite import Expectation, load_suite, parse_suite, resolve_suite_path, shipped_suites

# ---- suites ----------------------------------------------------------------------------------------


def test_shipped_default_suite_covers_the_required_prompts() -> None:
    suite = load_suite("default")
    kinds = {p.kind for p in suite.prompts}
    assert {"prose", "poem", "code", "cjk", "list", "json"} <= kinds
    ids = {p.id for p in suite.prompts}
    assert {"arithmetic", "repeat-word", "long"} <= ids
    assert any(t == 0 for t in suite.temperatures) and any(t > 0 for t in suite.temperatures)
    checks = {e.type for p in suite.prompts for e in p.expect}
    assert {"python", "json", "answer", "repeats", "min_tokens"} <= checks
    assert max(p.max_tokens for p in suite.prompts) >= 256
    assert any(p.api == "generate" for p in suite.prompts)
    assert any((p.chat_template_kwargs or {}).get("thinking") is False for p in suite.prompts)
    assert any(p.chat_template_kwargs is None for p in suite.prompts if p.api == "chat")  # thinking stays on


def test_shipped_lab_suite_fits_the_tiny_model() -> None:
    suite = load_suite("lab")
    assert max(p.max_tokens for p in suite.prompts) >= 256
    checks = {e.type for p in suite.prompts for e in p.expect}
    assert not checks & {"python", "json", "answer"}  # the lab model cannot do these
    assert set(shipped_suites()) >= {"default", "lab"}


def test_suite_name_resolution(tmp_path: Path) -> None:
    assert resolve_suite_path("lab").name == "lab.yaml"
    custom = tmp_path / "mine.yaml"
    custom.write_text(yaml.safe_dump({"name": "mine", "prompts": [{"id": "a", "prompt": "hi"}]}))
    assert load_suite(str(custom)).name == "mine"
    with pytest.raises(ConfigError, match="no shipped suite named 'nope'") as info:
        load_suite("nope")
    assert info.value.exit_code == 78 and "default" in (info.value.hint or "")
    with pytest.raises(ConfigError, match="not found"):
        load_suite(str(tmp_path / "missing.yaml"))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "x", "prompts": []}, "prompts"),
        ({"name": "x", "prompts": [{"id": "a"}]}, "exactly one of 'prompt' or 'messages'"),
        ({"name": "x", "prompts": [{"id": "a", "prompt": "p"}, {"id": "a", "prompt": "q"}]}, "duplicate"),
        ({"name": "x", "prompts": [{"id": "a", "prompt": "p", "kind": "sonnet"}]}, "unknown kind"),
        ({"name": "x", "prompts": [{"id": "a", "prompt": "p", "colour": 1}]}, "colour"),
        (
            {"name": "x", "prompts": [{"id": "a", "prompt": "p", "expect": [{"type": "regex"}]}]},
            "needs a value",
        ),
        (
            {
                "name": "x",
                "prompts": [{"id": "a", "prompt": "p", "expect": [{"type": "repeats", "value": "w"}]}],
            },
            "needs a count",
        ),
        (
            {
                "name": "x",
                "prompts": [{"id": "a", "messages": [{"role": "user", "content": "p"}], "api": "generate"}],
            },
            "plain 'prompt'",
        ),
        ([1, 2], "mapping"),
    ],
)
def test_bad_suites_are_config_errors(data: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_suite(data, "test.yaml")


def test_invalid_yaml_suite(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_suite(str(bad))


# ---- prompt-aware checks ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expectation", "good", "bad"),
    [
        ({"type": "contains", "value": "Paris"}, "The capital is paris.", "The capital is Lyon."),
        ({"type": "not_contains", "value": "<think>"}, "Paris.", "<think>x</think>Paris"),
        ({"type": "regex", "value": r"(?m)^\s*5[.)]"}, "1. a\n5. e", "1. a\n2. b"),
        ({"type": "answer", "value": "391"}, "So 17 x 23 = 391.", "It is 3910."),
        ({"type": "answer", "value": "1234"}, "The total is 1,234 apples.", "The total is 12345."),
        ({"type": "json"}, '```json\n{"born": 1815}\n```', '{"born": 1815'),
        ({"type": "python"}, "```python\ndef f(x):\n    return x\n```", "def f(x)\n    return x"),
        ({"type": "repeats", "value": "banana", "count": 3}, "banana banana Banana", "banana banana bananas"),
    ],
)
def test_checks_pass_and_fail(expectation: dict[str, object], good: str, bad: str) -> None:
    exp = Expectation.model_validate(expectation)
    assert run_check(exp, good) is None
    finding = run_check(exp, bad)
    assert finding is not None and finding.detector == f"expect.{exp.type}"
    assert finding.severity == "fail"


def test_min_tokens_and_warn_severity() -> None:
    exp = Expectation(type="min_tokens", count=256, severity="warn")
    assert run_check(exp, "x", completion_tokens=300) is None
    finding = run_check(exp, "x", completion_tokens=12)
    assert finding is not None and finding.severity == "warn" and "12 tokens" in finding.message


def test_json_error_says_where() -> None:
    finding = run_check(Expectation(type="json"), '{"a": 1,\n "b": }')
    assert finding is not None and "line 2" in finding.message


def test_extract_block_prefers_the_first_fence() -> None:
    assert extract_block("Here:\n```python\nx = 1\n```\nand ```json\n{}\n```") == "x = 1\n"
    assert extract_block("  plain  ") == "plain"


# ---- baselines -----------------------------------------------------------------------------------


def test_first_divergence() -> None:
    assert first_divergence("abc", "abc") is None
    assert first_divergence("abcd", "abXd") == 2
    assert first_divergence("abc", "abcdef") == 3
    assert first_divergence("", "a") == 0


def test_baseline_round_trip_and_compare(tmp_path: Path) -> None:
    base = Baseline(
        {"model": "m", "version": "0.5.15", "server_args": {"speculative_algorithm": None}},
        "lab",
        {
            "a": BaselineEntry("a", "alpha beta", "", 64),
            "b": BaselineEntry("b", "gamma", "think", 64),
            "c": BaselineEntry("c", "delta", "", 64),
        },
    )
    path = tmp_path / "b.json"
    base.save(path)
    again = Baseline.load(path)
    assert again.entries == base.entries and again.identity == base.identity
    result = compare(again, {"a": "alpha beta", "b": "gamma\nthink", "c": "delta!"}, min_exact_match=0.66)
    assert result.exact_match_rate == pytest.approx(2 / 3)
    assert result.passed
    assert not compare(again, {"a": "alpha beta", "b": "gamma\nthink", "c": "delta!"}).passed
    missing = compare(again, {"a": "alpha beta"})
    assert [p.missing for p in missing.prompts] == [False, True, True]
    json.dumps(result.to_json())


@pytest.mark.parametrize(
    "content", ["not json", '{"format": "other"}', '{"format": "k26ctl-smoke-baseline/1"}']
)
def test_bad_baseline_files(tmp_path: Path, content: str) -> None:
    path = tmp_path / "b.json"
    path.write_text(content)
    with pytest.raises(ConfigError):
        Baseline.load(path)
    with pytest.raises(ConfigError, match="not found"):
        Baseline.load(tmp_path / "none.json")


# ---- offline scoring ---------------------------------------------------------------------------------


def test_score_lines_keeps_order_and_reports_bad_lines() -> None:
    lines = [
        json.dumps({"text": "Paris is the capital of France.", "id": 1}),
        "",
        json.dumps({"text": "!" * 40, "kind": "prose", "prompt": "Say hi"}),
    ]
    scored = score_lines(lines)
    assert [s.line for s in scored] == [1, 3]
    assert [s.verdict.degenerate for s in scored] == [False, True]
    assert scored[0].to_json()["id"] == 1
    with pytest.raises(ConfigError, match="input:2: needs a string field 'text'"):
        score_lines(['{"text": "ok"}', '{"txt": 1}'])
    with pytest.raises(ConfigError, match="not JSON"):
        score_lines(["{"])
    with pytest.raises(ConfigError, match="'kind' must be a string"):
        score_lines([json.dumps({"text": "x", "kind": 3})])


# ---- profile settings --------------------------------------------------------------------------------


def test_options_and_api_key_from_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    from k26ctl.inputs import api_key
    from k26ctl.profile import load_profile
    from k26ctl.smoke.target import options_from_profile

    root = Path(__file__).resolve().parents[2]
    profile = load_profile(root / "profiles" / "lab" / "ddtree-b16.yaml", ["smoke.timeout=33"]).profile
    options = options_from_profile(profile, concurrency=4, baseline=None)
    assert options.min_accept_length == profile.smoke.min_accept_length
    assert options.timeout == 33 and options.concurrency == 4
    assert options_from_profile(profile).concurrency == profile.smoke.concurrency

    assert api_key(None) is None
    monkeypatch.setenv("K26_SMOKE_KEY", "abc")
    assert api_key("K26_SMOKE_KEY") == "abc"
    monkeypatch.delenv("K26_SMOKE_KEY")
    with pytest.raises(ConfigError, match="K26_SMOKE_KEY is not set"):
        api_key("K26_SMOKE_KEY")


def test_the_documented_suite_example_is_valid() -> None:
    import re

    readme = (Path(__file__).resolve().parents[2] / "k26ctl" / "smoke" / "suites" / "README.md").read_text()
    block = re.search(r"```yaml\n(.*?)```", readme, re.DOTALL)
    assert block is not None
    suite = parse_suite(yaml.safe_load(block.group(1)), "README.md")
    assert {e.type for e in suite.prompts[0].expect} == {
        "json",
        "python",
        "contains",
        "not_contains",
        "regex",
        "answer",
        "repeats",
        "min_tokens",
    }
