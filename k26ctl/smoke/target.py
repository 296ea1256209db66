"""Where a profile's server answers: an SSH port forward to the host's SGLang port.

SGLang usually listens on the host's loopback or on 0.0.0.0 behind a firewall, so k26ctl reaches it
through the same SSH connection it deploys with (`Host.forward`), never by opening a port.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from k26ctl import inputs
from k26ctl.remote import connect
from k26ctl.smoke.runner import SmokeOptions, SmokeTarget

if TYPE_CHECKING:
    from k26ctl.profile import Profile
    from k26ctl.remote.base import Host


def options_from_profile(profile: Profile, **overrides: object) -> SmokeOptions:
    """SmokeOptions from the profile's `smoke:` section; explicit overrides (not None) win."""
    options = SmokeOptions(
        concurrency=profile.smoke.concurrency,
        min_accept_length=profile.smoke.min_accept_length,
        timeout=profile.smoke.timeout,
        probes=profile.smoke.probes,
        probe_positions=profile.smoke.probe_positions,
        lossless_strict=profile.smoke.lossless == "strict",
        rescoring=profile.smoke.rescoring,
    )
    return with_overrides(options, **overrides)


def with_overrides(options: SmokeOptions, **overrides: object) -> SmokeOptions:
    """`options` with each override that is not None set on it (None: keep what is there)."""
    for key, value in overrides.items():
        if value is not None:
            setattr(options, key, value)
    return options


@contextmanager
def server_url(host: Host, profile: Profile) -> Iterator[str]:
    """The URL of the profile's server through a port forward over `host`'s connection."""
    with host.forward(profile.sglang.local_address, profile.sglang.port) as (address, port):
        yield f"http://{address}:{port}"


@contextmanager
def profile_target(
    profile: Profile,
    *,
    model: str | None = None,
    api_key_env: str | None = None,
    accept_new_host_key: bool = False,
    on_host: Callable[[Host], None] | None = None,
) -> Iterator[SmokeTarget]:
    """Connect to the profile's host and forward a local port to its SGLang server. `on_host` is
    called with the connection first (to read what the host remembers, say)."""
    api_key = inputs.api_key(api_key_env or profile.sglang.api_key_env)
    with (
        connect(profile, accept_new_host_key=accept_new_host_key) as host,
        server_url(host, profile) as url,
    ):
        if on_host is not None:
            on_host(host)
        yield SmokeTarget(url, model, api_key)
