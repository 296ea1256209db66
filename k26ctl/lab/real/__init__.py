"""Real SGLang on the lab host: the release venvs (installed once into a machine-wide cache), the
tiny model trained on the lab corpus and its untrained twin, and the pure-torch `sgl_kernel` stand-in
SGLang 0.5.23 needs on a CPU."""
