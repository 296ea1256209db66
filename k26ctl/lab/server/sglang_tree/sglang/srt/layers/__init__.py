"""Layers of the lab tree."""
