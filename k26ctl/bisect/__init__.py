"""bisect-config: find the first bad value of a setting, or the keys that break the output, in few restarts.

Pure strategies (`numeric`, `ddmin`) decide what to test from the recorded verdicts; `session` persists
every step; `engine` runs the loop; `steps` deploys and judges one configuration.
"""
