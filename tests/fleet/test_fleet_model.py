"""The fleet file: validated like a profile, members loaded with the fleet's and their own overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from k26ctl.errors import ConfigError
from k26ctl.fleet.model import OwnedRouter, load_fleet
from k26ctl.fleet.source import is_fleet_file
from k26ctl.resources import profiles_dir

LAB = profiles_dir() / "lab"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    return path


GOOD = f"""
fleet:
  name: lab3
  profile: {LAB / "ddtree-b7.yaml"}
  set: [sglang.host=0.0.0.0]
  router: {{url: "http://127.0.0.1:30000/", admin_key_env: ROUTER_KEY}}
  members:
    - {{name: a, url: "http://10.231.1.2:30000", set: [host.lab=a]}}
    - {{name: b, url: "http://10.231.2.2:30000", set: [host.lab=b, spec.ddtree.budget=5]}}
  roll: {{serial: 2, soak: 0}}
"""


def test_a_fleet_file_loads_each_member_with_fleet_then_member_then_command_line_overrides(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, GOOD)
    assert is_fleet_file(path) and not is_fleet_file(LAB / "ddtree-b7.yaml")
    fleet = load_fleet(path, ["smoke.timeout=30"])
    a, b = fleet.members
    assert fleet.config.router.url == "http://127.0.0.1:30000"  # trailing slash dropped
    assert a.loaded.profile.host.lab == "a" and a.loaded.profile.sglang.host == "0.0.0.0"
    assert a.loaded.profile.spec.ddtree.budget == 7 and b.loaded.profile.spec.ddtree.budget == 5
    assert a.loaded.profile.smoke.timeout == b.loaded.profile.smoke.timeout == 30
    assert (
        fleet.config.roll.serial == 2
        and fleet.config.roll.max_fail == 0
        and fleet.config.roll.min_healthy == 1
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("serial: 2", "serail: 2"), "serail"),
        (('url: "http://10.231.2.2:30000"', 'url: "http://10.231.1.2:30000"'), "appears twice"),
        (('url: "http://127.0.0.1:30000/"', "url: 127.0.0.1:30000"), "http"),
        (("set: [host.lab=b,", "set: [host.lab=a,"), "same host"),
        (("spec.ddtree.budget=5", "spec.ddtree.budgte=5"), "budgte"),
        (("serial: 2", "serial: 0"), "serial"),
    ],
)
def test_bad_fleet_files_are_one_line_config_errors(
    tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    path = write(tmp_path, GOOD.replace(*change))
    with pytest.raises(ConfigError, match=message) as info:
        load_fleet(path)
    assert info.value.exit_code == 78 and "\n" not in info.value.message


def test_the_owned_router_is_bound_explicitly_with_no_static_worker_list() -> None:
    argv = OwnedRouter(port=31000, prometheus_port=31001).argv()
    assert argv[:2] == ["sglang-router", "launch"]
    for flag, value in (
        ("--host", "127.0.0.1"),
        ("--port", "31000"),
        ("--prometheus-host", "127.0.0.1"),
        ("--prometheus-port", "31001"),
        ("--health-check-timeout-secs", "30"),
    ):
        assert argv[argv.index(flag) + 1] == value
    assert "--worker-urls" not in argv
