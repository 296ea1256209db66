"""Helpers for the end-to-end deploy tests on a lab host: profile overrides, JSON runs, reading the host."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from k26ctl.resources import project_root

LAB_PROFILES = project_root() / "profiles" / "lab"
QUICK_SUITE = Path(__file__).parent / "data" / "quick-suite.yaml"
UNPATCHED = str(LAB_PROFILES / "ddtree-b16.yaml")
PATCHED = str(LAB_PROFILES / "ddtree-b16-patched.yaml")
PATCH = "triton-ddtree-verify-width"


def lab_sets(lab: Any, *more: str) -> list[str]:
    """--set arguments pointing a lab profile at the test's lab host, with the short smoke suite."""
    args = ["--set", f"host.lab={lab.name}", "--set", f"smoke.suite={QUICK_SUITE}"]
    for item in more:
        args += ["--set", item]
    return args


def overrides(lab: Any, *more: str) -> list[str]:
    return [f"host.lab={lab.name}", f"smoke.suite={QUICK_SUITE}", *more]


@contextmanager
def lab_connection(profile: str, lab: Any) -> Iterator[Any]:
    """(host, systemd, profile) for reading the lab host the way an operator would."""
    from k26ctl.profile import load_profile
    from k26ctl.remote import connect
    from k26ctl.remote.systemd import Systemd
    from k26ctl.render import unit_name

    loaded = load_profile(profile, overrides(lab))
    host = connect(loaded.profile)
    try:
        yield host, Systemd(host, unit_name(loaded.profile)), loaded.profile
    finally:
        host.close()


def unit_text(host: Any, profile: Any) -> str | None:
    from k26ctl.render import unit_path

    raw = host.read_file(unit_path(profile), sudo=True)
    return raw.decode() if raw is not None else None


def rendered_unit(profile_path: str, lab: Any, *more: str) -> str:
    from k26ctl.profile import load_profile
    from k26ctl.render import render_unit

    return render_unit(load_profile(profile_path, overrides(lab, *more)).profile)


def main_pid(systemd: Any) -> int:
    return int(systemd.show("MainPID")["MainPID"])


def patch_state(host: Any, profile: Any) -> str:
    from k26ctl.patches.host import patch_status

    return patch_status(host, profile, [PATCH])[0].state
