"""``fleetctl status`` and ``top`` with several engines (issue 42): one line per engine,
named by its profile, with its cards, pid, port and restarts, within 80 columns even in a
pipe; a rig with one engine keeps its one ``engine:`` line as before."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from daemon.cli.views.rigview import Screen, all_engine_lines, engine_lines

NOW = datetime(2026, 12, 6, 10, 0, tzinfo=UTC)


def _engine(profile: str, cards: list[int], pid: int, port: int) -> dict[str, Any]:
    return {
        "state": "ready",
        "pid": pid,
        "restarts": 3,
        "since": (NOW - timedelta(minutes=12, seconds=6)).isoformat(),
        "url": f"http://127.0.0.1:{port}",
        "profile": profile,
        "cards": cards,
    }


def test_several_engines_get_a_line_each_within_80_columns_in_a_pipe() -> None:
    low = _engine("dsv4", [0, 1, 2, 3], 4194304, 65535)
    high = _engine("qwen", [4, 5, 6, 7], 4194305, 65534)
    doc = {"serving": low, "engines": [low, high]}
    lines = [line.plain for line in all_engine_lines(doc, Screen(), NOW)]
    assert lines == [
        "engine dsv4: ready (pid 4194304), cards 0-3, restarts 3, up 12m06s, port 65535",
        "engine qwen: ready (pid 4194305), cards 4-7, restarts 3, up 12m06s, port 65534",
    ]
    assert all(len(line) <= 80 for line in lines)


def test_one_engine_keeps_its_one_engine_line() -> None:
    only = _engine("default", [0, 1, 2], 42, 8000)
    doc = {"serving": only, "engines": [only]}
    lines = [line.plain for line in all_engine_lines(doc, Screen(), NOW)]
    assert lines == [line.plain for line in engine_lines(only, Screen(), NOW)]
    assert lines[0].startswith("engine: ready (pid 42), restarts 3, up 12m06s, ")
    assert "profile default on cards 0-2 (*)" in lines[0]
