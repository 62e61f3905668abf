"""``fleetctl events`` for people and pipes: filters reach fleetd, piped lines stay plain.

A loopback peer answers ``/api/v1/events`` with recorded rows and keeps each query, so the
filters are checked as the daemon receives them (the daemon's side, ``min_severity`` and
``card`` in SQL, is ``tests/store/test_events.py``'s).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.cli import run_fleetctl_here
from tests.support.jsonpeer import JsonPeer, json_peer

LONG = "Xid 31 on card 1: MMU page fault: " + "on CMP 170HX rigs it precedes wedges " * 8
ROWS = [
    {"id": 9, "ts": "2026-12-03T03:50:00+00:00", "kind": "xid", "card": 1, "xid": 31,
     "severity": "critical", "message": LONG.strip(), "acked": False},
    {"id": 8, "ts": "2026-12-03T03:49:00+00:00", "kind": "daemon", "card": None, "xid": None,
     "severity": "info", "message": "fleetd started", "acked": True},
]  # fmt: skip


@pytest.fixture
def peer() -> Iterator[JsonPeer]:
    with json_peer(ROWS) as server:
        yield server


def test_card_and_severity_filters_reach_fleetd(peer: JsonPeer) -> None:
    shown = run_fleetctl_here("--url", peer.url, "events", "--card", "1", "--severity", "warning")
    assert shown.returncode == 0, shown.stderr
    assert peer.queries[-1] == {"card": ["1"], "min_severity": ["warning"], "limit": ["50"]}


def test_an_unknown_severity_is_one_line_before_any_request(peer: JsonPeer) -> None:
    shown = run_fleetctl_here("--url", peer.url, "events", "--severity", "bad")
    assert shown.returncode == 2
    assert shown.stderr.strip() == (
        "fleetctl: --severity: 'bad' is not one of info, warning, critical"
    )
    assert peer.queries == []


def test_piped_events_are_plain_lines_without_padding(peer: JsonPeer) -> None:
    shown = run_fleetctl_here("--url", peer.url, "events")
    lines = shown.stdout.splitlines()
    assert lines[0].split() == ["id", "time", "kind", "severity", "card", "xid", "message"]
    assert len(lines) == 3  # one line per event, however long its message
    assert all(line == line.rstrip() for line in lines)
    assert not set(shown.stdout) & set("━─│┃╇┡")
    assert LONG.strip() in lines[1]
    assert lines[2].endswith("fleetd started (acked)")
