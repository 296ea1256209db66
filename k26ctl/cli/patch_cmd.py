"""`k26ctl patch list | status | apply | revert | check`: source patches for the host's SGLang tree."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from k26ctl.cli.common import (
    accept_new_host_key_option,
    json_option,
    print_json,
    profile_argument,
    set_option,
)

if TYPE_CHECKING:
    from k26ctl.patches import PatchResult
    from k26ctl.profile import Profile
    from k26ctl.remote.base import Host

    PatchChange = Callable[[Host, Profile, list[str] | None], list[PatchResult]]

HELP = "Source patches for the host's SGLang tree (templates/patches/*.yaml)."

NAME_HELP = "Only this patch (repeatable; default: the profile's patches list)."


def _names(name: list[str]) -> list[str] | None:
    return list(name) if name else None


def _host_and_profile(profile: str, overrides: list[str], accept_new_host_key: bool) -> tuple[Host, Profile]:
    from k26ctl.profile import load_profile
    from k26ctl.remote import connect

    loaded = load_profile(profile, overrides)
    return connect(loaded.profile, accept_new_host_key=accept_new_host_key), loaded.profile


def list_cmd(json_out: bool = json_option()) -> None:
    """Show the shipped patch set (local, no host)."""
    from k26ctl.cli.present.patch import patch_list_json, print_patch_list
    from k26ctl.patches import load_patches

    patches = list(load_patches().values())
    if json_out:
        print_json({"patches": patch_list_json(patches)}, "patch-list")
    else:
        print_patch_list(patches)


def status_cmd(
    profile: str = profile_argument(),
    overrides: list[str] = set_option(),
    name: list[str] = typer.Option([], "--name", "-n", help=NAME_HELP),
    json_out: bool = json_option(),
    accept_new_host_key: bool = accept_new_host_key_option(),
) -> None:
    """State of each patch on the profile's host: applied, pending, not-needed or refused."""
    from k26ctl.patches import patch_status

    host, prof = _host_and_profile(profile, overrides, accept_new_host_key)
    with host:
        states = patch_status(host, prof, _names(name))
    if json_out:
        print_json({"patches": [s.to_json() for s in states]}, "patch-states")
    else:
        from k26ctl.cli.present.patch import print_states

        print_states(states)
    if any(s.state == "refused" for s in states):
        raise typer.Exit(1)


def _print_results(results: list[PatchResult], json_out: bool) -> None:
    if json_out:
        print_json({"patches": [r.to_json() for r in results]}, "patch-states")
        return
    from k26ctl.cli.present.patch import print_results

    print_results(results)


def _change_locked(
    action: PatchChange, profile: str, overrides: list[str], name: list[str], accept_new_host_key: bool
) -> list[PatchResult]:
    """Run apply or revert under the service's host lock, so a manual patch never races a deploy."""
    from k26ctl.deploy.session import operator

    host, prof = _host_and_profile(profile, overrides, accept_new_host_key)
    with host, host.lock(prof.service.name, holder=operator()):
        return action(host, prof, _names(name))


def apply_cmd(
    profile: str = profile_argument(),
    overrides: list[str] = set_option(),
    name: list[str] = typer.Option([], "--name", "-n", help=NAME_HELP),
    json_out: bool = json_option(),
    accept_new_host_key: bool = accept_new_host_key_option(),
) -> None:
    """Apply patches on the profile's host (idempotent; refuses on a changed anchor)."""
    from k26ctl.patches import apply_patches

    _print_results(_change_locked(apply_patches, profile, overrides, name, accept_new_host_key), json_out)


def revert_cmd(
    profile: str = profile_argument(),
    overrides: list[str] = set_option(),
    name: list[str] = typer.Option([], "--name", "-n", help=NAME_HELP),
    json_out: bool = json_option(),
    accept_new_host_key: bool = accept_new_host_key_option(),
) -> None:
    """Restore the original files on the profile's host (from the backup, else by inverting)."""
    from k26ctl.patches import revert_patches

    _print_results(_change_locked(revert_patches, profile, overrides, name, accept_new_host_key), json_out)


def check_cmd(
    sglang_version: str | None = typer.Option(
        None, "--sglang-version", help="Download this SGLang release wheel (cached) and check it."
    ),
    source: Path | None = typer.Option(
        None, "--source", help="Check a local SGLang tree (the sglang/ dir, its parent or a checkout)."
    ),
    name: list[str] = typer.Option([], "--name", "-n", help="Only this patch (default: all)."),
    show_diff: bool = typer.Option(False, "--diff", help="Print the unified diff of each applied patch."),
    json_out: bool = json_option(),
) -> None:
    """Apply the whole set to a local copy of a release; exit 1 when a patch is refused."""
    import tempfile

    from k26ctl.errors import UsageError
    from k26ctl.patches import load_patches, select_patches
    from k26ctl.patches.release import check_release, check_tree, source_root

    if (sglang_version is None) == (source is None):
        raise UsageError("give exactly one of --sglang-version or --source", "e.g. --sglang-version 0.5.15")
    patches = select_patches(name) if name else list(load_patches().values())
    if source is not None:
        report = check_tree(source_root(source), patches)
    else:
        with tempfile.TemporaryDirectory(prefix="k26ctl-check-") as tmp:
            report = check_release(str(sglang_version), patches, Path(tmp))
    if json_out:
        print_json(report.to_json(), "patch-check")
    else:
        from k26ctl.cli.present.patch import print_check

        print_check(report, show_diff=show_diff)
    if not report.ok:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    patch_app = typer.Typer(help=HELP, no_args_is_help=True)
    patch_app.command("list")(list_cmd)
    patch_app.command("status")(status_cmd)
    patch_app.command("apply")(apply_cmd)
    patch_app.command("revert")(revert_cmd)
    patch_app.command("check")(check_cmd)
    app.add_typer(patch_app, name="patch")
