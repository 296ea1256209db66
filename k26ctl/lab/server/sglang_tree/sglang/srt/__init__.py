"""Runtime of the lab tree."""
