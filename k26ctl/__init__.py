"""k26ctl: deploy and diagnose SGLang speculative-decoding servers on a systemd GPU host."""

__version__ = "0.1.0"
