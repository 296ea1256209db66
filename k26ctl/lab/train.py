"""`python -m k26ctl.lab.train`: retrain the shipped lab checkpoint (see `k26ctl.lab.server.train`)."""

from __future__ import annotations

from k26ctl.lab.server.train import main

if __name__ == "__main__":
    raise SystemExit(main())
