"""``fleetctl diag memtest --inject`` says what the self-test planted, without ``--json``."""

from __future__ import annotations

from daemon.cli.rig.diag import planted_lines


def test_each_card_says_how_many_planted_faults_were_found() -> None:
    cards = [
        {"card": 0, "planted": 6, "planted_found": 6},
        {"card": 1, "planted": 6, "planted_found": 5},
        {"card": 2, "planted": 0},  # no self-test asked: nothing to say
    ]
    assert planted_lines(cards) == [
        "card 0: self-test: 6 of 6 planted faults found (the test sees faults; left out of "
        "the counts)",
        "card 1: self-test: 5 of 6 planted faults found (NOT ALL FOUND: do not trust it; left "
        "out of the counts)",
    ]
