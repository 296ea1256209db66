"""`k26ctl lab fleet up|down`: N lab hosts behind a real gateway on this machine's loopback:
`sglang-router` 0.3.2, or SMG (`smg` 1.13.0) with `--gateway smg`.

Each member is a lab host (its own nspawn + network namespace, 10.231.IDX.2) running the lab server
bound to 0.0.0.0 inside its namespace, so the router in the root namespace reaches it directly at
http://10.231.IDX.2:PORT over the host's veth pair: the same path a router takes to a GPU host on
the cluster network. The router listens on 127.0.0.1 only. `up` writes a fleet file for the members,
deploys the starting profile to each, and registers them with the router.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from k26ctl.errors import ConfigError, UsageError
from k26ctl.fleet.gateway import KINDS
from k26ctl.fleet.model import OwnedRouter
from k26ctl.fleet.router_process import LAUNCHERS, installed_version, start_router, stop_router
from k26ctl.lab.host import lab_down, lab_up
from k26ctl.lab.host.machine import check_name, state_root

DEFAULT_FLEET = "k26fleet"
DEFAULT_PROFILE = "lab/ddtree-b7.yaml"
WORKER_PORT = 30000


@dataclass
class LabFleetState:
    name: str
    hosts: list[str]
    urls: list[str]
    fleet_file: str
    router_url: str
    router_pid: int
    router_log: str
    owned: dict[str, object]
    gateway: str = "sglang-router"  # sglang-router | smg

    def save(self) -> None:
        path = fleet_dir(self.name) / "state.json"
        from k26ctl.documents import tagged

        path.write_text(json.dumps(tagged("lab-fleet", asdict(self)), indent=1), encoding="utf-8")


def fleet_dir(name: str) -> Path:
    return state_root() / f"fleet-{name}"


def load_state(name: str) -> LabFleetState | None:
    from k26ctl import statefile

    path = fleet_dir(name) / "state.json"
    if not os.path.lexists(path):
        return None
    state = statefile.read_document(
        path, LabFleetState, what=f"lab fleet {name}: state file", hint=f"remove {path.parent} to start over"
    )
    if state.gateway not in LAUNCHERS:
        raise ConfigError(
            f"lab fleet {name}: state file: gateway {state.gateway[:40]!r} is not one k26ctl runs",
            f"remove {path.parent} to start over",
        )
    return state


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _shipped_profile(name: str) -> Path:
    from k26ctl.resources import profiles_dir

    path = Path(profiles_dir()) / name
    if not path.exists():
        raise ConfigError(f"no shipped profile {name}")
    return path


def write_fleet_file(
    state_path: Path,
    name: str,
    hosts: list[str],
    urls: list[str],
    profile: Path,
    router_url: str,
    gateway: str = "sglang-router",
) -> Path:
    doc = {
        "fleet": {
            "name": name,
            "description": f"{len(hosts)} lab hosts behind {gateway} on loopback",
            "profile": str(profile),
            # the router runs in the root namespace: the lab server must listen beyond its loopback
            "set": ["sglang.host=0.0.0.0"],
            "router": {"url": router_url, "kind": gateway},
            "members": [
                {"name": h, "url": u, "set": [f"host.lab={h}"]} for h, u in zip(hosts, urls, strict=True)
            ],
            "roll": {"serial": 1, "max_fail": 0, "min_healthy": 1, "drain_timeout": 60, "soak": 3},
        }
    }
    path = state_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def lab_fleet_up(
    name: str = DEFAULT_FLEET,
    size: int = 3,
    *,
    profile: str = DEFAULT_PROFILE,
    real_sglang: tuple[str, ...] = (),
    gateway: str = "sglang-router",
    on_progress: Callable[[str], None] = lambda _m: None,
) -> LabFleetState:
    """Boot `size` lab hosts, start the gateway, deploy `profile` everywhere, register the workers.
    `real_sglang`: the real SGLang releases each host serves next to the stand-in (lab_up's)."""
    check_name(name)
    if gateway not in LAUNCHERS:
        raise UsageError(f"--gateway {gateway}: not a gateway k26ctl runs", f"one of: {', '.join(LAUNCHERS)}")
    version = installed_version(gateway)  # before any host boots
    if not 1 <= size <= 8:
        raise UsageError("--size must be between 1 and 8", "each member is a lab host with its own server")
    existing = load_state(name)
    if existing is not None:
        raise UsageError(f"lab fleet {name} is already up", f"k26ctl lab fleet down --name {name}")
    hosts = [f"{name}-{i}" for i in range(1, size + 1)]
    for host in hosts:
        check_name(host)
    sdir = fleet_dir(name)
    sdir.mkdir(parents=True, exist_ok=True)
    owned = OwnedRouter(
        port=_free_port(),
        prometheus_port=_free_port(),
        health_check_interval_secs=1,
        health_check_timeout_secs=20,
    )
    router_url = f"http://127.0.0.1:{owned.port}"
    state: LabFleetState | None = None
    try:
        urls = []
        for host in hosts:
            on_progress(f"lab host {host}: booting")
            urls.append(f"http://{lab_up(host, real_sglang=real_sglang).address}:{WORKER_PORT}")
        fleet_file = write_fleet_file(sdir, name, hosts, urls, _shipped_profile(profile), router_url, gateway)
        on_progress(f"{gateway} {version}: starting on {router_url}")
        log = sdir / "router.log"
        proc = start_router(owned, log, kind=gateway)
        state = LabFleetState(
            name, hosts, urls, str(fleet_file), router_url, proc.pid, str(log), owned.model_dump(), gateway
        )
        state.save()
        _deploy_and_register(state, on_progress)
        return state
    except BaseException:
        lab_fleet_down(name, hosts=hosts)
        raise


def _deploy_and_register(state: LabFleetState, on_progress: Callable[[str], None]) -> None:
    from k26ctl.deploy import DeployOptions, deploy
    from k26ctl.fleet.model import load_fleet

    fleet = load_fleet(state.fleet_file)
    with KINDS[state.gateway](state.router_url) as router:
        for member in fleet.members:
            on_progress(f"{member.name}: deploying {member.loaded.path.name if member.loaded.path else ''}")
            result = deploy(member.loaded, DeployOptions(yes=True))
            if result.exit_code != 0:
                raise UsageError(f"lab fleet: the first deploy to {member.name} failed: {result.message}")
            router.add(member.url, timeout=60)
            on_progress(f"{member.name}: serving at {member.url}, registered with {state.gateway}")


def restart_router(name: str = DEFAULT_FLEET) -> LabFleetState:
    """Stop the fleet's router and start it again on the same address: it comes back with no workers."""
    state = load_state(name)
    if state is None:
        raise UsageError(f"lab fleet {name} is not up", "k26ctl lab fleet up")
    stop_router(state.router_pid)
    owned = OwnedRouter(**state.owned)  # type: ignore[arg-type]
    proc = start_router(owned, Path(state.router_log), kind=state.gateway)
    state.router_pid = proc.pid
    state.save()
    return state


def lab_fleet_down(name: str = DEFAULT_FLEET, *, hosts: list[str] | None = None) -> list[str]:
    """Stop the router, power every member off, remove the fleet's state. Returns the hosts taken down."""
    state = load_state(name)
    if state is not None:
        stop_router(state.router_pid)
        hosts = state.hosts
    hosts = hosts or []
    for host in hosts:
        lab_down(host)
    from k26ctl.fleet.record import state_dir as run_record_dir

    shutil.rmtree(run_record_dir(name), ignore_errors=True)  # a new fleet of this name starts clean
    sdir = fleet_dir(name)
    for leftover in ("state.json", "fleet.yaml"):
        (sdir / leftover).unlink(missing_ok=True)
    if sdir.exists() and not any(p for p in sdir.iterdir() if p.name != "router.log"):
        (sdir / "router.log").unlink(missing_ok=True)
        os.rmdir(sdir)
    return hosts
