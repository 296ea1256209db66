"""The fleet's front door: roll (deploy or rollback), check/diff, status. The CLI presents the results."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from k26ctl.deploy.model import DeployOptions, DeployResult
from k26ctl.documents import tagged
from k26ctl.errors import ConfigError, ExitCode, K26Error
from k26ctl.fleet import record as rec
from k26ctl.fleet.members import HostMember
from k26ctl.fleet.model import Fleet, RouterConfig
from k26ctl.fleet.record import LocalStore, RunRecord
from k26ctl.fleet.roll import Roll, RollEvent, RollOptions, RollResult
from k26ctl.fleet.router import Router, Worker


def admin_key(config: RouterConfig) -> str | None:
    if not config.admin_key_env:
        return None
    from k26ctl.inputs import env_secret

    value = env_secret(
        config.admin_key_env, what="the router's admin key", hint=f"export {config.admin_key_env}=..."
    )
    if not value:
        raise ConfigError(
            f"the router's admin key variable {config.admin_key_env} is not set",
            f"export {config.admin_key_env}=... (the key the router was started with)",
        )
    return value


@contextmanager
def open_router(config: RouterConfig) -> Iterator[Router]:
    """The gateway at `url` (sglang-router or SMG, as `kind` names or the gateway answers), or through
    an SSH forward from `via` (the URL as that host reaches it). `.detected` says whether it was asked."""
    key = admin_key(config)
    if config.via is None:
        with _gateway(config.url, config, key) as router:
            yield router
        return
    from k26ctl.remote.connect import connect_host

    parts = urlsplit(config.url)
    host = connect_host(config.via)
    try:
        default_port = 443 if parts.scheme == "https" else 80
        with host.forward(parts.hostname or "127.0.0.1", parts.port or default_port) as (addr, port):
            local = f"{parts.scheme}://{addr}:{port}"
            with _gateway(local, config, key) as router:
                yield router
    finally:
        host.close()


def _gateway(url: str, config: RouterConfig, key: str | None) -> Router:
    from k26ctl.fleet.gateway import open_gateway

    gateway, detected = open_gateway(url, config.kind, admin_key=key, timeout=config.request_timeout)
    gateway.detected = detected
    return gateway


def gateway_note(gateway: Router) -> str:
    """Which gateway the roll speaks to, and how k26ctl knows."""
    how = "detected from its /get_loads; name it with router.kind" if gateway.detected else "router.kind"
    note = f"{gateway.kind} at {gateway.url} ({how})"
    if gateway.kind == "smg":  # said plainly: the canary's exposure is its equal share for the soak
        note += "; no routing policy of SMG reads priority or cost, so the canary gets an equal share"
    return note


def roll_options(fleet: Fleet, **overrides: Any) -> RollOptions:
    """The fleet file's `roll:` settings, command-line values (not None) winning."""
    roll = fleet.config.roll
    options = RollOptions(
        serial=roll.serial,
        max_fail=roll.max_fail,
        min_healthy=roll.min_healthy,
        drain_timeout=roll.drain_timeout,
        add_timeout=roll.add_timeout,
        soak=roll.soak,
    )
    for key, value in overrides.items():
        if value is not None:
            setattr(options, key, value)
    return options


def roll_fleet(
    fleet: Fleet,
    options: RollOptions,
    on_event: Callable[[RollEvent], None] | None = None,
    *,
    accept_new_host_key: bool = False,
) -> RollResult:
    members = [
        HostMember(m, action=options.action, accept_new_host_key=accept_new_host_key, on_event=on_event)
        for m in fleet.members
    ]
    with open_router(fleet.config.router) as router:
        if on_event is not None:
            on_event(RollEvent("gateway", "", gateway_note(router), {"kind": router.kind}))
        roll = Roll(fleet.name, list(members), router, options, LocalStore(fleet.name), on_event)
        return roll.run()


@dataclass
class FleetCheck:
    """`deploy FLEET --check/--diff`: each member's plan, nothing changed anywhere."""

    fleet: str
    results: dict[str, DeployResult] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        if self.errors:
            return ExitCode.UNAVAILABLE
        pending = any(r.exit_code == ExitCode.CHANGES_PENDING for r in self.results.values())
        return ExitCode.CHANGES_PENDING if pending else ExitCode.OK

    def to_json(self) -> dict[str, Any]:
        return tagged(
            "fleet-check",
            {
                "kind": "fleet-check",
                "fleet": self.fleet,
                "exit_code": self.exit_code,
                "members": {n: r.to_json() for n, r in self.results.items()},
                "errors": self.errors,
            },
        )


def check_fleet(fleet: Fleet, *, diff: bool = False, accept_new_host_key: bool = False) -> FleetCheck:
    from k26ctl.deploy import deploy

    out = FleetCheck(fleet.name)
    for member in fleet.members:
        opts = DeployOptions(check=True, diff=diff, accept_new_host_key=accept_new_host_key)
        try:
            out.results[member.name] = deploy(member.loaded, opts)
        except K26Error as exc:
            out.errors[member.name] = exc.one_line()
    return out


@dataclass
class FleetStatus:
    fleet: str
    router_url: str
    router_error: str | None
    workers: list[Worker]
    record: RunRecord | None
    members: dict[str, dict[str, Any]]
    gateway_kind: str = ""  # sglang-router | smg ('' when the gateway did not answer)
    gateway_detected: bool = False

    @property
    def exit_code(self) -> int:
        return ExitCode.UNAVAILABLE if self.router_error else ExitCode.OK

    def to_json(self) -> dict[str, Any]:
        return tagged(
            "fleet-status",
            {
                "kind": "fleet-status",
                "fleet": self.fleet,
                "router": {
                    "url": self.router_url,
                    "kind": self.gateway_kind or None,
                    "kind_detected": self.gateway_detected,
                    "error": self.router_error,
                    "workers": [w.__dict__ for w in self.workers],
                },
                "last_run": self.record.to_json() if self.record else None,
                "members": self.members,
            },
        )


def gateway_view(worker: Worker | None, error: str | None) -> dict[str, Any]:
    """The gateway's own view of one member: its state word, its load count, its priority."""
    if error:
        return {"state": "unknown"}
    if worker is None:
        return {"state": "not listed"}
    view: dict[str, Any] = {"state": worker.status or ("healthy" if worker.healthy else "unhealthy")}
    view["routed"], view["load"] = worker.healthy, worker.load
    if worker.priority is not None:
        view["priority"] = worker.priority
    return view


def fleet_status(fleet: Fleet) -> FleetStatus:
    """Where each member stands: the run record's phase beside what the gateway lists right now."""
    workers: list[Worker] = []
    error = None
    kind: str = fleet.config.router.kind or ""
    detected = False
    try:
        with open_router(fleet.config.router) as router:
            kind, detected = router.kind, router.detected
            workers = router.workers()
    except K26Error as exc:
        error = exc.one_line()
    listed: dict[str, Worker] = {}
    for w in workers:  # a draining entry and a new one may share a URL: the routed one speaks for it
        if w.url not in listed or w.healthy:
            listed[w.url] = w
    record = LocalStore(fleet.name).load()
    members: dict[str, dict[str, Any]] = {}
    for member in fleet.members:
        state = record.members.get(member.name) if record else None
        worker = listed.get(member.url)
        members[member.name] = {
            "url": member.url,
            "phase": state.phase if state else None,
            "where": rec.describe(state.phase, state.config) if state else "no roll recorded",
            "detail": state.detail if state else "",
            "router": "unknown"
            if error
            else ("healthy" if worker and worker.healthy else "unhealthy" if worker else "not listed"),
            "gateway": gateway_view(worker, error),
            "target_fingerprint": member.loaded.profile.fingerprint(),
            "deployed_fingerprint": state.fingerprint if state else None,
        }
    return FleetStatus(fleet.name, fleet.config.router.url, error, workers, record, members, kind, detected)
