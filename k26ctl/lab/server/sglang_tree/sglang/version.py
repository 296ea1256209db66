# The layout (and the anchor lines of triton_backend.py) follow SGLang 0.5.15.
__version__ = "0.5.15"
