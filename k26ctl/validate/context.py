"""What every validate rule reads: the profile, its rendered launch, and the argv parsed against SGLang's
own option table. Its own module so that rule modules (rules, crossflag, ...) share it without importing
each other."""

from __future__ import annotations

from dataclasses import dataclass

from k26ctl.algorithms import algorithm as catalogued
from k26ctl.profile import Profile
from k26ctl.render import LaunchSpec
from k26ctl.validate.options import OptionTable, ParsedArgs


@dataclass
class Context:
    profile: Profile
    launch: LaunchSpec
    args: ParsedArgs
    table: OptionTable
    # name -> state from the host's patch check (applied, not-needed, ...); None when not asked
    host_patches: dict[str, str] | None = None

    @property
    def algorithm(self) -> str:
        return (self.args.get("speculative_algorithm") or "NONE").upper()

    def reads(self, flag: str) -> bool:
        """Whether the algorithm reads `flag`, by the algorithm catalogue (False where it lacks it)."""
        row = catalogued(self.algorithm)
        return row is not None and flag in row.reads

    def block_size(self) -> int | None:
        for dest in ("speculative_dflash_block_size", "speculative_num_draft_tokens"):
            value = self.args.integer(dest)
            if value is not None:
                return value
        return None

    def patch_names(self) -> set[str]:
        return set(self.profile.patches)
