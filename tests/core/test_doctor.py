"""doctor's pure parts: the inventory equals docs/conformance.md, facts judged row by row, secrets
removed, and a bundle that is not this k26ctl's, damaged or edited reads as one line, exit 78."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from k26ctl.doctor import redact
from k26ctl.doctor.bundle import bundle_document, read_bundle, write_bundle
from k26ctl.doctor.checks import check, exit_code
from k26ctl.doctor.collect import metric_names, parse_gpus
from k26ctl.doctor.facts import Facts
from k26ctl.doctor.inventory import load_inventory
from k26ctl.errors import ConfigError, ExitCode
from k26ctl.profile import load_profile
from tests.support.cli import run_k26ctl

ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = ROOT / "docs" / "conformance.md"
INVENTORY = load_inventory()
DECODE = (
    "[2026-12-05 08:00:00 TP0] Decode batch, #running-req: 1, #token: 90, token usage: 0.01,"
    " accept len: {a}, accept rate: 0.00, cuda graph: False, gen throughput (token/s): 12.00, #queue-req: 0"
)


def facts(**changes: Any) -> Facts:
    """A healthy DDTree lab host as doctor sees it; `changes` replace whole sections (dicts)."""
    data: dict[str, Any] = {
        "host": "lab host k26lab",
        "collected": "2026-12-05T08:00:00+00:00",
        "profile": {
            "name": "k26lab-ddtree-b7",
            "service": "k26lab-sglang",
            "served_name": "k26lab-tiny",
            "model_path": "/opt/k26lab/models/k26lab-tiny",
            "algorithm": "DDTREE",
            "draft_model_path": "/opt/k26lab/models/k26lab-tiny-dflash",
        },
        "gpu": {
            "ok": True,
            "gpus": [
                {"index": i, "name": "RTX PRO 6000", "driver": "580.95.05", "compute_cap": "12.0"}
                for i in range(8)
            ],
            "cuda_driver": "13.0",
        },
        "sglang": {"root": "/opt/sglang/sglang", "version": "0.5.15", "python": "/opt/venv/bin/python"},
        "tree": {"git": False},
        "patches": [
            {"name": "triton-ddtree-verify-width", "state": "pending", "message": "1 edit", "target": "x"}
        ],
        "unit": {
            "path": "/etc/systemd/system/s.service",
            "exists": True,
            "matches_profile": True,
            "active": "active",
        },
        "journal": {
            "lines": [
                "Starting s.service - SGLang...",
                "Multi-thread loading shards: 100% Completed | 16/16 [00:01<00:00, 12.0it/s]",
                "Load weight end. elapsed=1.2 s, type=LlamaForCausalLM",
                "The server is fired up and ready to roll!",
                *(DECODE.format(a="3.40") for _ in range(4)),
            ]
        },
        "http": {
            "reachable": True,
            "server_info_path": "/server_info",
            "server_info_status": 200,
            "server_info_keys": [*INVENTORY.server_info.keys, "api_key"],
            "identity": {"version": "0.5.15"},
            "models_status": 200,
            "model_ids": ["k26lab-tiny"],
            "metrics_status": 200,
            "metric_names": [*INVENTORY.metrics.names, "sglang:cached_tokens_total"],
        },
    }
    data.update(changes)
    return Facts.model_validate(data)


def rows_by(f: Facts) -> dict[str, Any]:
    return {row.item: row for row in check(f, INVENTORY)}


def test_every_inventory_text_is_in_docs_conformance_md() -> None:
    doc = CONFORMANCE.read_text(encoding="utf-8")
    missing = [text for text in INVENTORY.doc_texts() if text not in doc]
    assert missing == []
    for version in INVENTORY.sglang.verified:
        assert f"**{version}**" in doc
    for name in INVENTORY.metrics.names:  # the /metrics row names each of them
        assert name.split(":", 1)[1] in doc, name


def test_inventory_journal_patterns_match_the_lines_the_doc_quotes() -> None:
    quoted = {
        "ready": "The server is fired up and ready to roll!",
        "load-progress": "Multi-thread loading shards: 100% Completed | 64/64",
        "load-weight-end": "Load weight end. elapsed=12.3 s, type=DeepseekV3ForCausalLM",
        "decode-line": DECODE.format(a="3.42"),
        "subprocess-exception": "Scheduler hit an exception: Traceback (most recent call last):",
        "scheduler-died": "Rank 0 scheduler died during initialization (exit code: -9)",
    }
    assert {j.id for j in INVENTORY.journal} == set(quoted)
    for entry in INVENTORY.journal:
        assert re.search(entry.pattern, quoted[entry.id]), entry.id


def test_a_host_as_verified_matches_everywhere() -> None:
    rows = check(facts(), INVENTORY)
    statuses = {r.status for r in rows}
    assert statuses <= {"match", "info", "new"} and exit_code(rows) == 0
    by = rows_by(facts())
    assert by["version"].status == "match" and by["GPU"].status == "match"
    assert (
        by["/metrics (new names)"].status == "new"
        and "cached_tokens_total" in by["/metrics (new names)"].seen
    )


def test_what_differs_is_new_and_what_cannot_be_read_says_what_it_affects() -> None:
    f = facts(
        gpu={"ok": True, "gpus": [{"index": 0, "name": "L40S", "driver": "550", "compute_cap": "8.9"}]},
        sglang={"root": "/src/python/sglang", "version": "0.5.19", "python": "p"},
        tree={
            "git": True,
            "revision": "abc123def4567890",
            "describe": "v0.5.19-3-gabc123d",
            "changed": [" M a.py"],
        },
    )
    by = rows_by(f)
    assert by["GPU"].status == "new" and "sm120" in by["GPU"].affects.lower()
    assert by["version"].status == "new" and "0.5.15 and 0.5.23" in by["version"].affects
    assert by["source tree"].status == "new" and "1 local change(s): a.py" in by["source tree"].seen
    future = rows_by(facts(sglang={"root": "r", "version": "0.6.1", "python": "p"}))
    assert "no option table" in future["version"].affects
    blind = facts(
        gpu={"ok": False, "error": "nvidia-smi: command not found"},
        http={"reachable": True, "server_info_status": 404, "models_status": 200, "model_ids": ["other"],
              "metrics_status": 200, "metric_names": ["sglang:num_running_reqs"]},
    )  # fmt: skip
    rows = check(blind, INVENTORY)
    by = {r.item: r for r in rows}
    assert by["nvidia-smi"].status == "unreadable" and "GPU memory" in by["nvidia-smi"].affects
    assert by["/server_info"].status == "unreadable" and by["/v1/models"].status == "new"
    assert by["/metrics"].status == "unreadable" and "num_queue_reqs" in by["/metrics"].seen
    assert exit_code(rows) == 1


def test_a_missing_ready_line_on_a_running_server_cannot_be_read() -> None:
    lines = ["Starting s.service", "Loading safetensors checkpoint shards: 100% Completed | 2/2"]
    by = rows_by(facts(journal={"lines": lines}))
    assert by["ready"].status == "unreadable" and "immediate probe" in by["ready"].affects
    assert by["load-progress"].status == "match"


def test_runtime_rules_read_the_load_s_decode_lines() -> None:
    ones = {"lines": ["Starting s.service", *(DECODE.format(a="1.00") for _ in range(5))]}
    by = rows_by(facts(journal=ones))
    assert by["runtime/accept-len-one"].status == "error" and "#27829" in by["runtime/accept-len-one"].seen
    upgraded = rows_by(facts(journal=ones, earlier_release_accept=["0.5.15", 3.4]))
    assert "runtime/accept-len-one-after-upgrade" in upgraded


def test_cross_flag_findings_collected_with_the_host_release_are_rows() -> None:
    finding = {"level": "error", "code": "crossflag/mla-eagle3-draft-backend", "message": "m", "hint": "h"}
    other = {"level": "info", "code": "sglang/version-table", "message": "x", "hint": ""}
    by = rows_by(facts(rules=[finding, other]))
    assert by["crossflag/mla-eagle3-draft-backend"].status == "error" and "sglang/version-table" not in by


def test_parsers_of_nvidia_smi_and_metrics() -> None:
    gpus = parse_gpus(
        "0, NVIDIA H100 80GB HBM3, 570.86.15, 9.0, 81559\n1, NVIDIA H100 80GB HBM3, 570.86.15, 9.0, 81559\n"
    )
    assert gpus is not None and [g.compute_cap for g in gpus] == ["9.0", "9.0"]
    assert parse_gpus("[N/A]\n") is None and parse_gpus("") is None
    page = (
        "# HELP x\n"
        'sglang:num_running_reqs{model_name="m",tp_rank="0"} 1.0\n'
        'sglang:num_running_reqs{model_name="m",tp_rank="1"} 0\n'
        "up 1\n"
    )
    assert metric_names(page) == ["sglang:num_running_reqs", "up"]


def test_secrets_are_removed_from_lines_units_and_server_args() -> None:
    profile = load_profile(
        ROOT / "profiles" / "lab" / "base.yaml", ["service.environment.HF_TOKEN=hf_abcdefghij"]
    ).profile
    line = "server_args=ServerArgs(model_path='/m', api_key='sk-live-123', admin_api_key=None, port=30000)"
    shown = redact.text(line, profile)
    assert "sk-live-123" not in shown and "api_key='***'" in shown and "admin_api_key=None" in shown
    assert "hf_abcdefghij" not in redact.text("token from env hf_abcdefghij used", profile)
    assert redact.text("Authorization: Bearer abc.def") == "Authorization: Bearer ***"
    unit = (
        'Environment="HF_TOKEN=hf_x" "PATH=/bin"\n'
        "ExecStart=/p -m sglang.launch_server --api-key s3cret --port 1\n"
    )
    cleaned = redact.unit_text(unit)
    assert (
        "hf_x" not in cleaned and "s3cret" not in cleaned and "PATH=/bin" in cleaned and "--port 1" in cleaned
    )
    assert redact.mapping({"api_key": "k", "tp_size": 8}) == {"api_key": "***", "tp_size": 8}


def test_a_bundle_round_trips_and_explains_as_the_host_did(tmp_path: Path) -> None:
    path = tmp_path / "bundle.json"
    write_bundle(path, facts())
    again = read_bundle(path)
    assert [r.to_json() for r in check(again, INVENTORY)] == [r.to_json() for r in check(facts(), INVENTORY)]


def _bad(tmp_path: Path, change: Any) -> Path:
    doc = bundle_document(facts())
    change(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda d: d.update(k26ctl_version="0.0.1"), "written by k26ctl 0.0.1"),
        (lambda d: d.update(format="k26ctl-doctor-bundle/9"), "format k26ctl-doctor-bundle/9"),
        (lambda d: d["facts"]["sglang"].update(version="0.5.23"), "do not match its sha256"),
        (lambda d: d.pop("facts"), "not a doctor bundle"),
    ],
)
def test_another_version_or_a_hand_edit_is_one_line_exit_78(tmp_path: Path, change: Any, said: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(said)) as info:
        read_bundle(_bad(tmp_path, change))
    assert info.value.exit_code == ExitCode.CONFIG


def test_a_well_signed_bundle_with_a_wrong_field_is_one_line(tmp_path: Path) -> None:
    from k26ctl.doctor.bundle import digest

    def wrong(doc: dict[str, Any]) -> None:
        doc["facts"]["gpu"]["gpus"] = "eight"
        doc["sha256"] = digest(doc["facts"])

    with pytest.raises(ConfigError, match=r"gpu\.gpus"):
        read_bundle(_bad(tmp_path, wrong))


def test_the_cli_explains_a_bundle_and_refuses_a_damaged_one_without_a_traceback(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    write_bundle(good, facts())
    env = {"XDG_STATE_HOME": str(tmp_path / "fresh-state")}
    shown = run_k26ctl("doctor", "--explain", str(good), env=env)
    assert shown.returncode == 0, shown.stderr
    assert "from the bundle" in shown.stdout and "triton-ddtree-verify-width" in shown.stdout
    damaged = tmp_path / "damaged.json"
    damaged.write_bytes(good.read_bytes()[:200])
    refused = run_k26ctl("doctor", "--explain", str(damaged), env=env)
    assert refused.returncode == 78 and "Traceback" not in refused.stderr
    assert len([line for line in refused.stderr.splitlines() if line.startswith("error")]) == 1
    both = run_k26ctl("doctor", "profiles/lab/base.yaml", "--explain", str(good), env=env)
    assert both.returncode == 2


def test_a_source_tree_s_revision_and_local_changes_are_read_without_writing(tmp_path: Path) -> None:
    import subprocess

    from k26ctl.doctor.collect import _tree
    from k26ctl.remote.local import LocalHost

    package = tmp_path / "sglang-src" / "python" / "sglang"
    package.mkdir(parents=True)
    (package / "version.py").write_text('__version__ = "0.5.15"\n')
    (package / "triton_backend.py").write_text("num_draft_tokens = 8\n")
    git = ["git", "-C", str(tmp_path / "sglang-src"), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "release"], ["tag", "v0.5.15"]):
        subprocess.run([*git, *args], check=True)
    (package / "triton_backend.py").write_text("num_draft_tokens = 17\n")
    index = tmp_path / "sglang-src" / ".git" / "index"
    before = index.stat().st_mtime_ns
    tree = _tree(LocalHost(), str(package))
    assert tree.git and tree.describe == "v0.5.15" and tree.revision and len(tree.revision) == 40
    assert tree.changed == [" M python/sglang/triton_backend.py"]
    assert index.stat().st_mtime_ns == before  # optional locks off: git status refreshed no index
    row = rows_by(facts(tree=tree.model_dump()))["source tree"]
    assert row.status == "new" and "1 local change(s): python/sglang/triton_backend.py" in row.seen
    assert _tree(LocalHost(), str(tmp_path)).git is False  # an installed package: no git tree


def test_fatal_and_unknown_error_lines_of_the_load_are_rows() -> None:
    lines = [
        "Starting s.service",
        "Scheduler hit an exception: Traceback (most recent call last):",
        "[2026-12-05 08:00:00] ERROR: NCCL warmup took long",
    ]
    by = rows_by(facts(journal={"lines": lines}))
    assert by["fatal lines"].status == "error" and "subprocess-exception" in by["fatal lines"].seen
    assert by["error-looking lines"].status == "new" and "NCCL warmup" in by["error-looking lines"].seen
    assert "fatal lines" not in rows_by(facts()) and "error-looking lines" not in rows_by(facts())


def test_a_refused_patch_cannot_be_read_only_where_the_profile_lists_it() -> None:
    refused = {
        "name": "lab-verify-width-cap",
        "state": "refused",
        "message": "anchor not found",
        "target": "t",
    }
    listed = facts(patches=[refused])
    listed.profile.patches.append("lab-verify-width-cap")
    assert rows_by(listed)["lab-verify-width-cap"].status == "unreadable"
    assert rows_by(facts(patches=[refused]))["lab-verify-width-cap"].status == "info"
