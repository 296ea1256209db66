"""Against SGLang 0.5.15's real parser (the release wheel, fetched with pip into the user cache):

* the committed option table is what scripts/gen_sglang_options.py produces from that release;
* `validate --remote` runs the host's own parser through a real Host (LocalHost: this machine as the
  host, its "SGLang" being the release installed in a venv) and systemd-analyze on the host without
  tolerance for a missing interpreter.
The venv has the release installed --no-deps; third-party modules it cannot import are stubbed by a
start-up hook (the same list the table records), SGLang's own code runs for real.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from k26ctl.errors import UnreachableError
from k26ctl.profile import Profile, load_profile
from k26ctl.remote.local import LocalHost
from k26ctl.render import render_launch
from k26ctl.validate import OPTION_TABLE, load_catalog, remote_findings
from k26ctl.validate.sglang_parse import parse_on_host, sglang_flags
from tests.support.cli import CliResult, run_k26ctl

pytestmark = pytest.mark.network_sglang

ROOT = Path(__file__).resolve().parents[2]
VERSION = "0.5.15"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_sglang_options", ROOT / "scripts" / "gen_sglang_options.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def sglang_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from k26ctl.patches.release import fetch_wheel

    try:
        wheel = fetch_wheel(VERSION)
    except UnreachableError as exc:
        pytest.skip(f"pip cannot fetch sglang=={VERSION}: {exc.message}")
    stubbed = json.loads(OPTION_TABLE.read_text())["stubbed_modules"][VERSION]
    return Path(
        _generator().create_parser_venv(wheel, tmp_path_factory.mktemp("sglang-venv") / "venv", stubbed)
    )


def profile(name: str, python: Path, *overrides: str) -> Profile:
    return load_profile(ROOT / "profiles" / f"{name}.yaml", [f"sglang.python={python}", *overrides]).profile


def test_committed_table_matches_a_fresh_extraction(sglang_python: Path) -> None:
    """The release's table rebuilt from the compact file (base plus deltas) is what its parser says."""
    gen = _generator()
    result = subprocess.run(
        [str(sglang_python), "-c", gen.EXTRACT], capture_output=True, text=True, check=False, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    fresh, algorithms = gen.release_entry(json.loads(result.stdout))
    catalog = load_catalog()
    assert catalog.tables[VERSION] == fresh
    assert catalog.algorithms[VERSION] == algorithms
    assert "--speculative-ddtree-budget" not in fresh  # the branch's flag is kept apart


def test_release_parser_accepts_the_dflash_profile(sglang_python: Path) -> None:
    p = profile("dflash", sglang_python)
    result = parse_on_host(LocalHost(), str(sglang_python), render_launch(p).argv)
    assert result.importable and result.version == VERSION
    assert result.ok, result


def test_release_parser_rejects_what_only_the_ddtree_branch_has(sglang_python: Path) -> None:
    argv = render_launch(profile("ddtree-b16", sglang_python)).argv
    result = parse_on_host(LocalHost(), str(sglang_python), argv)
    assert result.importable and "--speculative-ddtree-budget" in result.unknown


def test_release_parser_reports_an_invalid_choice(sglang_python: Path) -> None:
    argv = [
        str(sglang_python),
        "-m",
        "sglang.launch_server",
        "--model-path",
        "m",
        "--tool-call-parser",
        "kimi-k2",
    ]
    result = parse_on_host(LocalHost(), str(sglang_python), argv)
    assert result.error is not None and "kimi-k2" in result.error and not result.ok


def test_python_without_sglang_is_reported_clearly() -> None:
    result = parse_on_host(
        LocalHost(), sys.executable, ["python", "-m", "sglang.launch_server", "--port", "1"]
    )
    if result.importable:
        pytest.skip("this interpreter can import sglang itself")
    assert not result.ok and "sglang" in (result.error or "").lower()


def test_sglang_flags_strips_the_launcher() -> None:
    assert sglang_flags(["/p", "-m", "sglang.launch_server", "--a", "1"]) == ["--a", "1"]
    assert sglang_flags(["/p", "-m", "sglang", "serve", "--a"]) == ["--a"]


def test_remote_findings_on_a_real_host(sglang_python: Path) -> None:
    host = LocalHost()
    good = remote_findings(host, profile("dflash", sglang_python))
    assert [f for f in good if f.level == "error"] == []
    bad = remote_findings(host, profile("ddtree-b16", sglang_python))
    assert "remote/unknown-flag" in [f.code for f in bad]
    # without tolerance, an interpreter missing on the host is an error
    missing = remote_findings(host, profile("dflash", sglang_python, "sglang.python=/opt/nothere/bin/python"))
    codes = {f.code: f.level for f in missing}
    assert (
        codes.get("remote/sglang-not-importable") == "error" and codes.get("unit/systemd-verify") == "error"
    )


def test_validate_remote_through_the_cli(sglang_python: Path) -> None:
    def run(*args: str) -> CliResult:
        sets = ["--set", "host.address=local", "--set", f"sglang.python={sglang_python}"]
        return run_k26ctl("validate", *args, "--remote", "--json", *sets, cwd=ROOT, timeout=300)

    ok = run("profiles/dflash.yaml")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "unit/executable-on-host" not in [f["code"] for f in json.loads(ok.stdout)["findings"]]
    # the host's parser reported its release, and the local rules ran again with that release's table
    told = [f for f in json.loads(ok.stdout)["findings"] if f["code"] == "sglang/version-from-host"]
    assert told and VERSION in told[0]["message"]
    ddtree = run("profiles/ddtree-b7.yaml")
    doc = json.loads(ddtree.stdout)
    assert ddtree.returncode == 78 and not doc["valid"]
    assert any(
        f["code"] == "remote/unknown-flag" and "--speculative-ddtree-budget" in f["message"]
        for f in doc["findings"]
    )
