"""`k26ctl sweep`: the fastest configuration that still passes smoke, in few restarts."""
