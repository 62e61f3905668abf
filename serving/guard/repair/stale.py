"""Stale sessions: a conversation begun under another build, profile or pin set.

The seeds' advice after any server change (a new image, a patched parser, other pins) is
to start a new agent session: the old history was written by the old build and carries its
leaks and habits. The guard remembers what each session began under (the recipe hash fleetd
reports, the profile, the pins in force) and marks a session whose fingerprint no longer
matches: ``x-cmpfleet-stale`` on each response, one event, the usage view; with
``stale = "refuse"`` a 409 in OpenAI's shape that says to start a fresh session.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def fingerprint(build: str | None, profile: str | None, pins: Mapping[str, Any]) -> str:
    """A short hash of what a session runs under."""
    text = json.dumps([build or "", profile or "", dict(pins)], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def stale_message(session: str) -> str:
    """The 409's and the event's words."""
    return (
        f"session {session} began under another engine build, profile or pin set: "
        "start a fresh agent session (its history was written by the old one)"
    )
