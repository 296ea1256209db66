"""The CLI hands fleet files to the roll; bad use is a one-line error with the right exit code and
nothing remote is touched (the fleet's router and hosts do not exist here)."""

from __future__ import annotations

from pathlib import Path

from k26ctl.resources import profiles_dir
from tests.support.cli import run_k26ctl

LAB = profiles_dir() / "lab"


def fleet_file(tmp_path: Path) -> Path:
    path = tmp_path / "fleet.yaml"
    path.write_text(
        f"""fleet:
  name: nowhere
  profile: {LAB / "ddtree-b7.yaml"}
  router: {{url: "http://127.0.0.1:9", admin_key_env: K26_TEST_ROUTER_KEY}}
  members:
    - {{name: a, url: "http://10.231.250.2:30000", set: [host.address=a.invalid]}}
"""
    )
    return path


def test_a_fleet_deploy_without_yes_changes_nothing_and_says_so(tmp_path: Path) -> None:
    proc = run_k26ctl("deploy", str(fleet_file(tmp_path)), env={"XDG_STATE_HOME": str(tmp_path)})
    assert proc.returncode == 2 and "pass --yes" in proc.stderr
    assert not (tmp_path / "k26ctl" / "fleet").exists()  # no run record: nothing started


def test_roll_options_with_a_single_host_profile_are_a_usage_error() -> None:
    proc = run_k26ctl("deploy", str(LAB / "ddtree-b7.yaml"), "--serial", "2", "--yes")
    assert proc.returncode == 2 and "--serial only apply to a fleet file" in proc.stderr


def test_a_missing_admin_key_is_a_config_error_before_anything_runs(tmp_path: Path) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path), "K26_TEST_ROUTER_KEY": ""}
    proc = run_k26ctl("deploy", str(fleet_file(tmp_path)), "--yes", env=env)
    assert proc.returncode == 78 and "K26_TEST_ROUTER_KEY is not set" in proc.stderr


def test_status_of_a_fleet_whose_router_does_not_answer_is_exit_69(tmp_path: Path) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path), "K26_TEST_ROUTER_KEY": "k"}
    proc = run_k26ctl("status", str(fleet_file(tmp_path)), env=env)
    assert proc.returncode == 69, proc.stderr
    # the kind is not named: asking the gateway what it is (GET /get_loads) is the first call
    assert "did not answer GET /get_loads" in proc.stdout and "a  http://10.231.250.2:30000" in proc.stdout


def test_an_unknown_gateway_is_a_usage_error_before_any_host_boots(tmp_path: Path) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path)}
    for argv in (
        ("lab", "fleet", "up", "--gateway", "nginx"),
        ("lab", "demo", "--fleet", "--gateway", "nginx"),
    ):
        proc = run_k26ctl(*argv, "--name", "zz", env=env)
        assert proc.returncode == 2 and "--gateway nginx: not a gateway k26ctl runs" in proc.stderr
        assert "one of: sglang-router, smg" in proc.stderr and "Traceback" not in proc.stderr
        assert "booting" not in proc.stdout + proc.stderr
    assert not (tmp_path / "k26ctl" / "lab").exists()
