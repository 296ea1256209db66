"""A running lab host as an SSH target: the `lab` resolver of the `k26ctl.hosts` entry-point group.

The remote layer looks resolvers up by the profile's host kind, so it never imports the lab.
"""

from __future__ import annotations

from k26ctl.errors import UnreachableError
from k26ctl.lab.host.machine import lab_status
from k26ctl.remote.ssh import SSHTarget


def ssh_target(name: str) -> SSHTarget:
    """The SSH target of lab host `name`; UnreachableError (exit 69) when it is not up."""
    status = lab_status(name, probe=False)  # SSH itself tells whether it answers
    if not status.running or status.host is None:
        raise UnreachableError(
            f"lab host {name} is not up ({status.reason})",
            f"start it with `k26ctl lab host up --name {name}`",
        )
    lab = status.host
    return SSHTarget(
        alias=f"lab:{name}",
        hostname=lab.address,
        port=lab.port,
        user=lab.user,
        identity_files=[lab.key_path],
        known_hosts=[lab.known_hosts_path],
        use_agent=False,
    )
