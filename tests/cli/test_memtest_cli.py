"""``fleetctl diag memtest``'s pieces that need no daemon: the progress line, the block map line.

The command end to end (exit codes, JSON, an unknown pattern) runs against a real fleetd in
tests/daemon/rig/test_host_truth_e2e.py.
"""

from __future__ import annotations

from typing import Any

from daemon.cli.client import ClientError
from daemon.cli.rig.diag import MemtestArgs, _progress_text, block_map_line, plan_of


class Overview:
    """Answers ``GET /api/v1/diag/memtest`` like fleetd during a run (or fails)."""

    def __init__(self, document: dict[str, Any] | None) -> None:
        self.document = document

    def get(self, path: str) -> dict[str, Any]:
        assert path == "/api/v1/diag/memtest"
        if self.document is None:
            raise ClientError("fleetd is not reachable")
        return self.document


def test_the_progress_line_names_each_cards_pattern_pass_and_sweep() -> None:
    overview = Overview(
        {
            "running": True,
            "cards": [],
            "progress": [
                {
                    "card": 0,
                    "pattern": "walking",
                    "pass_number": 1,
                    "passes": 2,
                    "step": 17,
                    "steps": 128,
                    "bad_words": 0,
                },
                {
                    "card": 1,
                    "pattern": "stress",
                    "pass_number": 1,
                    "passes": 1,
                    "step": 40,
                    "steps": 0,
                    "bad_words": 96,
                },
            ],
        }
    )

    assert _progress_text(overview) == (
        "card 0: walking pass 1/2, sweep 17/128 | card 1: stress, cycle 40, 96 bad words"
    )
    assert _progress_text(Overview(None)) == "memory test running on the cards..."


def test_the_block_map_line_shows_the_first_blocks_and_how_many_more() -> None:
    card = {"block_kib": 2048, "blocks": [[b, 2] for b in range(20)], "blocks_failed": 300}

    assert block_map_line(card) == (
        "failed blocks (2 MiB): #0 x2, #1 x2, #2 x2, #3 x2, #4 x2, #5 x2, #6 x2, #7 x2, #8 x2, "
        "#9 x2, #10 x2, #11 x2 (and 288 more)"
    )


def test_the_flags_make_the_plan() -> None:
    plan = plan_of(MemtestArgs(gib=2.5, passes=3, minutes=1.5, inject=True), ("solid",))

    assert (plan.mib, plan.patterns, plan.passes, plan.stress_s, plan.inject) == (
        2560,
        ("solid",),
        3,
        90.0,
        True,
    )
    assert plan_of(MemtestArgs(), ("random",)).mib is None  # all free memory
