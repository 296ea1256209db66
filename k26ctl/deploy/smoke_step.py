"""Running the smoke suite against the server a deploy just (re)started, through the host's forward."""

from __future__ import annotations

from typing import Any

from k26ctl import inputs
from k26ctl.profile import Profile
from k26ctl.remote.base import Host
from k26ctl.smoke.acceptance import PriorAccept


def run_smoke_on_host(host: Host, profile: Profile, prior: PriorAccept | None = None) -> Any:
    """The SmokeReport of the profile's suite (default suite when none is named); `prior` is what the
    same configuration accepted on this host before (its deploy history)."""
    # Loaded here, not at the top: most deploys never smoke, and the runner with its detectors and
    # word list is the largest import a deploy could pay for at start-up.
    from k26ctl.smoke import SmokeTarget, load_suite, run_smoke
    from k26ctl.smoke.target import options_from_profile, server_url

    suite = load_suite(profile.smoke.suite) if profile.smoke.suite else None
    options = options_from_profile(profile, prior_accept=prior)
    options.unit_environment = _unit_environment(host, profile)
    with server_url(host, profile) as url:
        target = SmokeTarget(url, profile.served_name, inputs.api_key(profile.sglang.api_key_env))
        return run_smoke(target, suite, options=options)


def _unit_environment(host: Host, profile: Profile) -> dict[str, str] | None:
    """The Environment= of the unit the server runs under, read back from the host: where
    SGLANG_SIMULATE_ACC_LEN would be set (/server_info shows no environment). None when unreadable."""
    from k26ctl.deploy.facts import read_unit
    from k26ctl.errors import K26Error
    from k26ctl.render import unit_path
    from k26ctl.unitfile import environment_from_unit

    try:
        text = read_unit(host, unit_path(profile))
    except K26Error:  # the verdict only loses the environment; the smoke itself goes on
        return None
    return environment_from_unit(text) if text is not None else None
