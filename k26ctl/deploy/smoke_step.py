"""Running the smoke suite against the server a deploy just (re)started, through the host's forward."""

from __future__ import annotations

from typing import Any

from k26ctl.health import api_key, probe_address
from k26ctl.profile import Profile
from k26ctl.remote.base import Host


def run_smoke_on_host(host: Host, profile: Profile) -> Any:
    """The SmokeReport of the profile's suite (default suite when none is named)."""
    from k26ctl.smoke import SmokeTarget, load_suite, run_smoke
    from k26ctl.smoke.target import options_from_profile

    suite = load_suite(profile.smoke.suite) if profile.smoke.suite else None
    options = options_from_profile(profile)
    with host.forward(probe_address(profile), profile.sglang.port) as (address, port):
        target = SmokeTarget(f"http://{address}:{port}", profile.served_name, api_key(profile))
        return run_smoke(target, suite, options=options)
