"""`k26ctl watch`: a long-running canary that catches silent corruption on a serving host between deploys.

Every interval it runs a light canary built from the smoke pieces (a few temperature-0 prompts in
flight together, their greedy self-consistency probes, the detectors, drift against a baseline kept
in the state directory), turns it into a verdict, and moves a healthy / degraded / failing /
unreachable state machine with hysteresis. The state and its evidence are exported to Prometheus
(`prometheus_client`, imported by this package alone), kept in a local history, and, for `--once`,
given as smoke's exit codes.
"""
