"""The cards a recipe uses, as NVML indices: ``gpus = "all"`` or ``"0,1,2,3,4,5"``.

A profile on cards 0-5 is judged on cards 0-5 only: a foreign process on card 7 does not
refuse it, its checkpoint must fit those six cards, and only those cards' check results
gate its start. ``gpus`` may also name cards by UUID (as docker's ``--gpus device=``
does); those are mapped through the rig's cards.
"""

from __future__ import annotations

from collections.abc import Iterable

from serving.recipe.recipe import Recipe


def indices_of(gpus: str, cards: Iterable[tuple[int, str]]) -> frozenset[int] | None:
    """NVML indices of the cards ``gpus`` names; ``None`` for ``"all"``.

    ``cards`` are the rig's ``(index, uuid)`` pairs, for UUIDs in ``gpus``; a UUID that no
    card has is left out (the card is gone: whatever judges the rig says so).
    """
    if gpus.strip() == "all":
        return None
    by_uuid = {uuid.lower(): index for index, uuid in cards}
    found: set[int] = set()
    for card in (part.strip() for part in gpus.split(",")):
        if card.isdecimal():
            found.add(int(card))
        elif card.lower() in by_uuid:
            found.add(by_uuid[card.lower()])
    return frozenset(found)


def card_indices(recipe: Recipe, cards: Iterable[tuple[int, str]]) -> frozenset[int] | None:
    """NVML indices of the cards the recipe names; ``None`` for ``"all"``."""
    return indices_of(recipe.gpus, cards)


def gate_cards(gpus: str, cards: Iterable[tuple[int, str]]) -> frozenset[int] | None:
    """The cards whose check results gate a start of ``gpus`` (``None``: every card).

    Nothing recognised reads as every card: a gate on too many cards is safe, one on too
    few is not.
    """
    return indices_of(gpus, cards) or None
