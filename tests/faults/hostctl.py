"""Reach into a lab host around k26ctl's back: cause faults and read the host's state afterwards.

Two doors, neither of them k26ctl's own remote layer: plain `ssh` with the host's key and known_hosts
(what an operator would type), and `nsenter` into the container's namespaces from this machine (a
console that still works when sshd is down or the network is cut).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TMPFS_MARK = ".k26faults-tmpfs"  # marks a tmpfs a fault mounted over a host directory
SSH_DIR = "/etc/k26lab/ssh"  # the lab host's sshd config and host key (read-only bind)


@dataclass
class HostCtl:
    lab: Any  # k26ctl.lab.host.LabHostState
    unit: str = "sglang.service"
    unit_dir: str = "/etc/systemd/system"

    # ---- doors -------------------------------------------------------------------------------------
    def init_pid(self) -> int:
        children = Path(f"/proc/{self.lab.pid}/task/{self.lab.pid}/children").read_text().split()
        if not children:
            raise RuntimeError(f"lab host {self.lab.name}: no init process under nspawn pid {self.lab.pid}")
        return int(children[0])

    def console(self, command: str, *, check: bool = True, timeout: float = 30) -> str:
        """Run a shell command inside the host through nsenter (no SSH involved)."""
        proc = subprocess.run(
            [
                "nsenter",
                "-t",
                str(self.init_pid()),
                "-m",
                "-u",
                "-i",
                "-n",
                "-p",
                "--",
                "/bin/sh",
                "-c",
                command,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"console: {command!r} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc.stdout

    def ssh(self, command: str, *, check: bool = True, timeout: float = 30) -> str:
        proc = subprocess.run(
            [*self.lab.openssh_argv(connect_timeout=5), command],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"ssh: {command!r} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc.stdout

    # ---- state ---------------------------------------------------------------------------------------
    @property
    def unit_path(self) -> str:
        return f"{self.unit_dir}/{self.unit}"

    def unit_text(self) -> str | None:
        out = self.console(f"cat {shlex.quote(self.unit_path)} 2>/dev/null || true")
        return out or None

    def unit_sha(self) -> str | None:
        return self.file_sha(self.unit_path)

    def file_sha(self, path: str) -> str | None:
        out = self.console(f"sha256sum {shlex.quote(path)} 2>/dev/null || true").split()
        return out[0] if out else None

    def show(self, *props: str) -> dict[str, str]:
        out = self.console(f"systemctl show {shlex.quote(self.unit)} " + " ".join(f"-p {p}" for p in props))
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def active_state(self) -> str:
        return self.show("ActiveState")["ActiveState"]

    def needs_daemon_reload(self) -> bool:
        return self.show("NeedDaemonReload").get("NeedDaemonReload") == "yes"

    def leftovers_in(self, directory: str) -> list[str]:
        """Files in a directory that look like an interrupted atomic write (temp names)."""
        names = self.console(f"ls -A {shlex.quote(directory)} 2>/dev/null || true").split()
        return [n for n in names if re.search(r"(k26ctl-tmp|\.tmp|\.part|~$|\.new$)", n)]

    def main_pid(self) -> int:
        return int(self.show("MainPID")["MainPID"])

    def main_cmdline(self) -> list[str]:
        pid = self.main_pid()
        raw = self.console(f"cat /proc/{pid}/cmdline")
        return raw.split("\0")[:-1]

    def main_environ(self) -> dict[str, str]:
        pid = self.main_pid()
        raw = self.console(f"cat /proc/{pid}/environ")
        return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)

    def wait_active(self, timeout: float = 20) -> str:
        deadline = time.monotonic() + timeout
        state = self.active_state()
        while state not in ("active", "failed", "inactive") and time.monotonic() < deadline:
            time.sleep(0.2)
            state = self.active_state()
        return state

    # ---- faults ---------------------------------------------------------------------------------------
    def kill_ssh_sessions(self) -> int:
        """Kill every sshd session process (not the listener): open connections drop at once."""
        out = self.console(
            "for p in $(pgrep -f '^sshd: ' ); do "
            "case \"$(cat /proc/$p/cmdline | tr '\\0' ' ')\" in *listener*|*/usr/sbin/sshd*) ;; "
            "*) kill -9 $p && echo $p ;; esac; done",
            check=False,
        )
        return len(out.split())

    def sshd(self, action: str) -> None:
        self.console(f"systemctl {action} k26lab-sshd.service")

    def outside_link(self) -> str:
        out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True).stdout
        address = self.lab.address.rsplit(".", 1)[0] + ".1/"
        for line in out.splitlines():
            if address in line:
                return line.split()[1].split("@")[0]
        raise RuntimeError(f"no outside link for {self.lab.address}")

    @contextmanager
    def link_down(self) -> Iterator[None]:
        link = self.outside_link()
        subprocess.run(["ip", "link", "set", link, "down"], check=True)
        try:
            yield
        finally:
            subprocess.run(["ip", "link", "set", link, "up"], check=True)

    @contextmanager
    def tiny_unit_dir(self, size: str = "4k") -> Iterator[None]:
        """A full disk under the unit directory: a tmpfs of one page holding a copy of what was there."""
        quoted = shlex.quote(self.unit_dir)
        self.console(
            f"mkdir -p /run/k26faults && cp -a {quoted}/. /run/k26faults/ && "
            f"mount -t tmpfs -o size={size} tmpfs {quoted} && "
            f"touch {quoted}/{TMPFS_MARK} && cp -a /run/k26faults/{shlex.quote(self.unit)} {quoted}/"
        )
        try:
            yield
        finally:
            self.console(f"umount {quoted}; rm -rf /run/k26faults")

    def replace_host_key(self) -> None:
        """Give sshd a new host key. Its config directory is read-only, so a tmpfs holding a copy goes
        over it (marked, so heal() can take it away) and the key in the copy is regenerated."""
        config = self.console(f"cat {SSH_DIR}/sshd_config")
        match = re.search(r"^HostKey\s+(\S+)", config, re.MULTILINE)
        if match is None or not match.group(1).startswith(SSH_DIR + "/"):
            raise RuntimeError("sshd_config has no HostKey line under " + SSH_DIR)
        key = match.group(1)
        self.console(
            f"mkdir -p /run/k26faults-ssh && cp -a {SSH_DIR}/. /run/k26faults-ssh/ && "
            f"mount -t tmpfs -o size=1m tmpfs {SSH_DIR} && cp -a /run/k26faults-ssh/. {SSH_DIR}/ && "
            f"touch {SSH_DIR}/{TMPFS_MARK} && rm -f {key} {key}.pub && "
            f"ssh-keygen -q -t ed25519 -N '' -f {key} && systemctl restart k26lab-sshd.service"
        )

    def restore_host_key(self) -> None:
        self.console(
            f"if [ -e {SSH_DIR}/{TMPFS_MARK} ]; then umount {SSH_DIR}; "
            "systemctl restart k26lab-sshd.service; fi; rm -rf /run/k26faults-ssh"
        )

    @contextmanager
    def slow_link(self, rate: str = "100kbit") -> Iterator[None]:
        """Shape traffic towards the host (uploads) to `rate`, so an upload takes seconds."""
        link = self.outside_link()
        subprocess.run(
            [
                "tc",
                "qdisc",
                "replace",
                "dev",
                link,
                "root",
                "tbf",
                "rate",
                rate,
                "burst",
                "1600",
                "latency",
                "400ms",
            ],
            check=True,
        )
        try:
            yield
        finally:
            subprocess.run(["tc", "qdisc", "del", "dev", link, "root"], capture_output=True)

    def heal(self) -> None:
        """Undo any fault a test may have left: link up and unshaped, sshd with its own key, running."""
        link = self.outside_link()
        subprocess.run(["ip", "link", "set", link, "up"], capture_output=True)
        subprocess.run(["tc", "qdisc", "del", "dev", link, "root"], capture_output=True)
        self.restore_host_key()
        self.console(
            f"[ -e {shlex.quote(self.unit_dir)}/{TMPFS_MARK} ] && umount {shlex.quote(self.unit_dir)}; "
            "rm -rf /run/k26faults; systemctl start k26lab-sshd.service; "
            f"systemctl reset-failed {shlex.quote(self.unit)} 2>/dev/null; true",
            check=False,
        )
