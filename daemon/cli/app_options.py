"""Option types shared by fleetctl's command modules (``app``, ``app_engine``).

Kept apart so the command modules import them without importing each other; like the
command tree, this loads typer only.
"""

from __future__ import annotations

from typing import Annotated

import typer

# Plain click help: typer's rich help labels every flag "<bool>" (newer typer), as if
# ``--json`` took a value; the plain layout shows types only where a value is expected.
HELP_MARKUP = None

JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]
NoWait = Annotated[bool, typer.Option("--no-wait", help="Return at once, do not wait.")]
WaitTimeout = Annotated[
    float, typer.Option("--timeout", min=1, help="Seconds to wait (cold starts: 20-45 min).")
]


StopForeign = Annotated[
    bool,
    typer.Option(
        "--stop-foreign",
        help="First stop foreign containers holding the port or the profile's cards "
        "(SIGINT, then SIGTERM by docker|podman kill --signal, never SIGKILL; a foreign bare "
        "process is only named).",
    ),
]
