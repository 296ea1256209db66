"""SGLang-shaped package tree of the k26ctl lab server.

Only the modules the lab server needs exist here, at the same relative paths as in SGLang 0.5.15,
so that source patches written for SGLang's `srt/layers/attention/triton_backend.py` apply to this
tree unchanged. The lab server imports this package from PYTHONPATH (a host copy it may have patched)
or, failing that, from the copy bundled with k26ctl.
"""

__k26lab_tree__ = True
