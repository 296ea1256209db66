"""The remote layer: the only place that talks to a host (and the only importer of paramiko).

`connect` is cheap to import: paramiko and the lab code load only when a host is opened.
"""

from __future__ import annotations

from k26ctl.remote.connect import connect, connect_host

__all__ = ["connect", "connect_host"]
