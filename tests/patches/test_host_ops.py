"""Patch operations on a tree reached through a Host: locating sglang, plans, refusals, faults."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from k26ctl.errors import PatchError
from k26ctl.patches import (
    apply_patches,
    execute_plan,
    find_package_root,
    locate_sglang,
    patch_status,
    plan_patches,
    revert_patches,
)
from k26ctl.patches.host import BACKUP_SUFFIX
from k26ctl.profile import Profile
from k26ctl.remote.base import WriteResult
from tests.patches.patch_support import RecordingHost, make_profile

SOURCE = "class Backend:\n    def __init__(self, runner):\n        self.width = runner.args.width\n"
GOOD = """name: widen
summary: widen the backend
target: srt/backend.py
versions: ["1.0"]
edits:
  - anchor: self.width = runner.args.width
    insert_after: |
      if runner.tree:
          self.width = runner.budget + 1
"""
BROKEN = """name: broken
summary: inserts a syntax error
target: srt/backend.py
edits:
  - anchor: self.width = runner.args.width
    insert_after: "def oops(:"
"""


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    directory = tmp_path / "catalog"
    directory.mkdir()
    (directory / "widen.yaml").write_text(GOOD)
    (directory / "broken.yaml").write_text(BROKEN)
    return directory


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "site" / "sglang"
    (root / "srt").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "srt" / "backend.py").write_text(SOURCE)
    return root


def _profile(root: Path | None, patches: Sequence[str] = ("widen",), **kw: object) -> Profile:
    return make_profile(root, patches, **kw)


def test_find_package_root_through_the_unit_environment(
    tree: Path, host: RecordingHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoy = tmp_path / "cwd" / "sglang"
    decoy.mkdir(parents=True)
    (decoy / "__init__.py").write_text("raise SystemExit('imported the decoy')\n")
    monkeypatch.chdir(decoy.parent)  # a ./sglang in the working directory must not win
    dist = tree.parent / "sglang-9.9.9.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 9.9.9\n")
    profile = Profile.model_validate(
        {"sglang": {"python": sys.executable}, "service": {"environment": {"PYTHONPATH": str(tree.parent)}}}
    )
    located = locate_sglang(host, profile)
    assert located.root == str(tree) and located.version == "9.9.9"
    assert find_package_root(host, profile) == str(tree)
    override = profile.model_copy(
        update={"sglang": profile.sglang.model_copy(update={"package_root": "/x/sglang"})}
    )
    assert find_package_root(host, override) == "/x/sglang"


def _located_version(host: RecordingHost, tree: Path) -> str | None:
    profile = Profile.model_validate(
        {"sglang": {"python": sys.executable}, "service": {"environment": {"PYTHONPATH": str(tree.parent)}}}
    )
    return locate_sglang(host, profile).version


def test_the_version_comes_from_the_tree_that_is_imported(tree: Path, host: RecordingHost) -> None:
    # setuptools-scm writes a chained assignment into _version.py (SGLang's wheels and editable installs)
    (tree / "_version.py").write_text("version: str\n__version__ = version = '0.5.23'\n")
    assert _located_version(host, tree) == "0.5.23"
    (tree / "_version.py").unlink()
    (tree / "version.py").write_text('__version__ = "0.5.15"\n')
    assert _located_version(host, tree) == "0.5.15"
    # the wheel's metadata beside the tree says more than a file inside it
    dist = tree.parent / "sglang-0.5.16.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.4\nName: sglang\nVersion: 0.5.16\n\nbody\n")
    (tree.parent / "sglang_router-0.3.2.dist-info").mkdir()  # another package's metadata is not sglang's
    assert _located_version(host, tree) == "0.5.16"
    # two metadata directories beside it (a broken upgrade): neither is trusted, the tree's file is
    second = tree.parent / "sglang-0.5.17.dist-info"
    second.mkdir()
    (second / "METADATA").write_text("Metadata-Version: 2.4\nName: sglang\nVersion: 0.5.17\n")
    assert _located_version(host, tree) == "0.5.15"


def test_locating_fails_clearly(host: RecordingHost, tmp_path: Path) -> None:
    empty = Profile.model_validate(
        {"sglang": {"python": sys.executable}, "service": {"environment": {"PYTHONPATH": str(tmp_path)}}}
    )
    with pytest.raises(PatchError, match="cannot find the sglang package") as info:
        find_package_root(host, empty)
    assert "PYTHONPATH" in (info.value.hint or "")
    missing = Profile.model_validate({"sglang": {"python": str(tmp_path / "no-python")}})
    with pytest.raises(PatchError, match="cannot run"):
        find_package_root(host, missing)


def test_plan_apply_and_converge_back(tree: Path, catalog: Path, host: RecordingHost) -> None:
    target = tree / "srt" / "backend.py"
    listed = _profile(tree)
    [action] = plan_patches(host, listed, patches_dir=catalog)
    assert action.action == "apply" and action.changes
    assert "+        if runner.tree:" in action.diff and action.diff.startswith("--- a/srt/backend.py")
    assert target.read_text() == SOURCE  # planning writes nothing
    [result] = execute_plan(host, listed, [action], patches_dir=catalog)
    assert result.changed and "self.width = runner.budget + 1" in target.read_text()
    assert [a.action for a in plan_patches(host, listed, patches_dir=catalog)] == ["none"]

    # a profile that no longer lists the patch reverts it
    unlisted = _profile(tree, patches=())
    [back] = plan_patches(host, unlisted, patches_dir=catalog)
    assert back.action == "revert" and "-        if runner.tree:" in back.diff
    execute_plan(host, unlisted, [back], patches_dir=catalog)
    assert target.read_text() == SOURCE
    assert plan_patches(host, unlisted, patches_dir=catalog) == []


def test_a_result_that_does_not_compile_is_never_written(
    tree: Path, catalog: Path, host: RecordingHost
) -> None:
    target = tree / "srt" / "backend.py"
    with pytest.raises(PatchError, match="does not compile"):
        apply_patches(host, _profile(tree, ["broken"]), patches_dir=catalog)
    assert target.read_text() == SOURCE and host.writes == []


def test_refusal_anywhere_in_the_set_writes_nothing(tree: Path, catalog: Path, host: RecordingHost) -> None:
    (catalog / "other.yaml").write_text(
        GOOD.replace("name: widen", "name: other").replace("args.width", "args.gone")
    )
    with pytest.raises(PatchError, match="other"):
        apply_patches(host, _profile(tree, ["widen", "other"]), patches_dir=catalog)
    assert (tree / "srt" / "backend.py").read_text() == SOURCE and host.writes == []
    states = {
        s.name: s.state for s in patch_status(host, _profile(tree, ["widen", "other"]), patches_dir=catalog)
    }
    assert states == {"widen": "pending", "other": "refused"}


class RacingHost(RecordingHost):
    """Another operator edits the target between our read and our write."""

    def __init__(self, target: Path) -> None:
        super().__init__()
        self.target = target

    def write_file_atomic(
        self, path: str, data: bytes, *, mode: int | None = None, sudo: bool = False, backup: bool = True
    ) -> WriteResult:
        if path.endswith(BACKUP_SUFFIX.format(name="widen")):
            self.target.write_text(SOURCE + "# edited meanwhile\n")
        return super().write_file_atomic(path, data, mode=mode, sudo=sudo, backup=backup)


def test_a_target_changed_while_patching_is_left_alone(tree: Path, catalog: Path) -> None:
    target = tree / "srt" / "backend.py"
    host = RacingHost(target)
    with pytest.raises(PatchError, match="changed on testhost while it was being patched"):
        apply_patches(host, _profile(tree), patches_dir=catalog)
    assert target.read_text() == SOURCE + "# edited meanwhile\n"
    assert str(target) not in host.writes


def test_failed_byte_compile_restores_the_original(tree: Path, catalog: Path, host: RecordingHost) -> None:
    """py_compile cannot write its .pyc when __pycache__ is a plain file: a real on-host failure."""
    target = tree / "srt" / "backend.py"
    (tree / "srt" / "__pycache__").write_text("not a directory")
    with pytest.raises(PatchError, match=r"py_compile failed .* the original was restored"):
        apply_patches(host, _profile(tree), patches_dir=catalog)
    assert target.read_text() == SOURCE
    assert hashlib.sha256(target.read_bytes()).hexdigest() == hashlib.sha256(SOURCE.encode()).hexdigest()


def test_missing_target_is_refused(tree: Path, catalog: Path, host: RecordingHost) -> None:
    (tree / "srt" / "backend.py").unlink()
    [state] = patch_status(host, _profile(tree), patches_dir=catalog)
    assert state.state == "refused" and "does not exist" in state.message
    with pytest.raises(PatchError, match="does not exist"):
        apply_patches(host, _profile(tree), patches_dir=catalog)
    assert revert_patches(host, _profile(tree, ()), patches_dir=catalog) == []


def test_plan_without_listed_patches_tolerates_a_missing_tree(
    catalog: Path, host: RecordingHost, tmp_path: Path
) -> None:
    nowhere = Profile.model_validate(
        {"sglang": {"python": sys.executable}, "service": {"environment": {"PYTHONPATH": str(tmp_path)}}}
    )
    assert plan_patches(host, nowhere, patches_dir=catalog) == []
    listed = nowhere.model_copy(update={"patches": ["widen"]})
    with pytest.raises(PatchError, match="cannot find the sglang package"):
        plan_patches(host, listed, patches_dir=catalog)
