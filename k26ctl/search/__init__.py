"""The search-session core that `bisect-config` and `sweep` share.

Public: `session` (a named session's state file, event log, lock and reset hint), `eventlog` (the
append-only JSON Lines log), `assignment` (a configuration as dotted keys, and the profile with them
set), `step` (the deploy-and-judge step: deploy one configuration, smoke it), `verdict`, `restore`
(capture what was live before a search and put it back), `ops` (confirming the restarts, reset).
bisect and sweep keep only their strategies, records and presentation.
"""
