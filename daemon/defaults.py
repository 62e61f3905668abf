"""The paths and address fleetd and fleetctl share, in a module that imports nothing heavy.

``daemon.config`` (pydantic, the Xid catalogue, the recipe settings) costs over 100 ms
to import; fleetctl needs only these names to find a local daemon's token or to show a
default in ``--help``, so they live here and ``daemon.config`` re-exports them.
"""

from __future__ import annotations

from pathlib import Path

DEFAULT_CONFIG_PATH = Path("/etc/cmpfleet/fleet.toml")
DEFAULT_STATE_DIR = Path("/var/lib/cmpfleet")
DEFAULT_LISTEN = "127.0.0.1:8170"
TOKEN_FILE = "api-token"  # noqa: S105 - a file name under the state dir, not a secret
