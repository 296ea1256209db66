"""The remote layer: the only place that talks to a host (and the only importer of paramiko)."""
