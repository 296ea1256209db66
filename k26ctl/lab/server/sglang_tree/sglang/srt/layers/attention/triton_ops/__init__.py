"""Torch emulations of the Triton kernels, reading their arguments the way the kernels do."""
