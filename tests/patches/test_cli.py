"""`k26ctl patch ...` end to end through the CLI entry, on this machine as a `local` host."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from k26ctl.resources import project_root
from tests.patches.patch_support import PATCH, TARGET
from tests.support.cli import run_here

LAB_TREE = project_root() / "k26ctl" / "lab" / "server" / "sglang_tree" / "sglang"


def test_list_shows_the_shipped_set() -> None:
    plain = run_here("patch", "list")
    assert plain.returncode == 0 and PATCH in plain.stdout and TARGET in plain.stdout
    document = json.loads(run_here("patch", "list", "--json").stdout)
    assert (document["kind"], document["schema_version"]) == ("patch-list", 1)
    listed = {p["name"]: p for p in document["patches"]}
    assert sorted(listed) == ["lab-verify-width-cap", PATCH]  # the lab's patch says LAB ONLY in its summary
    assert listed[PATCH]["versions"] == ["0.5.14", "0.5.15", "0.5.16"] and listed[PATCH]["not_needed"]
    assert listed["lab-verify-width-cap"]["summary"].startswith("LAB ONLY")


def test_check_needs_exactly_one_source(tmp_path: Path) -> None:
    both = run_here("patch", "check", "--sglang-version", "0.5.15", "--source", str(tmp_path))
    assert both.returncode == 2 and "exactly one" in both.stderr
    nothing = run_here("patch", "check", "--source", str(tmp_path))
    assert nothing.returncode == 78 and "no sglang package" in nothing.stderr


@pytest.mark.skipif(
    not (LAB_TREE / TARGET).is_file() or not (project_root() / "k26ctl" / "remote" / "local.py").is_file(),
    reason="needs the lab tree and the local host of this checkout",
)
def test_status_apply_revert_against_a_local_profile(tmp_path: Path) -> None:
    root = tmp_path / "tree" / "sglang"
    shutil.copytree(LAB_TREE, root, ignore=shutil.ignore_patterns("__pycache__"))
    original = (root / TARGET).read_bytes()
    profile = tmp_path / "local.yaml"
    profile.write_text(
        yaml.safe_dump(
            {
                "name": "patch-cli",
                "host": {"address": "local"},
                "sglang": {"python": sys.executable},
                "service": {"environment": {"PYTHONPATH": str(root.parent)}},
                "patches": [PATCH],
            }
        )
    )
    status = run_here("patch", "status", str(profile), "--json")
    assert status.returncode == 0, status.stderr
    [state] = json.loads(status.stdout)["patches"]
    assert state["state"] == "pending" and state["target"] == str(root / TARGET)

    applied = run_here("patch", "apply", str(profile), "--json")
    assert applied.returncode == 0, applied.stderr
    [result] = json.loads(applied.stdout)["patches"]
    assert result["changed"] and result["backup_path"]
    again = run_here("patch", "apply", str(profile))
    assert again.returncode == 0 and f"{PATCH}: ok - already applied" in again.stdout

    reverted = run_here("patch", "revert", str(profile), "--name", PATCH)
    assert reverted.returncode == 0 and f"{PATCH}: changed" in reverted.stdout
    assert (root / TARGET).read_bytes() == original

    unknown = run_here("patch", "status", str(profile), "--name", "triton-ddtree-verify-widht")
    assert unknown.returncode == 78 and "did you mean 'triton-ddtree-verify-width'" in unknown.stderr

    (root / TARGET).write_text(
        original.decode().replace("speculative_num_draft_tokens\n", "speculative_num_draft_tokens or 8\n", 1)
    )
    refused = run_here("patch", "status", str(profile))
    assert refused.returncode == 1 and "refused" in refused.stdout
    blocked = run_here("patch", "apply", str(profile))
    assert blocked.returncode == 1 and "not found" in blocked.stderr and "hint:" in blocked.stderr


@pytest.mark.skipif(
    not (project_root() / "k26ctl" / "remote" / "local.py").is_file(),
    reason="needs the local host of this checkout",
)
def test_apply_is_refused_while_a_deploy_holds_the_host_lock(tmp_path: Path) -> None:
    from k26ctl.remote.local import LocalHost

    root = tmp_path / "tree" / "sglang"
    (root / "srt" / "layers" / "attention").mkdir(parents=True)
    (root / TARGET).write_text("x = 1\n")
    profile = tmp_path / "local.yaml"
    profile.write_text(
        yaml.safe_dump(
            {
                "host": {"address": "local"},
                "service": {"name": "k26patchlocktest"},
                "sglang": {"python": sys.executable, "package_root": str(root)},
                "patches": [PATCH],
            }
        )
    )
    with LocalHost().lock("k26patchlocktest", holder="someone-deploying"):
        held = run_here("patch", "apply", str(profile))
    assert held.returncode == 1 and "someone-deploying" in held.stderr
    assert (root / TARGET).read_text() == "x = 1\n"
