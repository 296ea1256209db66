"""`k26ctl doctor`: one read-only pass over a host, judged against the conformance inventory.

`collect` gathers the facts (GPU, SGLang and its tree, patches, the unit, one load's journal, the HTTP
surface), `checks` compares them with `inventory` (k26ctl/data/conformance.yaml, kept equal to
docs/conformance.md by a test) and with the cross-flag rules, and `bundle` writes the facts, secrets
removed, for a bug report that `doctor --explain` reads back offline.
"""
