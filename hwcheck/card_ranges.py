"""``cards 0-3``: a set of cards as people read it, the one wording everywhere.

Status, ``top``, the dashboard's banner and the webhooks name a board-level fault's cards
the same way (``hwcheck.causes``, ``daemon.store.alert_batch``, fleetctl's views). No
imports: fleetctl's ``status`` loads it without the rest of ``hwcheck``.
"""

from __future__ import annotations

from collections.abc import Iterable


def cards_text(cards: Iterable[int]) -> str:
    """``card 2``, ``cards 0-3``, ``cards 0, 1``, ``cards 0, 2, 5-7``: runs of 3 as ranges."""
    ordered = sorted({int(card) for card in cards})
    runs: list[list[int]] = []
    for card in ordered:
        if runs and card == runs[-1][-1] + 1:
            runs[-1].append(card)
        else:
            runs.append([card])
    parts = [
        f"{run[0]}-{run[-1]}" if len(run) > 2 else ", ".join(str(card) for card in run)
        for run in runs
    ]
    return f"{'card' if len(ordered) == 1 else 'cards'} {', '.join(parts)}"
