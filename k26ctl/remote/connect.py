"""From a profile's `host:` section to a connected Host: a lab host, an SSH alias, or this machine."""

from __future__ import annotations

from typing import TYPE_CHECKING

from k26ctl.errors import UnreachableError
from k26ctl.remote.base import Host

if TYPE_CHECKING:
    from k26ctl.profile import HostConfig, Profile
    from k26ctl.remote.ssh import SSHTarget


def connect(profile: Profile, *, accept_new_host_key: bool = False) -> Host:
    """Open the profile's host; the SSH connection is made now, so problems surface here (exit 69)."""
    return connect_host(profile.host, accept_new_host_key=accept_new_host_key)


def connect_host(config: HostConfig, *, accept_new_host_key: bool = False) -> Host:
    accept_new = accept_new_host_key or config.accept_new_host_key
    if config.lab:
        return _connect_lab(config, config.lab, accept_new)
    if config.address == "local":
        from k26ctl.remote.local import LocalHost

        return LocalHost(command_timeout=config.command_timeout, sudo=config.sudo)
    from k26ctl.remote.ssh import resolve_target

    target = resolve_target(
        config.address, user=config.user, port=config.port, identity_file=config.identity_file
    )
    return _open_ssh(target, config, accept_new)


def _connect_lab(config: HostConfig, name: str, accept_new: bool) -> Host:
    from k26ctl.lab.host import lab_status
    from k26ctl.remote.ssh import SSHTarget

    status = lab_status(name, probe=False)  # SSH itself tells whether it answers
    if not status.running or status.host is None:
        raise UnreachableError(
            f"lab host {name} is not up ({status.reason})",
            f"start it with `k26ctl lab host up --name {name}`",
        )
    lab = status.host
    target = SSHTarget(
        alias=f"lab:{name}",
        hostname=lab.address,
        port=lab.port,
        user=lab.user,
        identity_files=[lab.key_path],
        known_hosts=[lab.known_hosts_path],
        use_agent=False,
    )
    return _open_ssh(target, config, accept_new, name=f"lab host {name}")


def _open_ssh(target: SSHTarget, config: HostConfig, accept_new: bool, *, name: str | None = None) -> Host:
    from k26ctl.remote.ssh import SSHHost

    host = SSHHost(
        target,
        connect_timeout=config.connect_timeout,
        command_timeout=config.command_timeout,
        accept_new_host_key=accept_new,
        sudo=config.sudo,
        name=name,
    )
    return host.open()
