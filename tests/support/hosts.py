"""Lab hosts for tests: the session's host name, profiles, SSH targets and connections to a real lab host."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from k26ctl.lab.host import LabHostState
from k26ctl.profile import Profile
from k26ctl.remote.ssh import SSHHost, SSHTarget

# without K26CTL_TEST_LAB, a name of this run's own: two runs on one machine (two checkouts, CI beside
# a developer) must never share, and so tear down, each other's lab hosts
_RUN_NAME = f"k26test-{os.getpid()}"


def lab_host_name(suffix: str = "") -> str:
    """The test session's lab host (K26CTL_TEST_LAB, or one unique to this run); with `suffix`, the name
    of another lab host of this run (`NAME-SUFFIX`, kept within the 40 characters a name may have)."""
    base = os.environ.get("K26CTL_TEST_LAB") or _RUN_NAME
    worker = os.environ.get("PYTEST_XDIST_WORKER")  # each worker's lanes have hosts of their own
    if worker and os.environ.get("K26CTL_TEST_LAB"):
        base = f"{base[:34]}-{worker}"
    if not suffix:
        return base
    return f"{base[: 39 - len(suffix)]}-{suffix}"


def state_env_with_lab_hosts(tmp_path: Path) -> dict[str, str]:
    """An XDG_STATE_HOME of a test's own (its bisect or sweep sessions, histories) into which the lab
    hosts' state is linked, so that host.lab=NAME still resolves."""
    real = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "k26ctl" / "lab"
    state = tmp_path / "state"
    (state / "k26ctl").mkdir(parents=True)
    (state / "k26ctl" / "lab").symlink_to(real)
    return {"XDG_STATE_HOME": str(state)}


def lab_profile(state: LabHostState, **sections: Any) -> Profile:
    data: dict[str, Any] = {"host": {"lab": state.name, "address": "", "connect_timeout": 5}}
    for key, value in sections.items():
        data.setdefault(key, {}).update(value)
    return Profile.model_validate(data)


def lab_target(state: LabHostState, **changes: Any) -> SSHTarget:
    fields: dict[str, Any] = {
        "alias": f"lab:{state.name}",
        "hostname": state.address,
        "port": state.port,
        "user": state.user,
        "identity_files": [state.key_path],
        "known_hosts": [state.known_hosts_path],
        "use_agent": False,
    }
    fields.update(changes)
    return SSHTarget(**fields)


def ssh_host(state: LabHostState, *, connect_timeout: float = 5.0, **changes: Any) -> SSHHost:
    accept_new = changes.pop("accept_new_host_key", False)
    return SSHHost(
        lab_target(state, **changes), connect_timeout=connect_timeout, accept_new_host_key=accept_new
    )
