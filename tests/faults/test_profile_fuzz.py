"""Hostile profiles through the real CLI entry: whatever the file holds, `render` and `validate` end
with exit 0, 78 (bad config) or 2 (usage) and a one-line message, never a traceback."""

from __future__ import annotations

import re
import resource
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from k26ctl.profile import Profile
from tests.support.cli import CliResult, run_in_process
from tests.support.tiers import examples

from .helpers import LAB_PROFILES, REPO, assert_clean_failure

ALLOWED = (0, 2, 78)
FUZZ = settings(
    max_examples=examples(150),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _leaf_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    paths: list[str] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        candidates = [annotation, *typing.get_args(annotation)]
        sub = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if sub is not None:
            paths.extend(_leaf_paths(sub, f"{prefix}{name}."))
        else:
            paths.append(f"{prefix}{name}")
    return paths


LEAF_PATHS = _leaf_paths(Profile)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40)
    | st.sampled_from(["", "NONE", "DDTREE", "-1", "0", "1e309", "/opt/x", "yes", "~", "%n", "$(id)", "a\nb"])
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=10,
)
key_paths = st.sampled_from(LEAF_PATHS) | st.text(min_size=1, max_size=12).map(lambda t: f"sglang.{t}")


def _nest(assignments: list[tuple[str, Any]]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for dotted, value in assignments:
        node = root
        parts = dotted.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[parts[-1]] = value
    return root


def _check(run: CliResult, command: str) -> None:
    assert run.exception is None, f"exception escaped the CLI: {run.exception!r}"
    assert "Traceback" not in run.output, run.output
    assert run.returncode in ALLOWED, f"{command}: exit {run.returncode}: {run.output[-2000:]}"
    if run.returncode != 78:
        return
    error_lines = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    if command == "render" or error_lines:
        assert len(error_lines) == 1, run.stderr  # one line (plus its hint), not a dump
    else:
        # validate lists its findings as a report ("error   code: message"), ending with a summary
        assert re.search(r"^error\s+\S+: ", run.output, re.MULTILINE), run.output
        assert "invalid" in run.output, run.output


def _render_and_validate(path: Path, extra: list[str] | None = None) -> None:
    for command in ("render", "validate"):
        _check(run_in_process([command, str(path), *(extra or [])]), command)


@FUZZ
@given(assignments=st.lists(st.tuples(key_paths, values), min_size=1, max_size=6), base=st.booleans())
def test_structured_profiles_never_crash(
    tmp_path: Path, assignments: list[tuple[str, Any]], base: bool
) -> None:
    data = _nest(assignments)
    if base:
        data["extends"] = str(LAB_PROFILES / "none.yaml")
    path = tmp_path / "fuzz.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    _render_and_validate(path)


@FUZZ
@given(text=st.text(max_size=300) | st.binary(max_size=300).map(lambda b: b.decode("latin-1")))
def test_arbitrary_file_contents_never_crash(tmp_path: Path, text: str) -> None:
    path = tmp_path / "raw.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    _render_and_validate(path)


def test_binary_and_wrong_encoding_files(tmp_path: Path) -> None:
    cases = {
        "latin1.yaml": "name: caf\xe9\n".encode("latin-1"),
        "nul.yaml": b"name: a\x00b\n",
        "png.yaml": b"\x89PNG\r\n\x1a\n" + bytes(range(256)),
        "utf16.yaml": "name: x\n".encode("utf-16"),
    }
    for name, blob in cases.items():
        path = tmp_path / name
        path.write_bytes(blob)
        for command in ("render", "validate"):
            run = run_in_process([command, str(path)])
            assert_clean_failure(run, (78,))


@FUZZ
@given(
    overrides=st.lists(
        st.tuples(
            key_paths | st.text(max_size=15),
            st.text(max_size=30) | st.sampled_from(["[", "{a: [", "!!python/object:os.system x"]),
        ).map(lambda kv: f"{kv[0]}={kv[1]}")
        | st.text(max_size=20),
        min_size=1,
        max_size=4,
    )
)
def test_set_overrides_never_crash(overrides: list[str]) -> None:
    extra: list[str] = []
    for item in overrides:
        extra += ["--set", item]
    _render_and_validate(LAB_PROFILES / "none.yaml", extra)


def test_extends_cycle_and_missing_parent(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("extends: b.yaml\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\n")
    (tmp_path / "c.yaml").write_text("extends: nowhere.yaml\n")
    (tmp_path / "d.yaml").write_text(f"extends: {tmp_path}\n")
    for name in ("a.yaml", "c.yaml", "d.yaml"):
        run = run_in_process(["render", str(tmp_path / name)])
        assert_clean_failure(run, (78,))
        assert run.returncode == 78


_ALIAS_BOMB_RUNNER = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1024 * 2**20, 1024 * 2**20))
sys.argv = ["k26ctl", "render", sys.argv[1]]
from k26ctl.cli.app import main
main()
"""


def test_yaml_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    """A 700-byte profile whose aliases expand to 8**9 strings inside a free-form map. It must be refused
    as bad config, not expanded until memory runs out (the child is capped at 1 GiB and 60 s)."""
    lines = ["service:", "  environment:", "    k0: &a0 [" + ", ".join(['"xxxxxxxxxxxxxxxx"'] * 8) + "]"]
    for level in range(1, 9):
        lines.append(f"    k{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 8) + "]")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    assert bomb.stat().st_size < 1024
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _ALIAS_BOMB_RUNNER, str(bomb)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)),
        )
    except subprocess.TimeoutExpired:
        raise AssertionError("render of a 700-byte alias bomb did not finish within 60 s") from None
    run = CliResult(proc.returncode, proc.stdout, proc.stderr)
    assert_clean_failure(run, (78,))


def test_the_fuzzed_commands_really_run() -> None:
    """Guards the fuzz tests above against passing vacuously (for example on a missing command)."""
    for command in ("render", "validate"):
        good = run_in_process([command, str(LAB_PROFILES / "none.yaml")])
        assert good.returncode == 0, good.output
        bad = run_in_process([command, str(LAB_PROFILES / "none.yaml"), "--set", "sglang.port=70000"])
        assert bad.returncode == 78, bad.output
        assert "sglang.port" in bad.stderr
    rendered = run_in_process(["render", str(LAB_PROFILES / "none.yaml")])
    assert "ExecStart=" in rendered.stdout
