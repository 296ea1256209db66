"""The lab host: a real remote machine on this one, for tests and demos without a GPU.

A systemd-nspawn container with systemd as PID 1, inside its own network namespace, running its own
OpenSSH server. k26ctl reaches it exactly as it reaches a production host: over SSH, checking the
host key against a known_hosts file, and driving systemd with systemctl/journalctl.

State lives in $XDG_STATE_HOME/k26ctl/lab/<name>/ (default ~/.local/state): keys, known_hosts, the
unit directory and /opt of the host, and state.json describing the running instance.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from k26ctl.documents import tagged
from k26ctl.errors import ConfigError, K26Error, PermissionDeniedError, UnreachableError
from k26ctl.lab.host import netns
from k26ctl.lab.host.gpu import GpuParts

LAB_PREFIX = "/opt/k26lab"
SSH_PORT = 22
BOOT_TARGET = "k26lab.target"
SSHD_UNIT = "k26lab-sshd.service"
INNER_SSH_DIR = "/etc/k26lab/ssh"
# The project is also seen here, outside /tmp: a unit with PrivateTmp=yes (the default hardening) hides
# the host's /tmp, and a checkout under /tmp would then vanish from the service's view.
INNER_PROJECT_DIR = "/srv/k26ctl-src"
REQUIRED_PACKAGES = {"systemd-nspawn": "systemd-container", "/usr/sbin/sshd": "openssh-server"}
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
_SKELETON_DIRS = (
    "dev",
    "proc",
    "sys",
    "run",
    "tmp",
    "var",
    "root",
    "home",
    "etc",
    "usr/lib",
    "opt",
    "srv",
    "mnt",
)
_USR_MERGE_LINKS = {"bin": "usr/bin", "lib": "usr/lib", "lib64": "usr/lib64", "sbin": "usr/sbin"}
_BOOT_WAIT = 60.0
OVERLAID = ("/usr", "/etc", "/var", "/root")  # the machine's own, with a private writable layer

# nspawn processes started by this process, so lab_down can reap them (no zombies left behind)
_CHILDREN: dict[str, subprocess.Popen[bytes]] = {}


@dataclass
class LabHostState:
    name: str
    index: int
    address: str
    port: int
    key_path: str
    known_hosts_path: str
    pid: int
    state_dir: str
    user: str = "root"
    netns: str = ""
    pid_start_ticks: int = 0
    started_at: float = 0.0
    boot_seconds: float = 0.0
    real_sglang: list[str] = field(default_factory=list)  # releases bound under /opt/sglang (lab.real)
    gpu: str = ""  # the GPU parts bound in (`lab host up --gpu`), described; empty on a CPU host
    binds: list[str] = field(default_factory=list)  # SRC:DST folders bound read-write (`--bind`)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def openssh_argv(self, *, connect_timeout: float = 10) -> list[str]:
        """Plain OpenSSH to this host with its own key and strict known_hosts: a command to run it
        by hand, and an independent way for tests and benchmarks to read the host."""
        return [
            "ssh",
            "-i",
            self.key_path,
            "-p",
            str(self.port),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            f"UserKnownHostsFile={self.known_hosts_path}",
            "-o",
            "LogLevel=ERROR",
            "-o",
            f"ConnectTimeout={connect_timeout:g}",
            f"{self.user}@{self.address}",
        ]


@dataclass
class LabStatus:
    name: str
    state: str  # "up" | "down" | "stale"
    reason: str
    host: LabHostState | None = None
    ssh_banner: bool = False
    leftovers: list[str] = field(default_factory=list)

    @property
    def running(self) -> bool:
        return self.state == "up"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state,
            "reason": self.reason,
            "ssh_banner": self.ssh_banner,
            "leftovers": self.leftovers,
            "host": self.host.to_json() if self.host else None,
        }


# ---- paths and state ------------------------------------------------------------------------------


def state_root() -> Path:
    from k26ctl import statedir

    return statedir.state_root() / "k26ctl" / "lab"


def state_dir(name: str) -> Path:
    return state_root() / name


def check_name(name: str) -> str:
    if not _NAME_RE.match(name):
        raise ConfigError(
            f"bad lab host name {name!r}", "use lower-case letters, digits and '-', at most 40 characters"
        )
    return name


def load_state(name: str) -> LabHostState | None:
    from k26ctl import statefile

    path = state_dir(check_name(name)) / "state.json"
    if not os.path.lexists(path):
        return None
    return statefile.read_document(
        path,
        LabHostState,
        what=f"lab host {name}: state file",
        hint=f"stop its machine by hand (machinectl terminate k26lab-{name}), then remove {path.parent}",
    )


def _save_state(state: LabHostState) -> None:
    path = Path(state.state_dir) / "state.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(tagged("lab-host", state.to_json()), indent=2) + "\n")
    os.replace(tmp, path)


# ---- processes -------------------------------------------------------------------------------------


def _start_ticks(pid: int) -> int | None:
    """Process start time in clock ticks (distinguishes a reused pid), None when gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def _alive(state: LabHostState) -> bool:
    ticks = _start_ticks(state.pid)
    return ticks is not None and (not state.pid_start_ticks or ticks == state.pid_start_ticks)


def _ssh_banner(address: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((address, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            return sock.recv(4).startswith(b"SSH-")
    except OSError:
        return False


# ---- prerequisites ---------------------------------------------------------------------------------


def missing_packages() -> list[str]:
    missing = []
    for tool, package in REQUIRED_PACKAGES.items():
        found = Path(tool).exists() if tool.startswith("/") else shutil.which(tool) is not None
        if not found:
            missing.append(package)
    if shutil.which("ip") is None:
        missing.append("iproute2")
    if shutil.which("ssh-keygen") is None:
        missing.append("openssh-client")
    return missing


def prerequisite_problem() -> str | None:
    """Why a lab host cannot run here, or None when it can."""
    if os.geteuid() != 0:
        return "the lab host needs root (network namespaces and systemd-nspawn)"
    missing = missing_packages()
    if missing:
        return f"missing Debian packages: {' '.join(missing)}"
    return None


def install_packages(packages: list[str]) -> None:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]):
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise K26Error(f"{' '.join(argv)} failed: {tail[0]}", "install the packages by hand")


def ensure_prerequisites(install_deps: bool = False) -> None:
    if os.geteuid() != 0:
        raise PermissionDeniedError(
            "the lab host needs root (network namespaces and systemd-nspawn)", "run it as root"
        )
    missing = missing_packages()
    if missing and install_deps:
        install_packages(missing)
        missing = missing_packages()
    if missing:
        cmd = f"apt-get install -y {' '.join(missing)}"
        raise K26Error(
            f"the lab host needs these Debian packages: {' '.join(missing)}",
            f"run `{cmd}` as root, or `k26ctl lab host up --install-deps`",
        )


# ---- building the host -----------------------------------------------------------------------------


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def _keygen(path: Path, comment: str) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
    )


def _build_skeleton(root: Path) -> None:
    for d in _SKELETON_DIRS:
        (root / d).mkdir(parents=True, exist_ok=True)
    for link, target in _USR_MERGE_LINKS.items():
        if not (root / link).is_symlink():
            (root / link).symlink_to(target)
    shutil.copyfile("/usr/lib/os-release", root / "usr/lib/os-release")


def _sshd_config(address: str) -> str:
    return "\n".join(
        [
            f"ListenAddress {address}",
            f"Port {SSH_PORT}",
            f"HostKey {INNER_SSH_DIR}/ssh_host_ed25519_key",
            f"AuthorizedKeysFile {INNER_SSH_DIR}/authorized_keys",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PermitRootLogin prohibit-password",
            "UsePAM no",  # with PAM, poweroff waits minutes for the session to end
            "PrintMotd no",
            "StrictModes no",
            "AllowTcpForwarding yes",
            "AcceptEnv LANG LC_*",
            "Subsystem sftp internal-sftp",
            "",
        ]
    )


def _boot_units() -> dict[str, str]:
    sshd = f"""[Unit]
Description=k26 lab host OpenSSH server
After=network.target

[Service]
ExecStart=/usr/sbin/sshd -D -e -f {INNER_SSH_DIR}/sshd_config
RuntimeDirectory=sshd
Restart=on-failure
RestartSec=1
# session processes must not hold up the host's poweroff
TimeoutStopSec=2s
"""
    target = f"""[Unit]
Description=k26 lab host
Requires=basic.target {SSHD_UNIT}
After=basic.target {SSHD_UNIT}
AllowIsolate=yes
"""
    return {SSHD_UNIT: sshd, BOOT_TARGET: target}


_BASHRC = """# k26 lab host: a plain shell (no slow per-login init)
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
"""


def _base_python() -> Path:
    """The interpreter behind the running one (outside any venv), without resolving pyenv shims."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return Path(base)


def _python_binds() -> list[str]:
    """Directories the host must see so the lab venv's interpreter and our packages import."""
    binds = []
    for prefix in {sys.base_prefix, sys.prefix}:
        if not prefix.startswith(("/usr/", "/root/")) and prefix != "/usr":
            binds.append(prefix)
    return sorted(binds)


def _provision_opt(opt: Path) -> None:
    """/opt/k26lab on the host: a venv over this machine's Python, the lab SGLang tree, the weights."""
    lab = opt / "k26lab"
    lab.mkdir(parents=True, exist_ok=True)
    venv = lab / "venv"
    if not (venv / "bin" / "python").exists():
        subprocess.run(
            [str(_base_python()), "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
            check=True,
            capture_output=True,
        )
    site_dir = Path(
        subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    if sys.prefix != sys.base_prefix:
        # running inside a venv: make its packages (k26ctl itself among them) visible to the lab venv
        import site

        (site_dir / "k26ctl-outer-venv.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    # k26ctl imports from a directory every service on the host can see (see INNER_PROJECT_DIR)
    (site_dir / "k26ctl-project.pth").write_text(INNER_PROJECT_DIR + "\n")
    from k26ctl.resources import project_root

    lab_src = project_root() / "k26ctl" / "lab" / "server"
    tree = lab_src / "sglang_tree" / "sglang"
    if tree.is_dir():
        shutil.copytree(tree, lab / "sglang", dirs_exist_ok=True)
    weights = lab_src / "weights"
    if weights.is_dir():
        models = lab / "models"
        models.mkdir(exist_ok=True)
        for item in weights.iterdir():
            if item.name.startswith(".") or item.name == "__pycache__":
                continue
            if item.is_dir():
                shutil.copytree(item, models / item.name, dirs_exist_ok=True)
            else:
                shutil.copy2(item, models / item.name)


def _prepare_state_dir(sdir: Path, name: str, address: str) -> tuple[Path, Path]:
    """Everything the container needs on disk (the real-SGLang parts aside); returns (client key,
    known_hosts)."""
    _build_skeleton(sdir / "root")
    ssh = sdir / "sshd"
    ssh.mkdir(parents=True, exist_ok=True)
    client = sdir / "client"
    client.mkdir(parents=True, exist_ok=True)
    client.chmod(0o700)
    _keygen(ssh / "ssh_host_ed25519_key", f"k26lab-{name}-host")
    key = client / "id_ed25519"
    _keygen(key, f"k26lab-{name}-client")
    # readable by every account: sshd reads it as the user logging in
    _write(ssh / "authorized_keys", (client / "id_ed25519.pub").read_text(), 0o644)
    _write(ssh / "sshd_config", _sshd_config(address))
    host_pub = (ssh / "ssh_host_ed25519_key.pub").read_text().split()
    known_hosts = client / "known_hosts"
    _write(known_hosts, f"{address} {host_pub[0]} {host_pub[1]}\n", 0o600)
    for unit, text in _boot_units().items():
        _write(sdir / "bootunits" / unit, text)
    (sdir / "unitdir").mkdir(exist_ok=True)
    _write(sdir / "hostname", f"{name}\n")
    _write(sdir / "bashrc", _BASHRC)
    _provision_opt(sdir / "opt")
    return key, known_hosts


# The lab host's `nvidia-smi`: the memory query k26ctl uses, answered from the lab server's simulated load.
_NVIDIA_SMI = f"""#!{LAB_PREFIX}/venv/bin/python
from k26ctl.lab.server.gpu_memory import main

raise SystemExit(main())
"""


def _install_nvidia_smi(usr_upper: Path, gpu: GpuParts | None = None) -> None:
    """Into the private writable layer over /usr, so the host has it at /usr/local/bin/nvidia-smi: the
    stand-in on a CPU host; on a GPU host the real one, with the driver's libraries on its path."""
    if gpu is None:
        _write(usr_upper / "local" / "bin" / "nvidia-smi", _NVIDIA_SMI, 0o755)
        return
    libs = (
        f"LD_LIBRARY_PATH={shlex.quote(gpu.library_path)}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}} "
        if (gpu.library_path)
        else ""
    )
    wrapper = f'#!/bin/sh\n{libs}exec {shlex.quote(gpu.nvidia_smi)} "$@"\n'
    if gpu.nvidia_smi != "/usr/local/bin/nvidia-smi":
        _write(usr_upper / "local" / "bin" / "nvidia-smi", wrapper, 0o755)


def _nspawn_argv(
    sdir: Path,
    name: str,
    ns: str,
    read_only: list[tuple[Path, str]] | None = None,
    gpu: GpuParts | None = None,
    binds_rw: list[tuple[str, str]] | None = None,
) -> list[str]:
    from k26ctl.resources import project_root

    for d in OVERLAID:
        (sdir / "upper" / d.strip("/")).mkdir(parents=True, exist_ok=True)
    _install_nvidia_smi(sdir / "upper" / "usr", gpu)
    binds = [f"--bind-ro={p}:{p}" for p in _python_binds()]
    project = str(project_root())
    return [
        "systemd-nspawn",
        "--quiet",
        "--register=no",  # no systemd PID 1 on this machine to register with
        "--keep-unit",
        f"--directory={sdir / 'root'}",
        f"--machine=k26lab-{name}",
        f"--network-namespace-path=/run/netns/{ns}",
        "--kill-signal=SIGRTMIN+3",
        # explicit upper dirs in the state dir: nspawn's own temporary ones under /var/tmp are left
        # behind when /var/tmp is not a tmpfs
        *[f"--overlay={d}:{sdir / 'upper' / d.strip('/')}:{d}" for d in OVERLAID],
        f"--bind-ro={project}:{project}",
        f"--bind-ro={project}:{INNER_PROJECT_DIR}",
        *binds,
        f"--bind-ro={sdir / 'sshd'}:{INNER_SSH_DIR}",
        f"--bind={sdir / 'unitdir'}:/etc/systemd/system",
        f"--bind={sdir / 'opt'}:/opt",
        *[f"--bind-ro={source}:{inside}" for source, inside in read_only or []],
        *[f"--bind={source}:{inside}" for source, inside in binds_rw or []],
        *(gpu.nspawn_arguments() if gpu is not None else []),
        f"--bind-ro={sdir / 'hostname'}:/etc/hostname",
        f"--bind-ro={sdir / 'bashrc'}:/root/.bashrc",
        f"--bind-ro={sdir / 'bootunits'}:/usr/local/lib/systemd/system",
        "--boot",
        f"systemd.unit={BOOT_TARGET}",
    ]


def _log_tail(sdir: Path, lines: int = 5) -> str:
    try:
        text = (sdir / "nspawn.log").read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])


# ---- public API -----------------------------------------------------------------------------------


def lab_status(name: str = "k26lab", *, probe: bool = True) -> LabStatus:
    """Whether the host runs; with probe=True it must also answer with an SSH banner."""
    check_name(name)
    state = load_state(name)
    ns = netns.netns_name(name)
    leftovers = [f"netns {ns}"] if netns.netns_exists(ns) else []
    if state is None:
        if leftovers:
            return LabStatus(name, "stale", "a namespace exists without state", leftovers=leftovers)
        return LabStatus(name, "down", "not running")
    if not _alive(state):
        return LabStatus(name, "stale", f"nspawn pid {state.pid} is gone", state, leftovers=leftovers)
    if not probe:
        return LabStatus(name, "up", f"running as pid {state.pid}", state)
    banner = _ssh_banner(state.address, state.port)
    if not banner:
        return LabStatus(name, "stale", f"no SSH banner on {state.address}:{state.port}", state, False)
    return LabStatus(name, "up", f"running as pid {state.pid}", state, True)


def lab_up(
    name: str = "k26lab",
    install_deps: bool = False,
    real_sglang: tuple[str, ...] = (),
    gpu: GpuParts | None = None,
    binds: tuple[tuple[str, str], ...] = (),
    *,
    rebuild: Callable[[str], None] | None = None,
) -> LabHostState:
    """Boot the lab host (or return it when it is already up and answering SSH). `real_sglang`: the
    SGLang releases to serve next to the stand-in (installed into the machine's cache if missing);
    `gpu`: this machine's GPU parts to bind in (module gpu); `binds`: folders bound read-write.

    A host that is up without one of them is refused, unless `rebuild` is given (the demos own their
    host): then it is told a line saying so, and the host is brought down and up again with them."""
    check_name(name)
    ensure_prerequisites(install_deps)
    status = lab_status(name)
    if status.running and status.host is not None:
        missing = sorted(set(real_sglang) - set(status.host.real_sglang))
        if gpu is not None and not status.host.gpu:
            raise ConfigError(
                f"lab host {name} is up without the GPU",
                f"bring it down first (`k26ctl lab host down --name {name}`), then up with --gpu",
            )
        if not missing:
            return status.host
        without = f"lab host {name} is up without real SGLang {', '.join(missing)}"
        if rebuild is None:
            raise ConfigError(
                without, f"bring it down first (`k26ctl lab host down --name {name}`), then up with --real"
            )
        rebuild(f"{without}: bringing it down and up again with it")
        lab_down(name)
        status = lab_status(name)
    if status.state == "stale":
        lab_down(name)
    if real_sglang:  # before anything is made: a first install takes minutes
        from k26ctl.lab.real.releases import ensure_release

        for version in real_sglang:
            ensure_release(version, _note)
    sweep_crashed(exclude=name)
    sdir = state_dir(name)
    if sdir.exists():
        shutil.rmtree(sdir)
    sdir.mkdir(parents=True)
    started = time.monotonic()
    plan = netns.create(name)
    try:
        key, known_hosts = _prepare_state_dir(sdir, name, plan.inside_address)
        read_only: list[tuple[Path, str]] = []
        if real_sglang:
            from k26ctl.lab.real.host_parts import provision

            read_only = provision(sdir / "opt", real_sglang, _note)
        with (sdir / "nspawn.log").open("wb") as log:
            proc = subprocess.Popen(
                _nspawn_argv(sdir, name, plan.netns, read_only, gpu, list(binds)),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _CHILDREN[name] = proc
        state = LabHostState(
            name=name,
            index=plan.index,
            address=plan.inside_address,
            port=SSH_PORT,
            key_path=str(key),
            known_hosts_path=str(known_hosts),
            pid=proc.pid,
            state_dir=str(sdir),
            netns=plan.netns,
            pid_start_ticks=_start_ticks(proc.pid) or 0,
            started_at=time.time(),
            real_sglang=list(real_sglang),
            gpu=gpu.describe() if gpu is not None else "",
            binds=[f"{source}:{inside}" for source, inside in binds],
        )
        _save_state(state)
        deadline = time.monotonic() + _BOOT_WAIT
        while not _ssh_banner(plan.inside_address, SSH_PORT, timeout=0.5):
            if proc.poll() is not None:
                raise UnreachableError(
                    f"lab host {name}: systemd-nspawn exited with {proc.returncode}: {_log_tail(sdir)}",
                    f"see {sdir / 'nspawn.log'}",
                )
            if time.monotonic() > deadline:
                raise UnreachableError(
                    f"lab host {name}: no SSH banner on {plan.inside_address}:22 after {_BOOT_WAIT:.0f} s",
                    f"see {sdir / 'nspawn.log'}",
                )
            time.sleep(0.05)
        state.boot_seconds = round(time.monotonic() - started, 3)
        _save_state(state)
        return state
    except BaseException:
        lab_down(name)
        raise


def _note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def sweep_crashed(exclude: str | None = None) -> list[str]:
    """Tear down lab hosts whose nspawn died without a `down` (a killed test run), so their subnets
    are not held forever. Only hosts whose state file names a dead nspawn: a host still being
    brought up has no state file yet (it is written once nspawn runs)."""
    swept = []
    for other in netns.lab_namespaces():
        if other == exclude or not _NAME_RE.match(other):
            continue
        try:
            state = load_state(other)
        except K26Error:
            continue
        if state is None or _alive(state):
            continue
        lab_down(other)
        swept.append(other)
    return swept


def lab_down(name: str = "k26lab", *, timeout: float = 6.0) -> bool:
    """Power the host off and remove its namespace, veths and state. True when something was running."""
    check_name(name)
    state = load_state(name)
    was_running = False
    if state is not None and _alive(state):
        was_running = True
        _stop_nspawn(state, timeout)
    proc = _CHILDREN.pop(name, None)
    if proc is not None:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    # whatever is still in the namespace now is an orphan of a crashed or killed nspawn
    netns.delete(name, timeout=2.0)
    propagate = _propagate_dir(name)
    if propagate.is_dir():
        shutil.rmtree(propagate, ignore_errors=True)  # nspawn leaves it when /run is not a tmpfs
    sdir = state_dir(name)
    if sdir.exists():
        shutil.rmtree(sdir, ignore_errors=True)
    return was_running


def _stop_nspawn(state: LabHostState, timeout: float) -> None:
    try:
        os.kill(state.pid, signal.SIGTERM)  # nspawn turns this into an orderly poweroff
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while _alive(state):
        proc = _CHILDREN.get(state.name)
        if proc is not None:
            proc.poll()
        if time.monotonic() > deadline:
            for pid in [state.pid, *netns.netns_pids(state.netns or netns.netns_name(state.name))]:
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 5.0
        time.sleep(0.05)
    # the poweroff is done; make sure nothing of the container survived nspawn
    for pid in netns.netns_pids(state.netns or netns.netns_name(state.name)):
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _propagate_dir(name: str) -> Path:
    return Path("/run/systemd/nspawn/propagate") / f"k26lab-{name}"


def leftovers(name: str, state: LabHostState | None = None) -> list[str]:
    """What a lab host `name` still has on this machine (empty after a clean down)."""
    found = []
    if _propagate_dir(name).exists():
        found.append(f"directory {_propagate_dir(name)}")
    ns = netns.netns_name(name)
    if netns.netns_exists(ns):
        found.append(f"netns {ns}")
    if state_dir(name).exists():
        found.append(f"state dir {state_dir(name)}")
    mounts = Path("/proc/self/mountinfo").read_text()
    for path in (str(state_dir(name)), f"/run/netns/{ns}"):
        if re.search(re.escape(path) + r"(?=[/\s,:]|$)", mounts, re.MULTILINE):
            found.append(f"mounts under {path}")
    # a veth whose other end is still in our namespace (the index itself may already be reused by
    # another lab host, so the interface name alone proves nothing)
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=False).stdout
    for line in links.splitlines():
        words = line.split()
        if "link-netns" in words and words[words.index("link-netns") + 1 :][:1] == [ns]:
            found.append(f"veth {words[1].split('@')[0]}")
    for proc_dir in Path("/proc").iterdir():
        if not proc_dir.name.isdigit():
            continue
        try:
            cmdline = (proc_dir / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"--machine=k26lab-{name}".encode() in cmdline:
            found.append(f"process {proc_dir.name}")
    return found


@contextmanager
def temporary_lab_host(name: str, install_deps: bool = False) -> Iterator[LabHostState]:
    """A lab host for the duration of a block; always torn down afterwards."""
    state = lab_up(name, install_deps=install_deps)
    try:
        yield state
    finally:
        lab_down(name)
