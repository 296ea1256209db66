"""The shipped patch set against real SGLang release sources (wheels fetched with pip download)."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import pytest

from k26ctl.errors import PatchError
from k26ctl.patches import apply_patches, load_patches, patch_status, plan_patches, revert_patches
from k26ctl.patches.host import BACKUP_SUFFIX, RECORD_SUFFIX
from k26ctl.patches.release import check_tree
from tests.patches.patch_support import PATCH, TARGET, RecordingHost, ReleaseSources, make_profile
from tests.support.cli import CliResult, run_k26ctl

pytestmark = pytest.mark.network_sglang

PATCHED_RELEASES = ["0.5.14", "0.5.15", "0.5.16"]
FIXED_RELEASES = ["0.5.17", "0.5.21"]
INIT_LINE = "self.num_draft_tokens = model_runner.server_args.speculative_num_draft_tokens"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("version", PATCHED_RELEASES)
def test_apply_reapply_revert_on_release(
    version: str, releases: ReleaseSources, host: RecordingHost, tmp_path: Path
) -> None:
    root = releases.copy(version, tmp_path)
    target = root / TARGET
    original = target.read_bytes()
    profile = make_profile(root)

    assert [s.state for s in patch_status(host, profile)] == ["pending"]
    [first] = apply_patches(host, profile)
    assert first.changed and first.state == "applied"
    assert first.sha256_before == hashlib.sha256(original).hexdigest()
    assert first.sha256_after == _sha(target) != first.sha256_before
    patched = target.read_text()
    assert "self.num_draft_tokens = model_runner.server_args.speculative_ddtree_budget + 1" in patched
    # the init line is kept and the new lines come right after it, at its indentation
    lines = patched.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip() == INIT_LINE)
    assert lines[at + 1].startswith("        # k26ctl patch triton-ddtree-verify-width: ")
    # the backup holds the original bytes; the on-host byte-compile left a fresh .pyc
    assert first.backup_path is not None and Path(first.backup_path).read_bytes() == original
    assert Path(importlib.util.cache_from_source(str(target))).is_file()
    compile(patched, str(target), "exec")

    [again] = apply_patches(host, profile)
    assert not again.changed and again.state == "applied" and again.message == "already applied"
    assert target.read_text() == patched
    assert [s.state for s in patch_status(host, profile)] == ["applied"]
    assert [a.action for a in plan_patches(host, profile)] == ["none"]

    [undone] = revert_patches(host, profile)
    assert undone.changed and undone.message == "restored the backup"
    assert target.read_bytes() == original
    assert not Path(str(target) + BACKUP_SUFFIX.format(name=PATCH)).exists()
    assert not Path(str(target) + RECORD_SUFFIX.format(name=PATCH)).exists()
    [noop] = revert_patches(host, profile)
    assert not noop.changed and target.read_bytes() == original


@pytest.mark.parametrize(
    ("version", "backup"),
    [*((version, "missing") for version in PATCHED_RELEASES), ("0.5.15", "stale")],
)
def test_revert_without_a_trusted_backup_inverts_byte_for_byte(
    version: str, backup: str, releases: ReleaseSources, host: RecordingHost, tmp_path: Path
) -> None:
    """A missing backup, or one whose checksum does not match its record, is not used: the edits
    are inverted."""
    root = releases.copy(version, tmp_path)
    target = root / TARGET
    original = target.read_bytes()
    profile = make_profile(root)
    [result] = apply_patches(host, profile)
    assert result.backup_path is not None
    if backup == "missing":
        Path(result.backup_path).unlink()
    else:
        Path(result.backup_path).write_bytes(b"# not the original\n")
    [undone] = revert_patches(host, profile)
    assert undone.changed and undone.message.startswith("inverted the edits")
    assert target.read_bytes() == original


def test_refuses_a_changed_anchor_and_writes_nothing(
    releases: ReleaseSources, host: RecordingHost, tmp_path: Path
) -> None:
    root = releases.copy("0.5.15", tmp_path)
    target = root / TARGET
    text = target.read_text()
    assert text.count(INIT_LINE) == 1
    changed = text.replace(INIT_LINE, INIT_LINE.replace("server_args.", "server_args_v2."))
    target.write_text(changed)
    before = _sha(target)

    [state] = patch_status(host, make_profile(root))
    assert state.state == "refused" and "not found" in state.message
    with pytest.raises(PatchError, match="not found") as info:
        apply_patches(host, make_profile(root))
    assert info.value.exit_code == 1 and info.value.hint
    with pytest.raises(PatchError):
        plan_patches(host, make_profile(root))
    assert _sha(target) == before
    assert host.writes == []
    assert not Path(str(target) + BACKUP_SUFFIX.format(name=PATCH)).exists()


def test_refuses_a_wrong_match_count(releases: ReleaseSources, host: RecordingHost, tmp_path: Path) -> None:
    root = releases.copy("0.5.16", tmp_path)
    target = root / TARGET
    lines = target.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.strip() == INIT_LINE)
    lines.insert(at, lines[at])  # the anchor now appears twice
    target.write_text("".join(lines))
    before = _sha(target)
    with pytest.raises(PatchError, match="matches 2 times, expected 1"):
        apply_patches(host, make_profile(root))
    assert _sha(target) == before and host.writes == []


def test_a_prefix_is_not_a_whole_line_match(
    releases: ReleaseSources, host: RecordingHost, tmp_path: Path
) -> None:
    """The init line followed by more text on the same line is a different line: refused."""
    root = releases.copy("0.5.14", tmp_path)
    target = root / TARGET
    target.write_text(target.read_text().replace(INIT_LINE, INIT_LINE + " or 8"))
    [state] = patch_status(host, make_profile(root))
    assert state.state == "refused"


@pytest.mark.parametrize("version", FIXED_RELEASES)
def test_not_needed_on_fixed_releases(
    version: str, releases: ReleaseSources, host: RecordingHost, tmp_path: Path
) -> None:
    root = releases.copy(version, tmp_path)
    target = root / TARGET
    before = _sha(target)
    profile = make_profile(root)
    [state] = patch_status(host, profile)
    assert state.state == "not-needed"
    marker = "spec_info.draft_token_num" if version == "0.5.17" else "spec_info.num_tokens_per_req"
    assert marker in state.message
    [result] = apply_patches(host, profile)
    assert not result.changed and result.state == "not-needed"
    assert [a.action for a in plan_patches(host, profile)] == ["none"]
    assert _sha(target) == before and host.writes == []


def test_check_tree_reports_each_release(releases: ReleaseSources, tmp_path: Path) -> None:
    patches = [load_patches()[PATCH]]  # the production fix (lab-verify-width-cap has its own test)
    for version in PATCHED_RELEASES:
        report = check_tree(releases.copy(version, tmp_path), patches)
        assert report.ok and [o.result for o in report.outcomes] == ["applied"]
        assert (
            "+            self.num_draft_tokens = model_runner.server_args.speculative_ddtree_budget + 1"
            in (report.outcomes[0].diff)
        )
    report = check_tree(releases.copy("0.5.17", tmp_path), patches)
    assert report.ok and [o.result for o in report.outcomes] == ["not-needed"]


def _cli(*args: str) -> CliResult:
    return run_k26ctl("patch", *args, timeout=300)


def test_cli_check_release_and_refused_source(releases: ReleaseSources, tmp_path: Path) -> None:
    releases.copy("0.5.15", tmp_path / "warm")  # downloads into the cache (or skips without the index)
    ok = _cli("check", "--sglang-version", "0.5.15", "--json")
    assert ok.returncode == 0, ok.stderr
    assert '"result": "applied"' in ok.stdout

    root = releases.copy("0.5.15", tmp_path)
    target = root / TARGET
    target.write_text(target.read_text().replace(INIT_LINE, "self.num_draft_tokens = 8"))
    refused = _cli("check", "--source", str(root.parent))
    assert refused.returncode == 1
    assert "triton-ddtree-verify-width: refused" in refused.stdout

    bad = _cli("check", "--sglang-version", "--index-url=http://example.invalid")
    assert bad.returncode == 78 and "not a release version" in bad.stderr


def test_check_downloads_into_an_empty_cache(tmp_path: Path) -> None:
    """As on a fresh machine: nothing cached, `patch check` fetches the wheel with pip and reuses it."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    argv = ["patch", "check", "--sglang-version", "0.5.14"]
    first = run_k26ctl(*argv, timeout=300, env=env)
    if first.returncode == 69:
        pytest.skip(f"pip cannot reach the package index: {first.stderr.strip()}")
    assert first.returncode == 0, first.stderr
    assert "triton-ddtree-verify-width: applied" in first.stdout
    wheels = list((tmp_path / "cache" / "k26ctl" / "sglang-wheels").glob("sglang-0.5.14-*.whl"))
    assert len(wheels) == 1
    stamp = wheels[0].stat().st_mtime_ns
    second = run_k26ctl(*argv, timeout=300, env=env)
    assert second.returncode == 0 and wheels[0].stat().st_mtime_ns == stamp
