"""``fleetctl top``: the rig's live picture, redrawn every second over the API until ``q``.

Each refresh is one ``GET /api/v1/status`` with a short timeout. When the daemon does not
answer (restarting, upgrading) the last picture stays on screen under a "reconnecting"
line and the next refresh tries again, so ``top`` outlives a daemon restart. Each frame
is laid out for the terminal's size at that moment (``daemon.cli.views.rigview``: at 80x24
every card, the verdict and the latch fit; a wider screen gets more columns). With
stdout not a terminal it prints one frame, unwrapped and uncoloured, and exits (3 when
the daemon cannot be reached); ``--json`` prints that one frame as the status document
(``status --json``'s) and exits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.output import EXIT_UNKNOWN, Output
from daemon.cli.views.live import run_live
from daemon.cli.views.rigview import Screen
from daemon.cli.views.screen import Line, plain
from daemon.cli.views.topview import ViewSource, rig_view

REFRESH_TIMEOUT_S = 2.0


class TopSession:
    """The last status seen and why the latest refresh failed, if it did."""

    def __init__(self, client: FleetClient, only: Collection[int] | None = None) -> None:
        self._client = dataclasses.replace(client, timeout_s=REFRESH_TIMEOUT_S)
        self._only = only
        self.doc: dict[str, Any] | None = None
        self.error: str | None = None
        self.seen_at: datetime | None = None
        self.processes = False  # each card's compute processes under it (``p`` toggles)

    def toggle_processes(self) -> None:
        """``p``: show or hide the process rows."""
        self.processes = not self.processes

    def refresh(self) -> None:
        """Fetch the status once; on failure keep the last picture and remember why."""
        try:
            doc = self._client.status()
        except ClientError as exc:
            self.error = str(exc)
            return
        self.doc, self.error, self.seen_at = doc, None, datetime.now(UTC)

    def view(self, screen: Screen) -> list[Line]:
        """The frame for what is known now, fitted to ``screen``."""
        source = ViewSource(self._client.url, self.error, self.seen_at)
        return rig_view(self.doc, source, screen=screen, only=self._only, processes=self.processes)


def top(
    out: Output, client: FleetClient, interval_s: float, only: Collection[int] | None = None
) -> int:
    """Run the live view (one frame when stdout is not a terminal); the exit code."""
    session = TopSession(client, only)
    if out.json_mode:  # one frame as data: the status document, even in a terminal
        session.refresh()
        if session.doc is None:
            out.fail_unknown(session.error or "no answer from fleetd")
        out.emit_json(session.doc)
        return 0
    if not out.is_terminal:
        session.refresh()
        if session.doc is None:
            out.fail(session.error or "no answer from fleetd", EXIT_UNKNOWN)
        session.processes = True  # one frame into a pipe: everything, processes included
        out.write(plain(session.view(Screen())))
        return 0

    def draw(screen: Screen) -> list[Line]:
        session.refresh()
        return session.view(screen)

    run_live(out.console, draw, interval_s, keys={"p": session.toggle_processes})
    return 0
