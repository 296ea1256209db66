"""Attention backends of the lab tree."""
