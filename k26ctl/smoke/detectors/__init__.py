"""Degenerate-output detectors: pure functions from text to named findings, grouped by family.

Where a detector lives (and where a new one belongs):
- `characters`: single characters (runs, invisible and control characters, U+FFFD, symbol share);
- `loops`: repetition over hundreds of characters (loops, tail repeats, restarts, n-gram coverage);
- `shortloops`: repetition of a line or a few words;
- `words`: words that no writer produces (fragments, non-words, word salad, stutters);
- `scripts`: writing systems mixed where no writer mixes them;
- `template`: chat-template and tokenizer debris, and the prompt said back;
- `structure`: structured output whose structure breaks (JSON, slots, keys).

`registry.DETECTORS` lists every detector once (family, function, what it reads, thresholds);
`score.score_text` runs them. docs/recipes/add-a-detector.md says how to add one.
"""

from __future__ import annotations

from k26ctl.smoke.detectors.score import MAX_ANALYSED_CHARS, TextVerdict, preload, run_detector, score_text
from k26ctl.smoke.finding import Finding

__all__ = ["MAX_ANALYSED_CHARS", "Finding", "TextVerdict", "preload", "run_detector", "score_text"]
