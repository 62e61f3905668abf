"""``diag memtest``'s flags say what runs (issue 36): ``--card 0 --card 1`` tested only card 1
(now both are asked for), and ``--patterns ,,`` ran every pattern (refused in one line, before
fleetd is asked)."""

from __future__ import annotations

import pytest

from hwcheck.memtest.patterns import PATTERNS, UnknownPattern, parse_patterns
from tests.support.cli import run_fleetctl_here
from tests.support.jsonpeer import json_peer


def test_every_card_given_is_asked_for() -> None:
    """The body fleetctl sends names each card once; a stand-in fleetd records it."""
    with json_peer({"cards": [], "exit_code": 0, "message": "ok"}) as peer:
        result = run_fleetctl_here(
            "--url", peer.url, "diag", "memtest", "--card", "2", "--card", "0", "--card", "2"
        )
    assert result.returncode == 0, result.stderr
    [body] = [body for path, body in peer.posts if path == "/api/v1/diag/memtest"]
    assert body["cards"] == [0, 2] and "card" not in body


def test_patterns_of_only_separators_are_refused() -> None:
    result = run_fleetctl_here("--url", "http://127.0.0.1:1", "diag", "memtest", "--patterns", ",,")
    assert result.returncode == 2
    assert "',,' names no pattern" in result.stderr
    with pytest.raises(UnknownPattern):
        parse_patterns(" , ")
    assert parse_patterns(None) == PATTERNS
    assert parse_patterns("solid,,random") == ("solid", "random")
