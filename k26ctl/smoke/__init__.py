"""Coherence smoke tests for a running SGLang server, and the degenerate-output detectors."""
