"""`k26ctl watch run`: set up the target, metrics and state directory, then run the loop (or one step)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from k26ctl.errors import UsageError
from k26ctl.watch.canary import CanarySettings
from k26ctl.watch.loop import WatchConfig, Watcher, exit_code
from k26ctl.watch.metrics import WatchMetrics
from k26ctl.watch.setup import WatchTarget, profile_watch_target, url_target
from k26ctl.watch.store import WatchStore, target_key
from k26ctl.watch.verdict import JudgeRules

Emit = Callable[[dict[str, Any]], None]


@dataclass
class RunRequest:
    profile: str | None = None
    overrides: list[str] = field(default_factory=list)
    url: str | None = None
    model: str | None = None
    suite: str | None = None
    interval: float = 60.0
    once: bool = False
    as_json: bool = False
    metrics_port: int | None = None
    metrics_address: str = "127.0.0.1"
    textfile: Path | None = None
    rebaseline: bool = False
    prompts: int = 3
    max_tokens: int = 64
    probe_positions: int = 32
    request_timeout: float = 30.0
    max_latency: float | None = None
    max_queue: float = 1.0
    cycles: int | None = None
    api_key_env: str | None = None
    accept_new_host_key: bool = False
    min_accept_length: float | None = None  # default: the profile's smoke.min_accept_length
    host_state: str | None = None  # running on the served host: the service whose state dir to use


def target_store_key(profile: str | None, url: str | None, overrides: list[str] | None = None) -> str:
    if profile is None:
        return target_key(None, url)
    from k26ctl.profile import load_profile

    loaded = load_profile(profile, overrides or [])
    return target_key(loaded.profile.name or (loaded.path.stem if loaded.path else profile), None)


def build_target(request: RunRequest, canary: CanarySettings) -> WatchTarget:
    if request.url is not None:
        from k26ctl import inputs

        api_key = inputs.api_key(request.api_key_env)
        return url_target(request.url, request.model, request.suite, api_key, canary)
    from k26ctl.profile import load_profile

    loaded = load_profile(request.profile or "", request.overrides)
    return profile_watch_target(
        loaded, request.model, request.suite, request.api_key_env, canary, request.accept_new_host_key
    )


def make_watcher(request: RunRequest, emit: Emit) -> tuple[Watcher, WatchMetrics | None]:
    canary = CanarySettings(
        prompts=request.prompts,
        max_tokens=request.max_tokens,
        probe_positions=request.probe_positions,
        request_timeout=request.request_timeout,
    )
    target = build_target(request, canary)
    floor = request.min_accept_length if request.min_accept_length is not None else target.min_accept_length
    if floor is not None:
        canary = CanarySettings(**{**canary.__dict__, "min_accept_length": floor})
    store = _store(request, target.key)
    if request.rebaseline and store.forget_baseline():
        emit({"message": f"baseline {store.baseline} removed; the next healthy cycle records a new one"})
    metrics = None
    if request.metrics_port is not None or request.textfile is not None:
        metrics = WatchMetrics(target.identity)
        if request.metrics_port is not None:
            try:
                metrics.serve(request.metrics_port, request.metrics_address)
            except OSError as exc:
                raise UsageError(
                    f"cannot serve metrics on {request.metrics_address}:{request.metrics_port}: "
                    f"{exc.strerror or exc}",
                    "pick a free port with --metrics-port",
                ) from None
    if metrics is not None and target.profile is not None:
        baseline = accept_baseline_of(target.profile.profile, request.host_state, target.accept_new_host_key)
        if baseline is not None:
            metrics.set_accept_baseline(baseline)
    textfile = request.textfile

    def emit_and_export(record: dict[str, Any]) -> None:
        if metrics is not None and textfile is not None:
            metrics.write_textfile(textfile)
        emit(record)

    config = WatchConfig(
        interval=request.interval,
        max_queue=request.max_queue,
        canary=canary,
        rules=JudgeRules(max_latency=request.max_latency),
    )
    on_change = None
    if request.host_state is not None:
        on_change = _local_host_history(request.host_state)
    elif target.profile is not None:
        from k26ctl.watch.host_history import record_on_host

        profile, accept = target.profile.profile, target.accept_new_host_key
        on_change = lambda change: record_on_host(profile, change, accept)  # noqa: E731
    watcher = Watcher(
        target.open,
        target.suite,
        config,
        store,
        metrics,
        emit_and_export,
        target.api_key,
        target.label,
        on_change=on_change,
    )
    return watcher, metrics


def _store(request: RunRequest, key: str) -> WatchStore:
    if request.host_state is None:
        return WatchStore.for_target(key)
    from k26ctl.statedir import ensure_dir
    from k26ctl.watch.host_unit import host_watch_dir

    return WatchStore(ensure_dir(Path(host_watch_dir(request.host_state))))


def _local_host_history(service: str) -> Callable[[dict[str, Any]], None]:
    """On the served host itself: changes go to its watch-history.jsonl without SSH."""
    from k26ctl.remote.local import LocalHost
    from k26ctl.watch.host_history import append_watch_record

    host = LocalHost(name="this host")
    return lambda change: append_watch_record(host, service, change)


def run_watch(request: RunRequest, emit: Emit) -> int:
    watcher, _ = make_watcher(request, emit)
    if request.once:
        outcome = watcher.step()
        return exit_code(outcome.state, outcome.skipped)
    if threading.current_thread() is threading.main_thread():
        # systemd stops the unit with SIGTERM: finish the cycle under way, then exit 0
        signal.signal(signal.SIGTERM, lambda _signum, _frame: watcher.stop.set())
    watcher.run(max_steps=request.cycles)
    return 0


def accept_baseline_of(profile: Any, host_state: str | None, accept_new_host_key: bool) -> float | None:
    """The profile's accept-length baseline kept on its host (deploy/accept_baseline.py), read once at
    start; None where there is none or the host cannot be read (the ratio is then not exported)."""
    from k26ctl.deploy import accept_baseline as ab
    from k26ctl.errors import K26Error

    key = ab.config_key(profile, profile.sglang.version)
    try:
        if host_state is not None:
            from k26ctl.remote.local import LocalHost

            data = ab.read_baselines(LocalHost(name="this host"), host_state)
        else:
            from k26ctl.remote import connect

            with connect(profile, accept_new_host_key=accept_new_host_key) as host:
                data = ab.read_baselines(host, profile.service.name)
    except K26Error:
        return None
    entry = data.for_config(key)
    return entry.accept_length if entry is not None else None
