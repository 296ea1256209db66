"""From a profile's `host:` section to a connected Host: an SSH alias, this machine, or a registered kind
(a lab host, resolved through the `k26ctl.hosts` entry-point group)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from k26ctl.errors import ConfigError
from k26ctl.remote.base import Host

if TYPE_CHECKING:
    from k26ctl.profile import HostConfig, Profile
    from k26ctl.remote.ssh import SSHTarget

# Host kinds beyond SSH and local register a resolver `name -> SSHTarget` here (pyproject.toml).
HOSTS_GROUP = "k26ctl.hosts"


def connect(profile: Profile, *, accept_new_host_key: bool = False) -> Host:
    """Open the profile's host; the SSH connection is made now, so problems surface here (exit 69)."""
    return connect_host(profile.host, accept_new_host_key=accept_new_host_key)


def connect_host(config: HostConfig, *, accept_new_host_key: bool = False) -> Host:
    accept_new = accept_new_host_key or config.accept_new_host_key
    if config.lab:
        return _connect_registered(config, "lab", config.lab, accept_new)
    if config.address == "local":
        from k26ctl.remote.local import LocalHost

        return LocalHost(command_timeout=config.command_timeout, sudo=config.sudo)
    from k26ctl.remote.ssh import resolve_target

    target = resolve_target(
        config.address, user=config.user, port=config.port, identity_file=config.identity_file
    )
    return _open_ssh(target, config, accept_new)


def _connect_registered(config: HostConfig, kind: str, name: str, accept_new: bool) -> Host:
    """A host kind other than SSH or local (e.g. `host.lab`): its resolver, registered under the
    `k26ctl.hosts` entry-point group, turns the name into an SSH target."""
    resolve = _host_resolver(kind)
    target = resolve(name)
    return _open_ssh(target, config, accept_new, name=f"{kind} host {name}")


def _host_resolver(kind: str) -> Callable[[str], SSHTarget]:
    # importlib.metadata scans every installed distribution: only paid when such a host is used
    from importlib.metadata import entry_points

    found = entry_points(group=HOSTS_GROUP, name=kind)
    if not found:
        raise ConfigError(
            f"no resolver for host.{kind}: the {HOSTS_GROUP!r} entry point {kind!r} is not installed",
            "install k26ctl with its metadata (`pip install -e .` in the checkout), or use host.address",
        )
    resolver: Callable[[str], SSHTarget] = next(iter(found)).load()
    return resolver


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
