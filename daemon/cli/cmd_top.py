"""``fleetctl top``: the rig's live picture, redrawn every second over the API until ``q``.

Each refresh is one ``GET /api/v1/status`` with a short timeout. When the daemon does not
answer (restarting, upgrading) the last picture stays on screen under a "reconnecting"
line and the next refresh tries again, so ``top`` outlives a daemon restart. With stdout
not a terminal it prints one frame and exits (3 when the daemon cannot be reached);
``--json`` prints that one frame as the status document (``status --json``'s) and exits.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from rich.console import RenderableType

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.live import run_live
from daemon.cli.output import EXIT_UNKNOWN, Output
from daemon.cli.topview import ViewSource, rig_view

REFRESH_TIMEOUT_S = 2.0


class TopSession:
    """The last status seen and why the latest refresh failed, if it did."""

    def __init__(self, client: FleetClient) -> None:
        self._client = dataclasses.replace(client, timeout_s=REFRESH_TIMEOUT_S)
        self.doc: dict[str, Any] | None = None
        self.error: str | None = None
        self.seen_at: datetime | None = None

    def refresh(self) -> None:
        """Fetch the status once; on failure keep the last picture and remember why."""
        try:
            doc = self._client.status()
        except ClientError as exc:
            self.error = str(exc)
            return
        self.doc, self.error, self.seen_at = doc, None, datetime.now(UTC)

    def view(self) -> RenderableType:
        """The frame for what is known now."""
        return rig_view(self.doc, ViewSource(self._client.url, self.error, self.seen_at))

    def frame(self) -> RenderableType:
        """Refresh, then draw (what ``run_live`` calls every interval)."""
        self.refresh()
        return self.view()


def top(out: Output, client: FleetClient, interval_s: float) -> int:
    """Run the live view (one frame when stdout is not a terminal); the exit code."""
    session = TopSession(client)
    if out.json_mode:  # one frame as data: the status document, even in a terminal
        session.refresh()
        if session.doc is None:
            out.fail_unknown(session.error or "no answer from fleetd")
        out.emit_json(session.doc)
        return 0
    if not out.console.is_terminal:
        session.refresh()
        if session.doc is None:
            out.fail(session.error or "no answer from fleetd", EXIT_UNKNOWN)
        out.console.print(session.view())
        return 0
    run_live(out.console, session.frame, interval_s)
    return 0
