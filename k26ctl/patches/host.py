"""Patches on a host's SGLang tree: locate the tree, report, plan, apply and revert.

Every write is one atomic replace of the whole file (Host.write_file_atomic) after the new text was
computed and compiled on the host; the target's sha256 is checked before (nobody changed it since
it was read) and after (the host holds exactly the new text). Before the first write the pre-image
is kept next to the target as `<file>.k26ctl-<patch>.orig`, with a JSON record of both checksums,
so a revert restores the original bytes; without the backup the edits are inverted and the result
is proven by re-applying it.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from k26ctl.errors import PatchError
from k26ctl.patches.engine import State, apply_text, evaluate, revert_text, unified_diff
from k26ctl.patches.model import Patch, load_patches, select_patches
from k26ctl.profile import Profile
from k26ctl.remote.base import Host

# Prints where `sglang` would be imported from, without importing it (find_spec on a top-level
# name only searches sys.path), and the version of that tree. The version comes from the tree's own
# files first: the `sglang-*.dist-info` beside it (a wheel install), then its generated `_version.py`
# or `version.py`; importlib.metadata (slow: it scans every path entry, and all of them when sglang
# has no metadata) only when neither says, as in an editable install whose metadata is elsewhere.
_LOCATE = r"""
import importlib.util, json, os, sys
sys.path[:] = [p for p in sys.path if p not in ("", ".")]
spec = importlib.util.find_spec("sglang")
root = None
if spec is not None:
    locations = list(spec.submodule_search_locations or [])
    root = locations[0] if locations else None

def beside(root):
    parent = os.path.dirname(root)
    try:
        names = [n for n in os.listdir(parent) if n.lower().startswith("sglang-")
                 and n.endswith(".dist-info") and "-" not in n[len("sglang-"):-len(".dist-info")]]
    except OSError:
        return None
    if len(names) != 1:
        return None
    try:
        with open(os.path.join(parent, names[0], "METADATA"), encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip() or None
                if not line.strip():
                    return None
    except OSError:
        return None
    return None

def in_tree(root):
    import re
    for name in ("_version.py", "version.py"):
        try:
            with open(os.path.join(root, name), encoding="utf-8") as handle:
                found = re.search(r"^__version__\s*=\s*(?:\w+\s*=\s*)*[\"']([^\"']+)", handle.read(), re.M)
        except OSError:
            continue
        if found:
            return found.group(1)
    return None

version = (beside(root) or in_tree(root)) if root is not None else None
if version is None:
    try:
        import importlib.metadata as md
        version = md.version("sglang")
    except Exception:
        pass
print(json.dumps({"root": root, "version": version, "python": sys.version.split()[0]}))
"""

# Compiles the bytes on stdin as if they were the file named in argv[1]; nothing is written.
_COMPILE_STDIN = "import sys; compile(sys.stdin.buffer.read(), sys.argv[1], 'exec', dont_inherit=True)"

BACKUP_SUFFIX = ".k26ctl-{name}.orig"
RECORD_SUFFIX = ".k26ctl-{name}.json"


@dataclass(frozen=True)
class SGLangTree:
    root: str
    version: str | None
    python: str


@dataclass(frozen=True)
class PatchState:
    name: str
    state: str  # applied | pending | not-needed | refused
    message: str
    target: str
    sha256: str | None = None
    sglang_version: str | None = None  # from the host's package metadata, when it has any

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PatchAction:
    """What converging one patch would do: apply (listed, pending), revert (applied on the host but
    not listed in the profile) or none. `diff` is the unified diff of the change."""

    name: str
    action: Literal["apply", "revert", "none"]
    state: str
    message: str
    target: str
    diff: str = ""

    @property
    def changes(self) -> bool:
        return self.action != "none"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PatchResult:
    name: str
    action: Literal["apply", "revert"]
    changed: bool
    state: str  # the state after the operation
    message: str
    target: str
    backup_path: str | None = None
    sha256_before: str | None = None
    sha256_after: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _sudo(profile: Profile) -> bool:
    # None lets the host decide (no sudo when logged in as root); False: the tree is the user's own.
    return profile.host.sudo is not False


def _run_python(
    host: Host, profile: Profile, args: Sequence[str], stdin: bytes | None = None, sudo: bool = False
) -> Any:
    """The profile's Python with the unit's environment (so PYTHONPATH finds the same tree)."""
    return host.run(
        [profile.sglang.python, *args],
        env=dict(profile.service.environment) or None,
        stdin=stdin,
        timeout=profile.host.command_timeout,
        sudo=sudo,
    )


def locate_sglang(host: Host, profile: Profile) -> SGLangTree:
    """Where the profile's Python finds the `sglang` package, with the unit's environment."""
    result = _run_python(host, profile, ["-c", _LOCATE])
    if not result.ok:
        detail = (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]
        raise PatchError(
            f"cannot run {profile.sglang.python} on {host.name}: {detail}",
            "check sglang.python in the profile",
        )
    try:
        found = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise PatchError(f"unexpected output from {profile.sglang.python}: {result.stdout[:200]!r}") from None
    root = profile.sglang.package_root or found.get("root")
    if not root:
        raise PatchError(
            f"{profile.sglang.python} on {host.name} cannot find the sglang package",
            "set service.environment.PYTHONPATH or sglang.package_root in the profile",
        )
    return SGLangTree(root=str(root), version=found.get("version"), python=profile.sglang.python)


def find_package_root(host: Host, profile: Profile) -> str:
    """The `sglang/` directory the service imports (sglang.package_root in the profile wins)."""
    return locate_sglang(host, profile).root


def _target_path(tree: SGLangTree, patch: Patch) -> str:
    return posixpath.join(tree.root, patch.target)


def _read_text(host: Host, profile: Profile, path: str, patch: Patch) -> tuple[bytes, str]:
    data = host.read_file(path, sudo=_sudo(profile))
    if data is None:
        raise PatchError(
            f"patch {patch.name}: target {path} does not exist on {host.name}",
            "this SGLang tree has no such file; check the release or sglang.package_root",
        )
    try:
        return data, data.decode("utf-8")
    except UnicodeDecodeError:
        raise PatchError(f"patch {patch.name}: {path} is not UTF-8 text") from None


def _version_note(tree: SGLangTree, patch: Patch) -> str:
    if tree.version and patch.versions and tree.version not in patch.versions:
        return f" (SGLang {tree.version}; patch written for {', '.join(patch.versions)})"
    return ""


def _state_of(host: Host, profile: Profile, tree: SGLangTree, patch: Patch) -> tuple[PatchState, str | None]:
    path = _target_path(tree, patch)
    try:
        data, text = _read_text(host, profile, path, patch)
    except PatchError as exc:
        return PatchState(patch.name, State.REFUSED.value, exc.message, path, None, tree.version), None
    evaluation = evaluate(patch, text)
    message = evaluation.message + (_version_note(tree, patch) if evaluation.state is State.REFUSED else "")
    return PatchState(patch.name, evaluation.state.value, message, path, _sha(data), tree.version), text


def _profile_patches(profile: Profile, names: Iterable[str] | None, directory: Path | None) -> list[Patch]:
    return select_patches(list(names) if names is not None else profile.patches, directory)


def patch_status(
    host: Host, profile: Profile, names: Iterable[str] | None = None, *, patches_dir: Path | None = None
) -> list[PatchState]:
    """The state of each named patch (default: the profile's `patches:`) on the host's tree."""
    patches = _profile_patches(profile, names, patches_dir)
    if not patches:
        return []
    tree = locate_sglang(host, profile)
    return [_state_of(host, profile, tree, p)[0] for p in patches]


def plan_patches(
    host: Host,
    profile: Profile,
    *,
    patches_dir: Path | None = None,
    locate: Callable[[], SGLangTree] | None = None,
) -> list[PatchAction]:
    """Converge the tree to the profile: apply its pending patches, revert shipped patches that are
    applied on the host but no longer listed. Refused patches listed in the profile raise, so a
    deploy stops before changing anything. `locate` gives the tree when the caller has already
    asked the host for it (locate_sglang runs the host's Python: about 0.1 s)."""
    listed = select_patches(profile.patches, patches_dir)
    others = [p for name, p in load_patches(patches_dir).items() if name not in profile.patches]
    if not listed and not others:
        return []
    try:
        tree = locate() if locate is not None else locate_sglang(host, profile)
    except PatchError:
        if listed:
            raise
        return []  # no tree found and nothing to apply: nothing can be reverted either
    actions: list[PatchAction] = []
    for patch in listed:
        state, text = _state_of(host, profile, tree, patch)
        if state.state == State.REFUSED.value:
            raise PatchError(f"patch {patch.name}: {state.message}", _refusal_hint(patch))
        if state.state == State.PENDING.value and text is not None:
            diff = unified_diff(text, apply_text(patch, text), patch.target)
            actions.append(PatchAction(patch.name, "apply", state.state, state.message, state.target, diff))
        else:
            actions.append(PatchAction(patch.name, "none", state.state, state.message, state.target))
    for patch in others:
        state, text = _state_of(host, profile, tree, patch)
        if state.state == State.APPLIED.value and text is not None:
            diff = unified_diff(text, revert_text(patch, text), patch.target)
            message = "applied on the host but not listed in the profile: would revert"
            actions.append(PatchAction(patch.name, "revert", state.state, message, state.target, diff))
    return actions


def _refusal_hint(patch: Patch) -> str:
    return (
        f"the host's file differs from the releases {patch.name} was written for "
        f"({', '.join(patch.versions) or 'none listed'}); run `k26ctl patch check --source DIR` on a copy"
    )


# ---- writing ---------------------------------------------------------------------------------------


def _compile_check(host: Host, profile: Profile, path: str, data: bytes, patch: Patch) -> None:
    result = _run_python(host, profile, ["-c", _COMPILE_STDIN, path], stdin=data)
    if not result.ok:
        detail = (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]
        raise PatchError(
            f"patch {patch.name}: the new {path} does not compile with {profile.sglang.python}: {detail}",
            "nothing was written; fix the patch definition",
        )


def _byte_compile(host: Host, profile: Profile, path: str) -> str | None:
    """Refresh the file's .pyc with the service's Python; the error text when it fails."""
    result = _run_python(host, profile, ["-m", "py_compile", path], sudo=_sudo(profile))  # writes __pycache__
    if result.ok:
        return None
    return (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]


def _write(host: Host, profile: Profile, path: str, data: bytes, expected_before: str, patch: Patch) -> str:
    """Atomic replace, guarded by the checksum the new text was computed from; returns the new sha."""
    sudo = _sudo(profile)
    current = host.sha256(path, sudo=sudo)
    if current != expected_before:
        raise PatchError(
            f"patch {patch.name}: {path} changed on {host.name} while it was being patched",
            "nothing was written; run the command again",
        )
    host.write_file_atomic(path, data, sudo=sudo, backup=False)
    after = host.sha256(path, sudo=sudo)
    if after != _sha(data):
        raise PatchError(
            f"patch {patch.name}: {path} on {host.name} does not hold the written text (sha256 {after})",
            "inspect the file; the backup next to it holds the original",
        )
    return after


def _read_record(host: Host, profile: Profile, path: str, patch: Patch) -> dict[str, Any] | None:
    raw = host.read_file(path + RECORD_SUFFIX.format(name=patch.name), sudo=_sudo(profile))
    if raw is None:
        return None
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _apply_one(host: Host, profile: Profile, tree: SGLangTree, patch: Patch) -> PatchResult:
    path = _target_path(tree, patch)
    data, text = _read_text(host, profile, path, patch)
    before = _sha(data)
    evaluation = evaluate(patch, text)
    if evaluation.state in (State.APPLIED, State.NOT_NEEDED):
        return PatchResult(
            patch.name, "apply", False, evaluation.state.value, evaluation.message, path, None, before, before
        )
    if evaluation.state is State.REFUSED:
        raise PatchError(
            f"patch {patch.name}: refusing {path}: {evaluation.message}{_version_note(tree, patch)}",
            _refusal_hint(patch),
        )
    new_data = apply_text(patch, text).encode("utf-8")
    _compile_check(host, profile, path, new_data, patch)
    sudo = _sudo(profile)
    backup_path = path + BACKUP_SUFFIX.format(name=patch.name)
    record = {
        "patch": patch.name,
        "target": path,
        "pre_sha256": before,
        "post_sha256": _sha(new_data),
        "sglang_version": tree.version,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    host.write_file_atomic(backup_path, data, sudo=sudo, backup=False)
    host.write_file_atomic(
        path + RECORD_SUFFIX.format(name=patch.name),
        (json.dumps(record, indent=2) + "\n").encode(),
        sudo=sudo,
        backup=False,
    )
    after = _write(host, profile, path, new_data, before, patch)
    problem = _byte_compile(host, profile, path)
    if problem is not None:
        _write(host, profile, path, data, after, patch)
        raise PatchError(
            f"patch {patch.name}: py_compile failed on {host.name} ({problem}); the original was restored",
            "check the Python at sglang.python",
        )
    message = f"applied {len(patch.edits)} edit{'s' * (len(patch.edits) != 1)}"
    return PatchResult(
        patch.name, "apply", True, State.APPLIED.value, message, path, backup_path, before, after
    )


def _revert_one(host: Host, profile: Profile, tree: SGLangTree, patch: Patch) -> PatchResult:
    path = _target_path(tree, patch)
    data, text = _read_text(host, profile, path, patch)
    before = _sha(data)
    evaluation = evaluate(patch, text)
    if evaluation.state in (State.PENDING, State.NOT_NEEDED):
        message = "not applied: nothing to revert"
        return PatchResult(
            patch.name, "revert", False, evaluation.state.value, message, path, None, before, before
        )
    if evaluation.state is State.REFUSED:
        raise PatchError(
            f"patch {patch.name}: cannot revert {path}: {evaluation.message}", _refusal_hint(patch)
        )
    sudo = _sudo(profile)
    backup_path = path + BACKUP_SUFFIX.format(name=patch.name)
    record = _read_record(host, profile, path, patch)
    backup = host.read_file(backup_path, sudo=sudo)
    restored: bytes
    how: str
    if (
        record is not None
        and backup is not None
        and record.get("post_sha256") == before
        and record.get("pre_sha256") == _sha(backup)
    ):
        restored, how = backup, "restored the backup"
    else:
        restored = revert_text(patch, text).encode("utf-8")
        # The inversion is trusted only if applying the patch again gives back today's file.
        if apply_text(patch, restored.decode("utf-8")).encode("utf-8") != data:
            raise PatchError(
                f"patch {patch.name}: cannot invert the edits in {path} exactly",
                f"restore {path} from the SGLang release by hand",
            )
        if (
            record is not None
            and record.get("post_sha256") == before
            and record.get("pre_sha256") != _sha(restored)
        ):
            raise PatchError(
                f"patch {patch.name}: inverting the edits in {path} does not give the recorded original",
                f"compare with {backup_path} or reinstall SGLang",
            )
        how = "inverted the edits (no usable backup)"
    _compile_check(host, profile, path, restored, patch)
    after = _write(host, profile, path, restored, before, patch)
    problem = _byte_compile(host, profile, path)
    if problem is not None:
        raise PatchError(f"patch {patch.name}: reverted, but py_compile failed on {host.name}: {problem}")
    host.run(["rm", "-f", "--", backup_path, path + RECORD_SUFFIX.format(name=patch.name)], sudo=sudo)
    return PatchResult(patch.name, "revert", True, State.PENDING.value, how, path, None, before, after)


def apply_patches(
    host: Host, profile: Profile, names: Iterable[str] | None = None, *, patches_dir: Path | None = None
) -> list[PatchResult]:
    """Apply the named patches (default: the profile's) in order. A refusal anywhere in the set is
    raised before the first write; patches already applied or not needed report changed=False."""
    patches = _profile_patches(profile, names, patches_dir)
    if not patches:
        return []
    tree = locate_sglang(host, profile)
    for patch in patches:  # refuse before the first write, not halfway through the set
        state, _ = _state_of(host, profile, tree, patch)
        if state.state == State.REFUSED.value:
            raise PatchError(
                f"patch {patch.name}: refusing {state.target}: {state.message}", _refusal_hint(patch)
            )
    return [_apply_one(host, profile, tree, p) for p in patches]


def revert_patches(
    host: Host, profile: Profile, names: Iterable[str] | None = None, *, patches_dir: Path | None = None
) -> list[PatchResult]:
    """Revert the named patches (default: the profile's), last applied first."""
    patches = _profile_patches(profile, names, patches_dir)
    if not patches:
        return []
    tree = locate_sglang(host, profile)
    return [_revert_one(host, profile, tree, p) for p in reversed(patches)]


def execute_plan(
    host: Host, profile: Profile, actions: Iterable[PatchAction], *, patches_dir: Path | None = None
) -> list[PatchResult]:
    """Carry out the changing actions of plan_patches (for deploy)."""
    results: list[PatchResult] = []
    for action in actions:
        if action.action == "apply":
            results.extend(apply_patches(host, profile, [action.name], patches_dir=patches_dir))
        elif action.action == "revert":
            results.extend(revert_patches(host, profile, [action.name], patches_dir=patches_dir))
    return results
