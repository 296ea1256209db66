"""How results and progress look on a terminal: the libraries emit events and return results, these
modules draw them (`deploy` for deploy/rollback, `status`, `smoke`, `validate`, `patch`, `bisect`,
`sweep` and `fleet` for their commands)."""
