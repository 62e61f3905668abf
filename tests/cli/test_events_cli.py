"""``fleetctl events`` for people and pipes: filters reach fleetd, piped lines stay plain.

A loopback peer answers ``/api/v1/events`` with recorded rows and keeps each query, so the
filters are checked as the daemon receives them (the daemon's side, ``min_severity`` and
``card`` in SQL, is ``tests/store/test_events.py``'s).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.support.cli import run_fleetctl

LONG = "Xid 31 on card 1: MMU page fault: " + "on CMP 170HX rigs it precedes wedges " * 8
ROWS = [
    {"id": 9, "ts": "2026-12-03T03:50:00+00:00", "kind": "xid", "card": 1, "xid": 31,
     "severity": "critical", "message": LONG.strip(), "acked": False},
    {"id": 8, "ts": "2026-12-03T03:49:00+00:00", "kind": "daemon", "card": None, "xid": None,
     "severity": "info", "message": "fleetd started", "acked": True},
]  # fmt: skip


class Peer(ThreadingHTTPServer):
    def __init__(self) -> None:
        self.queries: list[dict[str, list[str]]] = []
        super().__init__(("127.0.0.1", 0), Handler)


class Handler(BaseHTTPRequestHandler):
    server: Peer

    def do_GET(self) -> None:
        self.server.queries.append(parse_qs(urlsplit(self.path).query))
        body = json.dumps(ROWS).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def peer() -> Iterator[Peer]:
    server = Peer()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def url(peer: Peer) -> str:
    return f"http://127.0.0.1:{peer.server_address[1]}"


def test_card_and_severity_filters_reach_fleetd(peer: Peer) -> None:
    shown = run_fleetctl("--url", url(peer), "events", "--card", "1", "--severity", "warning")
    assert shown.returncode == 0, shown.stderr
    assert peer.queries[-1] == {"card": ["1"], "min_severity": ["warning"], "limit": ["50"]}


def test_an_unknown_severity_is_one_line_before_any_request(peer: Peer) -> None:
    shown = run_fleetctl("--url", url(peer), "events", "--severity", "bad")
    assert shown.returncode == 2
    assert shown.stderr.strip() == (
        "fleetctl: --severity: 'bad' is not one of info, warning, critical"
    )
    assert peer.queries == []


def test_piped_events_are_plain_lines_without_padding(peer: Peer) -> None:
    shown = run_fleetctl("--url", url(peer), "events")
    lines = shown.stdout.splitlines()
    assert lines[0].split() == ["id", "time", "kind", "severity", "card", "xid", "message"]
    assert len(lines) == 3  # one line per event, however long its message
    assert all(line == line.rstrip() for line in lines)
    assert not set(shown.stdout) & set("━─│┃╇┡")
    assert LONG.strip() in lines[1]
    assert lines[2].endswith("fleetd started (acked)")
