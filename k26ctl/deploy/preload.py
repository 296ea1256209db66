"""Importing the heavy third-party libraries a deploy needs later while the profile is loaded.

The CLI starts cold: paramiko (with cryptography) and jinja2 take a good part of its start-up. A
thread imports them while the main thread loads and validates the profile and waits on the network;
whoever needs a module first simply waits for the import in progress (Python's per-module import
lock). paramiko comes through `k26ctl.remote.ssh`, which first defers paramiko's optional `invoke`;
apart from that thin module, k26ctl's own modules load on the main thread.
"""

from __future__ import annotations

import importlib
import threading

DEPLOY_MODULES = ("k26ctl.remote.ssh", "jinja2")  # the first brings paramiko


def preload(modules: tuple[str, ...] = DEPLOY_MODULES) -> threading.Thread:
    def run() -> None:
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception:  # the real import, later, reports the problem
                return

    thread = threading.Thread(target=run, name="k26ctl-preload", daemon=True)
    thread.start()
    return thread
