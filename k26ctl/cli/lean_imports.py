"""Imports that libraries make for features k26ctl never uses, kept out of the k26ctl process.

httpx imports its own command-line client (click, pygments and five rich modules) as it loads,
whenever those are installed, and httpcore imports trio when it is installed, for trio's event loop.
k26ctl uses httpx's synchronous client only. Together they are 0.08-0.1 s of the start-up of every
command that speaks HTTP (deploy, smoke, status, fleet, sweep). Only the process entry point applies
this: a process that embeds k26ctl keeps its libraries as they are.
"""

from __future__ import annotations

import sys

from k26ctl.deferred_import import defer_import

# httpx imports this inside `try: ... except ImportError`; None in sys.modules makes it raise that.
UNUSED_SUBMODULES = ("httpx._main",)
# Loaded on first use instead: a library that really runs on trio still gets it.
DEFERRED = ("trio",)


def keep_unused_imports_out() -> None:
    for name in UNUSED_SUBMODULES:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]
    for name in DEFERRED:
        defer_import(name)
