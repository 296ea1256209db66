"""SGLang settings that make speculative decoding lossy by design: which they are and how to read them.

Shared by validate (before the restart, from the rendered launch) and smoke/watch (after it, from
/server_info and the unit's environment). The facts, with their release sources, are in
k26ctl/validate/lossless.py.
"""

from __future__ import annotations

from dataclasses import dataclass

SIMULATE_ENV = "SGLANG_SIMULATE_ACC_LEN"


@dataclass(frozen=True)
class Lever:
    """One lossy-by-design setting: where it is set, the value, and at which temperatures it bites."""

    name: str  # the flag or the environment variable
    dest: str  # the server argument or variable name as /server_info or the unit shows it
    value: float
    temperatures: str  # "every temperature above 0" | "every temperature, 0 included"
    releases: str  # where it was read: the option tables or the release sources

    @property
    def setting(self) -> str:
        return f"{self.name} {self.value:g}"

    def describe(self) -> str:
        return f"{self.setting}: not lossless at {self.temperatures}"


THRESHOLDS = {
    "speculative_accept_threshold_single": "--speculative-accept-threshold-single",
    "speculative_accept_threshold_acc": "--speculative-accept-threshold-acc",
}
SAMPLED_ONLY = "every temperature above 0 (temperature 0 is verified greedily and stays lossless)"
EVERY_TEMPERATURE = "every temperature, 0 included"


def _number(value: object) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def levers(server_args: dict[str, object], environment: dict[str, str] | None = None) -> list[Lever]:
    """The lossy levers set in resolved server arguments (`/server_info`, or a parsed argv) and in the
    service environment (the unit's Environment= lines)."""
    found: list[Lever] = []
    for dest, flag in THRESHOLDS.items():
        value = _number(server_args.get(dest))
        if value is not None and value < 1.0:
            found.append(Lever(flag, dest, value, SAMPLED_ONLY, "option tables 0.5.14-0.5.23"))
    simulated = _number((environment or {}).get(SIMULATE_ENV))
    if simulated is not None and simulated > 0:
        checked = "sources 0.5.15 and 0.5.23"
        found.append(Lever(SIMULATE_ENV, SIMULATE_ENV, simulated, EVERY_TEMPERATURE, checked))
    return found
