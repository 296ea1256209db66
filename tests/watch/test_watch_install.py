"""`k26ctl watch install/uninstall`: the unit as rendered, verified and written; what `status` shows."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from k26ctl.profile import load_profile
from k26ctl.unitfile import environment_from_unit, exec_start_argv
from k26ctl.watch.store import WatchStore, last_verdict, target_key
from k26ctl.watch.unit import PACKAGE_ROOT, render_unit, systemd_is_init
from tests.support.cli import run_k26ctl as _k26

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "profiles" / "lab" / "ddtree-b7.yaml"


def test_the_unit_runs_this_k26ctl_with_the_watch_arguments_word_for_word() -> None:
    args = ["/p/with space/x.yaml", "--set", "spec.ddtree.budget=7", "--suite", "100%lab"]
    text = render_unit("lab", args, "system")
    assert exec_start_argv(text) == [sys.executable, "-m", "k26ctl", "watch", "run", *args]
    assert environment_from_unit(text) == {"PYTHONPATH": str(PACKAGE_ROOT), "PYTHONUNBUFFERED": "1"}
    assert "WantedBy=multi-user.target" in text and "Restart=on-failure" in text
    assert "WantedBy=default.target" in render_unit("lab", args, "user")


def test_install_writes_a_verified_unit_and_uninstall_removes_it(tmp_path: Path) -> None:
    units = tmp_path / "units"
    proc = _k26("watch", "install", str(PROFILE), "--set", "sglang.port=30001", "--interval", "30",
                "--unit-dir", str(units), "--no-start")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    path = units / "k26ctl-watch-k26lab-ddtree-b7.service"
    assert proc.stdout.strip() == f"wrote {path}"
    argv = exec_start_argv(path.read_text())
    assert argv[5:] == [str(PROFILE), "--set", "sglang.port=30001", "--interval", "30",
                        "--metrics-port", "9469", "--metrics-address", "127.0.0.1"]  # fmt: skip
    assert [p.name for p in units.iterdir()] == [path.name]  # no temporary file left behind
    proc = _k26("watch", "uninstall", str(PROFILE), "--unit-dir", str(units))
    assert proc.returncode == 0 and not path.exists(), proc.stderr
    again = _k26("watch", "uninstall", str(PROFILE), "--unit-dir", str(units))
    assert again.returncode == 0 and "was not installed" in again.stdout


def test_unit_dir_without_no_start_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    proc = _k26("watch", "install", "--url", "http://127.0.0.1:30000", "--unit-dir", str(tmp_path / "u"))
    assert proc.returncode == 2 and "add --no-start" in proc.stderr
    assert not (tmp_path / "u").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--url", "http://127.0.0.1:30000", "--on", "host"), "--on host needs a PROFILE"),
        ((str(PROFILE), "--on", "elsewhere"), "--on 'elsewhere': expected local or host"),
        ((str(PROFILE), "--on", "host", "--scope", "user"), "--scope applies to --on local only"),
    ],
)
def test_on_host_input_is_checked_before_any_connection(args: tuple[str, ...], message: str) -> None:
    proc = _k26("watch", "install", *args)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_the_host_unit_gets_the_api_key_where_the_servers_unit_does() -> None:
    from k26ctl.watch.host_unit import HostWatchSettings, render_host_unit

    sets = [
        "sglang.api_key_env=K26_KEY",
        "service.environment_file=/etc/k26/env",
        "smoke.min_accept_length=2.5",
    ]
    profile = load_profile(PROFILE, sets).profile
    text = render_host_unit(profile, HostWatchSettings(python="/opt/py/bin/python"), "lab")
    argv = exec_start_argv(text)
    assert argv[:7] == [
        "/opt/py/bin/python",
        "-m",
        "k26ctl",
        "watch",
        "run",
        "--url",
        "http://127.0.0.1:30000",
    ]
    assert argv[argv.index("--api-key-env") + 1] == "K26_KEY"
    assert argv[argv.index("--min-accept-length") + 1] == f"{profile.smoke.min_accept_length:g}"
    assert "EnvironmentFile=/etc/k26/env\n" in text
    literal = load_profile(PROFILE, [*sets[:1], "service.environment.K26_KEY=s3cret"]).profile
    assert environment_from_unit(render_host_unit(literal, HostWatchSettings(python="p"), "lab"))[
        "K26_KEY"
    ] == ("s3cret")


@pytest.mark.skipif(systemd_is_init(), reason="this machine runs systemd: the refusal does not apply")
def test_starting_without_systemd_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    proc = _k26("watch", "install", "--url", "http://127.0.0.1:30000", "--scope", "user", env=env)
    assert proc.returncode == 2 and "systemd is not the init system" in proc.stderr
    assert not (tmp_path / "systemd").exists()


def test_status_reads_the_watchers_last_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    loaded = load_profile(PROFILE)
    assert last_verdict(loaded) is None
    store = WatchStore.for_target(target_key(loaded.profile.name, None))
    store.write_last(
        {"state": "failing", "verdict": "failing", "time": "t", "reasons": ["probes fail: 9/96"]}
    )
    assert last_verdict(loaded) == {
        "state": "failing",
        "verdict": "failing",
        "time": "t",
        "reasons": ["probes fail: 9/96"],
    }
    from k26ctl.cli.present.watch import last_verdict_line

    assert (
        last_verdict_line(last_verdict(loaded)) == "watch: failing (last cycle t: failing); probes fail: 9/96"
    )
    proc = _k26("watch", "status", str(PROFILE), "--json", env={"XDG_STATE_HOME": str(tmp_path)})
    assert proc.returncode == 0 and '"state": "failing"' in proc.stdout, proc.stderr
    from k26ctl.watch.host_unit import watch_verdict

    # the host cannot be reached (a lab host that is not up): `k26ctl status` falls back to this machine's
    unreachable = load_profile(PROFILE, ["host.lab=k26v-not-up"])
    assert watch_verdict(unreachable) == (last_verdict(loaded), "local")


def test_an_accept_floor_given_to_run_reaches_the_canary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from k26ctl.watch.service import RunRequest, make_watcher

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    request = RunRequest(url="http://127.0.0.1:9", model="m", suite="lab", min_accept_length=2.5)
    watcher, _ = make_watcher(request, lambda record: None)
    assert watcher.config.canary.min_accept_length == 2.5
    without = make_watcher(RunRequest(url="http://127.0.0.1:9", model="m", suite="lab"), lambda r: None)[0]
    assert without.config.canary.min_accept_length is None
