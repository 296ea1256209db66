"""`k26ctl smoke --url` and `k26ctl score` through the console entry: exit codes and outputs."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cli import run_here
from tests.support.fake_sglang import FakeSGLang
from tests.support.ports import refused_port

CORPUS_LIKE = [
    {"text": "The capital of France is Paris.", "prompt": "What is the capital of France?"},
    {"text": "The.r!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!", "kind": "prose"},
    {"text": "def f(x):\n    return x\n", "kind": "code"},
]


@pytest.fixture()
def suite_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "tiny",
                "temperatures": [0.0, 0.7],
                "prompts": [
                    {"id": "hello", "prompt": "Say hello.", "max_tokens": 32},
                    {"id": "raw", "api": "generate", "prompt": "Bread is made from", "max_tokens": 64},
                ],
            }
        )
    )
    return path


def answer(good: bool) -> Any:
    def responder(path: str, body: dict[str, Any]) -> str:
        if not good:
            return "GGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGG"
        return " flour, water, salt and yeast." if path == "/generate" else "Hello! It is nice to meet you."

    return responder


def test_smoke_url_pass_prints_the_table(suite_file: Path) -> None:
    with FakeSGLang(answer(True)) as fake:
        done = run_here("smoke", "--url", fake.url, "--suite", str(suite_file))
    assert done.returncode == 0, done.stderr
    assert "smoke PASSED" in done.stdout
    assert "hello@T0" in done.stdout and "accept len" in done.stdout
    assert "hello@T0: ok" in done.stderr  # progress on stderr


def test_smoke_url_fail_json_and_junit(suite_file: Path, tmp_path: Path) -> None:
    junit = tmp_path / "out.xml"
    with FakeSGLang(answer(False)) as fake:
        done = run_here(
            "smoke", "--url", fake.url, "--suite", str(suite_file), "--json", "--junit", str(junit)
        )
    assert done.returncode == 1
    report = json.loads(done.stdout)  # exactly one JSON document on stdout
    assert report["passed"] is False
    assert all("char_run" in {f["detector"] for f in r["findings"]} for r in report["results"])
    assert "hello@T0: " not in done.stderr  # --json: no progress chatter
    root = ET.parse(junit).getroot()
    assert int(root.get("failures", "0")) == len(report["results"])


def test_smoke_probes_skipped_is_reported_and_no_probes_turns_them_off(suite_file: Path) -> None:
    """A server without token ids: the probes are reported as skipped (a warning, not a silent pass);
    --no-probes leaves them out."""
    with FakeSGLang(answer(True)) as fake:
        done = run_here("smoke", "--url", fake.url, "--suite", str(suite_file), "--json")
        off = run_here("smoke", "--url", fake.url, "--suite", str(suite_file), "--json", "--no-probes")
    report = json.loads(done.stdout)
    assert report["passed"] is True
    assert report["probes"]["verdict"] == "skipped" and report["probes"]["checked"] == 0
    assert "probes_skipped" in {f["detector"] for f in report["suite_findings"]}
    assert json.loads(off.stdout)["probes"] is None
    assert off.returncode == 0


def test_smoke_record_then_compare_baseline(suite_file: Path, tmp_path: Path) -> None:
    baseline = tmp_path / "base.json"
    with FakeSGLang(answer(True)) as fake:
        assert (
            run_here(
                "smoke", "--url", fake.url, "--suite", str(suite_file), "--record-baseline", str(baseline)
            ).returncode
            == 0
        )
        done = run_here(
            "smoke", "--url", fake.url, "--suite", str(suite_file), "--baseline", str(baseline), "--json"
        )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["baseline"]["exact_match_rate"] == 1.0
    both = run_here(
        "smoke",
        "--url",
        "http://127.0.0.1:9",
        "--baseline",
        str(baseline),
        "--record-baseline",
        str(baseline),
    )
    assert both.returncode == 78 and "cannot be used together" in both.stderr


def test_smoke_unreachable_is_69(tmp_path: Path) -> None:
    junit = tmp_path / "unreachable.xml"
    with refused_port() as port:
        done = run_here("smoke", "--url", f"http://127.0.0.1:{port}", "--junit", str(junit))
    assert done.returncode == 69
    assert "cannot reach the server" in done.stderr and "Traceback" not in done.stderr
    root = ET.parse(junit).getroot()
    error = root.find(".//error")
    assert root.get("errors") == "1" and error is not None
    assert "cannot reach the server" in error.get("message", "")


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        ((), 2, "give either a PROFILE or --url"),
        (("none", "--url", "http://127.0.0.1:9"), 2, "give either a PROFILE or --url"),
        (("--url", "http://127.0.0.1:9", "--set", "a=b"), 2, "--set applies to a profile"),
        (("--url", "http://127.0.0.1:9", "--suite", "nope"), 78, "no shipped suite named 'nope'"),
        (
            ("--url", "http://127.0.0.1:9", "--api-key-env", "K26_TEST_UNSET_KEY"),
            78,
            "K26_TEST_UNSET_KEY is not set",
        ),
        (("/nonexistent/profile.yaml",), 78, "profile not found"),
    ],
)
def test_smoke_usage_and_config_errors(args: tuple[str, ...], code: int, message: str) -> None:
    done = run_here("smoke", *args, env={"K26_TEST_UNSET_KEY": ""})
    assert done.returncode == code, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_smoke_api_key_from_the_environment(suite_file: Path) -> None:
    with FakeSGLang(answer(True), api_key="t0ken") as fake:
        ok = run_here(
            "smoke",
            "--url",
            fake.url,
            "--suite",
            str(suite_file),
            "--api-key-env",
            "K26_TEST_KEY",
            env={"K26_TEST_KEY": "t0ken"},
        )
        refused = run_here("smoke", "--url", fake.url, "--suite", str(suite_file))
    assert ok.returncode == 0, ok.stderr
    assert "t0ken" not in ok.stdout + ok.stderr
    assert refused.returncode == 77 and "refused the API key" in refused.stderr


def test_score_file_and_stdin(tmp_path: Path) -> None:
    path = tmp_path / "outs.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in CORPUS_LIKE) + "\n")
    done = run_here("score", str(path), "--json")
    assert done.returncode == 1
    lines = [json.loads(x) for x in done.stdout.splitlines()]
    assert [x["degenerate"] for x in lines] == [False, True, False]
    assert all(isinstance(x["reasons"], list) for x in lines)
    assert any(r.startswith("char_run") for r in lines[1]["reasons"])

    ok = run_here("score", "-", stdin=json.dumps(CORPUS_LIKE[0]) + "\n")
    assert ok.returncode == 0 and "ok" in ok.stdout


def test_score_bad_input() -> None:
    done = run_here("score", "-", stdin='{"text": "fine"}\nnot json\n')
    assert done.returncode == 78 and "<stdin>:2" in done.stderr
    missing = run_here("score", "/nonexistent.jsonl")
    assert missing.returncode == 78 and "score input not found: /nonexistent.jsonl" in missing.stderr
