"""`python -m k26ctl.lab.serve`: the stand-in server's command (profiles/lab name it as the entrypoint).

The server itself lives in `k26ctl.lab.server`.
"""

from __future__ import annotations

from k26ctl.lab.server.serve import main

if __name__ == "__main__":
    raise SystemExit(main())
