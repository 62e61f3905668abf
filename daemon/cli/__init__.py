"""``fleetctl``: the command-line client (rich tables for people, ``--json`` for scripts)."""
