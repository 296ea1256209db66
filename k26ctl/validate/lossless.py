"""SGLang settings that make speculative decoding lossy by design, named before the restart.

Speculative decoding is meant to emit exactly what the target model alone would sample. Three SGLang
settings give that up on purpose, for speed or for benchmarks; the server stays healthy by every other
sign (`/health` 200, good acceptance), so they are worth naming before a deploy:

- `--speculative-accept-threshold-single T` (below 1.0): accept a draft token outright when the target
  gives it probability >= T. In every release table (0.5.14 to 0.5.23; default 1.0: never).
- `--speculative-accept-threshold-acc A` (below 1.0): accept a draft token with probability
  min(1, p / A) instead of p. Same releases, same default.
  Both reach only the sampled verify path: in 0.5.15 `eagle_sample` (speculative/eagle_utils.py:620)
  verifies an all-greedy batch with `verify_tree_greedy_func` and passes the thresholds only to
  `tree_speculative_sampling_target_only` (:713-714); DFlash calls
  `compute_dflash_sampling_correct_drafts_and_bonus` only when the batch is not all greedy
  (speculative/dflash_worker_v2.py:1577-1580, thresholds read at dflash_utils.py:636-645). 0.5.23 keeps
  that split (eagle_utils.py:781, dflash_utils.py:941). So temperature 0 stays lossless and every
  temperature above 0 does not; the greedy probes cannot see them.
- `SGLANG_SIMULATE_ACC_LEN L` (above 0; environment, default -1: off): replaces the verify result with a
  forced accept length and commits draft tokens unchecked (0.5.15 speculative/spec_utils.py:99 and
  :340-356, applied after both the greedy and the sampled branch at eagle_utils.py:730; environ.py:265).
  Lossy at every temperature, 0 included. In 0.5.15 only the EAGLE-family verify (EAGLE, EAGLE3, NEXTN,
  STANDALONE, NGRAM through `eagle_sample`) reads it; 0.5.23 adds DFlash
  (dflash_utils.py:851 `apply_dflash_simulated_acceptance`) and DSpark. Releases in between were not
  checked here.

A warning by default; an error when the profile says `smoke.lossless: strict`.
"""

from __future__ import annotations

from collections.abc import Iterator

from k26ctl.lossy_levers import SIMULATE_ENV, THRESHOLDS, levers
from k26ctl.validate.context import Context
from k26ctl.validate.findings import Finding, Level
from k26ctl.validate.registry import rule


@rule
def lossless_levers(ctx: Context) -> Iterator[Finding]:
    """validate's rule: each lossy lever in the rendered launch (flags, extra_args, environment)."""
    args: dict[str, object] = {dest: ctx.args.get(dest) for dest in THRESHOLDS}
    strict = ctx.profile.smoke.lossless == "strict"
    level: Level = "error" if strict else "warning"
    for lever in levers(args, ctx.launch.env):
        where = "service.environment" if lever.name == SIMULATE_ENV else "the launch flags"
        yield Finding(
            level,
            "lossless/simulated-accept" if lever.name == SIMULATE_ENV else "lossless/relaxed-threshold",
            f"{lever.name} {lever.value:g} (in {where}) makes speculative decoding lossy by design: the "
            f"server will not emit what the target model alone would, at {lever.temperatures}",
            "drop it for a lossless server"
            + ("" if strict else "; `smoke.lossless: strict` makes this an error"),
        )
