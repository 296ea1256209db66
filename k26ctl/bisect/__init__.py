"""bisect-config: find the first bad value of a setting, or the keys that break the output, in few restarts.

Pure strategies (`numeric`, `ddmin`) decide what to test from the recorded verdicts; `session` persists
every step (on the shared session core, k26ctl.search); `engine` runs the loop; `steps` judges one
configuration (smoke, or the --run command) after the shared deploy step; `api` is the entry point.
"""
