"""The deploy-and-judge step every search shares: put one configuration on the host through
k26ctl.deploy, and read whether it came up and what its smoke said.

`Deployer` is the seam (tests and the lab script their own); `HostDeployer` is the real one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from k26ctl.deploy import DeployOptions, deploy
from k26ctl.deploy.model import DeployResult
from k26ctl.deploy.smoke_step import run_smoke_on_host
from k26ctl.errors import ConfigError, UnreachableError
from k26ctl.profile import LoadedProfile
from k26ctl.remote import connect
from k26ctl.search.verdict import Verdict
from k26ctl.smoke.target import server_url


@dataclass
class Deployed:
    """What the deploy of one step left behind."""

    up: bool  # the service came up and answers its readiness probes
    restarted: bool
    detail: str
    smoke_verdict: Verdict | None = None  # the deploy's own smoke run, when it made one
    refused: bool = False  # not deployed at all (the profile with this value is invalid)
    loaded: LoadedProfile | None = None
    load_seconds: float | None = None  # the server's own start-to-ready time, from its journal
    phases: dict[str, Any] | None = None  # where the restart's time went (deploy.phases, as JSON)


def deployed_from_result(result: DeployResult, loaded: LoadedProfile | None = None) -> Deployed:
    """Read a k26ctl.deploy DeployResult: readiness failed = not up; smoke report = its verdict."""
    up = result.failure != "readiness"
    smoke_verdict: Verdict | None = None
    if result.smoke is not None:
        smoke_verdict = Verdict.GOOD if result.smoke.passed else Verdict.BAD
    detail = result.message or (result.smoke.summary() if result.smoke is not None else "deployed")
    if not up and result.journal_lines:
        detail += " | " + result.journal_lines[-1]
    load = result.load_seconds
    phases = result.phases.to_json() if result.phases is not None else None
    return Deployed(
        up, result.restarted, detail, smoke_verdict, loaded=loaded, load_seconds=load, phases=phases
    )


class Deployer(Protocol):
    def deploy(self, loaded: LoadedProfile) -> Deployed: ...

    def smoke(self, loaded: LoadedProfile) -> tuple[Verdict, str]: ...

    @contextlib.contextmanager
    def server_url(self, loaded: LoadedProfile) -> Iterator[str | None]: ...


@dataclass
class HostDeployer:
    """Deploys with k26ctl.deploy (yes, smoke as asked) and reads its result."""

    smoke_in_deploy: bool = True
    on_event: Callable[[Any], None] | None = None
    accept_new_host_key: bool = False

    def deploy(self, loaded: LoadedProfile) -> Deployed:
        options = DeployOptions(
            yes=True, smoke=self.smoke_in_deploy, accept_new_host_key=self.accept_new_host_key
        )
        try:
            result = deploy(loaded, options, self.on_event)
        except ConfigError as exc:
            # This value cannot be deployed at all (validation refused it): nothing to judge.
            return Deployed(False, False, f"refused: {exc.one_line()}", refused=True, loaded=loaded)
        return deployed_from_result(result, loaded)

    def smoke(self, loaded: LoadedProfile) -> tuple[Verdict, str]:
        """Smoke the running server again (a repeated try, or a deploy that had nothing to restart)."""
        try:
            with connect(loaded.profile, accept_new_host_key=self.accept_new_host_key) as host:
                report = run_smoke_on_host(host, loaded.profile)
        except UnreachableError as exc:
            return Verdict.SKIP, f"smoke could not reach the server: {exc.message}"
        return (Verdict.GOOD if report.passed else Verdict.BAD), report.summary()

    @contextlib.contextmanager
    def server_url(self, loaded: LoadedProfile) -> Iterator[str | None]:
        with (
            connect(loaded.profile, accept_new_host_key=self.accept_new_host_key) as host,
            server_url(host, loaded.profile) as url,
        ):
            yield url
