"""A fleet member as the roll acts on it: the single-host pipeline (deploy or rollback, smoke directly
against the worker), the worker's own load, and the member's line in the host's fleet record.

The worker is reached the way every k26ctl command reaches a server: through an SSH port forward
over the host's connection, never through the router.
"""

from __future__ import annotations

import json
import re
import time
from contextlib import ExitStack
from typing import Any

from k26ctl.deploy.history import state_dir
from k26ctl.deploy.model import DeployEvent, DeployOptions, DeployResult
from k26ctl.errors import ExitCode, Interrupted, K26Error
from k26ctl.fleet.model import Member
from k26ctl.fleet.roll import ApplyOutcome, RollEvent
from k26ctl.httpsafe import BadEncoding, BodyTooLarge, BoundedClient, DeadlineExceeded, TransportFailure
from k26ctl.remote.base import Host

FLEET_RECORD = "fleet.jsonl"
MAX_LINES = 500
_ANY_ADDRESS = ("", "0.0.0.0", "::", "[::]")
_METRIC = re.compile(r"^sglang:(num_running_reqs|num_queue_reqs)(?:\{[^}]*\})?\s+([0-9.eE+-]+)\s*$", re.M)


def fleet_record_path(service: str) -> str:
    return f"{state_dir(service)}/{FLEET_RECORD}"


class HostMember:
    """`MemberOps` for one member of a loaded fleet."""

    def __init__(
        self,
        member: Member,
        *,
        action: str = "deploy",
        accept_new_host_key: bool = False,
        on_event: Any = None,
    ) -> None:
        self.member = member
        self.name = member.name
        self.url = member.url
        self.profile = member.loaded.profile
        self.fingerprint = self.profile.fingerprint()
        self.action = action
        self.accept_new_host_key = accept_new_host_key
        self.on_event = on_event
        self.last_result: DeployResult | None = None
        self._probe: ExitStack | None = None
        self._probe_base: str | None = None

    # ---- the host --------------------------------------------------------------------------------

    def _connect(self) -> Host:
        from k26ctl.remote import connect

        return connect(self.profile, accept_new_host_key=self.accept_new_host_key)

    def pending(self) -> bool:
        if self.action == "rollback":
            return True
        from k26ctl.deploy import deploy

        result = deploy(
            self.member.loaded, DeployOptions(check=True, accept_new_host_key=self.accept_new_host_key)
        )
        if result.exit_code not in (ExitCode.OK, ExitCode.CHANGES_PENDING):
            raise K26Error(f"{self.name}: cannot plan: {result.message}", exit_code=result.exit_code)
        return result.exit_code == ExitCode.CHANGES_PENDING

    def apply(self) -> ApplyOutcome:
        """Deploy with smoke forced (or roll back, then smoke). Interrupted propagates: the roll
        states where the member stands."""
        self.close()  # the deploy restarts the server: the load probe reconnects afterwards
        t0 = time.monotonic()
        try:
            result = self._run_pipeline()
        except Interrupted:
            raise
        except K26Error as exc:
            return ApplyOutcome(False, "old", exc.one_line(), seconds=time.monotonic() - t0)
        self.last_result = result
        data = result.to_json()
        if result.exit_code != ExitCode.OK:
            config = "new" if result.restarted or result.changed else "old"
            message = result.message or result.verdict
            if result.failure == "smoke" and result.smoke is not None:
                message = f"smoke failed: {_smoke_reasons(data)}"
            return ApplyOutcome(False, config, message, result.changed, time.monotonic() - t0, data)
        detail = "deployed" if result.changed else "no change"
        if result.smoke is not None:
            detail += ", smoke passed"
        return ApplyOutcome(True, "new", detail, result.changed, time.monotonic() - t0, data)

    def _run_pipeline(self) -> DeployResult:
        from k26ctl.deploy import deploy, rollback

        opts = DeployOptions(yes=True, smoke=True, accept_new_host_key=self.accept_new_host_key)
        events = self._forward_events
        if self.action == "rollback":
            result = rollback(self.member.loaded, opts, on_event=events)
            if result.exit_code == ExitCode.OK:
                self._smoke_after_rollback(result)
            return result
        return deploy(self.member.loaded, opts, on_event=events)

    def _smoke_after_rollback(self, result: DeployResult) -> None:
        from k26ctl.deploy.smoke_step import run_smoke_on_host

        host = self._connect()
        try:
            report = run_smoke_on_host(host, self.profile)
        finally:
            host.close()
        result.smoke = report
        if not getattr(report, "passed", False):
            result.verdict, result.exit_code, result.failure = "failed", ExitCode.FAILED, "smoke"
            result.message = "smoke failed after the rollback"

    def _forward_events(self, event: DeployEvent) -> None:
        if self.on_event is not None and event.kind in ("step", "warning", "progress"):
            self.on_event(RollEvent("deploy", self.name, event.message, {"kind": event.kind, **event.data}))

    # ---- the worker's own load -------------------------------------------------------------------

    def load(self) -> int | None:
        """Requests running or waiting on the worker (`/get_load`, else `/metrics`); None when the
        server does not answer (nothing can be running there)."""
        for attempt in range(2):
            try:
                base = self._worker_base()
                return read_worker_load(base)
            except (TransportFailure, DeadlineExceeded):
                return None  # refused, reset, timed out: the server is not serving requests
            except (K26Error, OSError, EOFError):
                self.close()  # a dead SSH connection: reconnect once
                if attempt:
                    raise
        return None

    def _worker_base(self) -> str:
        if self._probe_base is None:
            stack = ExitStack()
            try:
                host = stack.enter_context(self._connect())
                addr = "127.0.0.1" if self.profile.sglang.host in _ANY_ADDRESS else self.profile.sglang.host
                local, port = stack.enter_context(host.forward(addr, self.profile.sglang.port))
            except BaseException:
                stack.close()
                raise
            self._probe, self._probe_base = stack, f"http://{local}:{port}"
        return self._probe_base

    def close(self) -> None:
        if self._probe is not None:
            probe, self._probe, self._probe_base = self._probe, None, None
            probe.close()

    # ---- the record beside the host's history ----------------------------------------------------

    def note(self, entry: dict[str, Any]) -> None:
        path = fleet_record_path(self.profile.service.name)
        host = self._connect()
        try:
            host.run(["mkdir", "-p", state_dir(self.profile.service.name)], sudo=True, check=True)
            raw = host.read_file(path, sudo=True) or b""
            lines = [ln for ln in raw.decode("utf-8", "replace").splitlines() if ln.strip()]
            lines = [*lines, json.dumps({**entry, "member": self.name}, sort_keys=True)][-MAX_LINES:]
            host.write_file_atomic(
                path, ("\n".join(lines) + "\n").encode(), mode=0o644, sudo=True, backup=False
            )
        finally:
            host.close()


def read_host_record(host: Host, service: str, limit: int = 20) -> list[dict[str, Any]]:
    raw = host.read_file(fleet_record_path(service), sudo=True) or b""
    from k26ctl.statefile import parse_lines

    lines = raw.decode("utf-8", "replace").split("\n")
    return parse_lines(lines[-limit - 1 :], fleet_record_path(service), lambda record: dict).items


MAX_LOAD_BODY = 16 << 20  # /metrics of a large deployment is a few hundred KB


def read_worker_load(base: str) -> int:
    """Requests running or queued on the worker at `base`. `TransportFailure`/`DeadlineExceeded`
    when it does not answer; K26Error when it answers but neither endpoint tells its load."""
    with BoundedClient(base, timeout=5.0, max_body=MAX_LOAD_BODY) as client:
        load = _get_load(client)
        if load is not None:
            return load
        try:
            metrics = client.request("GET", "/metrics")
        except (BodyTooLarge, BadEncoding):
            metrics = None
        if metrics is not None and metrics.status_code == 200:
            values = [float(v) for _, v in _METRIC.findall(metrics.text)]
            if values:
                return int(sum(values))
        # neither endpoint: a server that answers but cannot say its load is not known to be drained
        raise K26Error(
            f"{base}: neither /get_load nor /metrics tells the worker's load",
            "run SGLang with --enable-metrics (sglang.enable_metrics: true)",
        )


def _get_load(client: BoundedClient) -> int | None:
    """The sum of `num_reqs` over the ranks listed by /get_load; None when that answer is unusable."""
    try:
        response = client.request("GET", "/get_load")
        ranks = response.json() if response.status_code == 200 else None
    except (BodyTooLarge, BadEncoding, ValueError):
        return None
    if not isinstance(ranks, list):
        return None
    counts = [r.get("num_reqs", 0) if isinstance(r, dict) else None for r in ranks]
    if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
        return None
    return sum(c for c in counts if isinstance(c, int))


def _smoke_reasons(data: dict[str, Any]) -> str:
    raw = data.get("smoke")
    smoke: dict[str, Any] = raw if isinstance(raw, dict) else {}
    reasons: list[str] = []
    for item in smoke.get("results", []):
        for reason in item.get("reasons", []) or []:
            if reason not in reasons:
                reasons.append(reason)
    summary = str(smoke.get("summary") or "degenerate output")
    return summary + (f" ({'; '.join(reasons[:2])})" if reasons else "")
