"""Lab hosts for tests: the session's host name, profiles, SSH targets and connections to a real lab host."""

from __future__ import annotations

import os
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
    if not suffix:
        return base
    return f"{base[: 39 - len(suffix)]}-{suffix}"


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
