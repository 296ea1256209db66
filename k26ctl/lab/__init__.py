"""The lab: a test harness production code never imports.

`server/` is the CPU stand-in for SGLang (torch), `host/` the nspawn test host (root), and `demo.py`
the `k26ctl lab demo` story. The remote layer reaches a lab host only through the `k26ctl.hosts`
entry-point group (see `host/target.py`).
"""
