"""The lab host: systemd in an nspawn container with its own sshd, in its own network namespace.

`machine` boots, provisions and removes it; `netns` owns the network namespace; `target` turns a
running lab host into an SSH target for the remote layer (registered under `k26ctl.hosts`).
"""

from __future__ import annotations

from k26ctl.lab.host.machine import (
    INNER_PROJECT_DIR,
    LabHostState,
    LabStatus,
    ensure_prerequisites,
    lab_down,
    lab_status,
    lab_up,
    leftovers,
    load_state,
    prerequisite_problem,
    sweep_crashed,
    temporary_lab_host,
)

__all__ = [
    "INNER_PROJECT_DIR",
    "LabHostState",
    "LabStatus",
    "ensure_prerequisites",
    "lab_down",
    "lab_status",
    "lab_up",
    "leftovers",
    "load_state",
    "prerequisite_problem",
    "sweep_crashed",
    "temporary_lab_host",
]
