"""``fleetctl guard sessions`` and ``guard usage``: the repairs as a person and a pipe see them.

A loopback peer answers with a recorded guard document, so the test checks what the command
prints of fleetd's answer (the daemon's side is ``tests/serving/guard/test_repairs.py``).
"""

from __future__ import annotations

import json

from tests.support.cli import run_fleetctl_here
from tests.support.jsonpeer import json_peer

GUARD = {
    "listen": "127.0.0.1:8098",
    "up": True,
    "sessions": [
        {"id": "a1b2c3d4e5f6", "key": "laptop", "depth_tokens": 91000, "requests": 40,
         "cleaned_turns": 7, "repairs": {"history": 7, "salvaged": 2}, "stale": True},
        {"id": "0f0f0f0f0f0f", "key": "ci", "depth_tokens": 1200, "requests": 2},
    ],
    "queue": {"depth": 3},
}  # fmt: skip
USAGE = [
    {"key": "laptop", "hour": "2026-12-06T04:00:00+00:00", "requests": 40,
     "prompt_tokens": 90000, "completion_tokens": 4000, "repairs": {"history": 7}},
]  # fmt: skip


def test_sessions_show_cleaned_turns_repairs_and_the_stale_mark() -> None:
    with json_peer(GUARD) as peer:
        shown = run_fleetctl_here("--url", peer.url, "guard", "sessions")
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        row = next(line for line in lines if "a1b2c3d4e5f6" in line)
        assert " 7 " in row and "history 7, salvaged 2" in row and "STALE" in row
        assert "3 waiting" in shown.stdout
        piped = run_fleetctl_here("--url", peer.url, "guard", "sessions", "--json")
        assert json.loads(piped.stdout)[0]["cleaned_turns"] == 7


def test_usage_shows_each_keys_repairs() -> None:
    with json_peer(USAGE) as peer:
        shown = run_fleetctl_here("--url", peer.url, "guard", "usage")
        assert shown.returncode == 0, shown.stderr
        assert "history 7" in shown.stdout
