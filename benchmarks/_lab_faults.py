"""The lab's healthy servers and fault variants, in one place: the calibration benchmarks
(probe_calibration.py for the greedy probes, rescore_calibration.py for the rescoring probes) run every
entry, so a new fault variant is one line here.

A variant is (lab profile, `--set` overrides, extra environment for the lab server).
"""

from __future__ import annotations

# (profile, patched: the server runs over the lab tree with the profile's patches applied)
HEALTHY: list[tuple[str, bool]] = [
    ("none", False),
    ("ddtree-b7", False),
    ("ddtree-b16-patched", True),
    ("ddtree-b7-tools", False),
]

FAULTS: dict[str, tuple[str, list[str], dict[str, str]]] = {
    "b8 unpatched": ("ddtree-b16", ["spec.ddtree.budget=8"], {}),
    "b12 unpatched": ("ddtree-b16", ["spec.ddtree.budget=12"], {}),
    "b16 unpatched, NaN rows": ("ddtree-b16", [], {"K26LAB_UNVISITED": "nan"}),
    "b16 unpatched, stale rows": ("ddtree-b16", [], {"K26LAB_UNVISITED": "stale"}),
    "b16 mask-only scope": ("ddtree-b16", [], {"K26LAB_BUG_SCOPE": "mask-only", "K26LAB_UNVISITED": "stale"}),
    "b7 subtle second-request": ("ddtree-b7-subtle", [], {}),
    "b7 tool arguments": ("ddtree-b7-toolcall", [], {}),
}

# The suite a profile is judged with (default: lab): the tool-call checkpoint's profiles are asked the
# suite with tool calls and a JSON answer.
SUITES: dict[str, str] = {"ddtree-b7-tools": "lab-tools", "ddtree-b7-toolcall": "lab-tools"}


def suite_for(profile: str) -> str:
    return SUITES.get(profile, "lab")
