"""``[serving] run``: the profiles to keep running at once, judged before anything starts.

Several engines on one rig must not share a card or a port: two engines on one card
fight over its memory until one dies with an out-of-memory error; two on one port, the
second cannot listen. Both are refused at config load with one line naming both profiles.
Cards are compared as the recipes write them (``gpus``: indices or UUIDs; ``"all"`` is
every card, so it overlaps any other profile); a card named once by index and once by
UUID is only caught when the engines start (the cards' holders).

``run`` with one name is the profile in force (as ``[serving] profile``). With several,
the first is the rig's primary engine (the profile in force, the status's ``serving``,
what ``fleetctl serve`` switches) and each other one runs beside it, supervised on its own
(``daemon.engine.fleet``).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from serving.profiles import ProfileSet
from serving.recipe.recipe import RecipeError


def _cards_words(cards: Sequence[str]) -> str:
    return f"card{'s' if len(cards) > 1 else ''} {', '.join(cards)}"


def clash(profiles: ProfileSet, first: str, second: str) -> str | None:
    """Why ``first`` and ``second`` cannot run side by side (None: they can)."""
    one, two = profiles.get(first).recipe, profiles.get(second).recipe
    if one.gpus == "all" or two.gpus == "all":
        whole = first if one.gpus == "all" else second
        return (
            f"profiles {first!r} and {second!r} would share cards: {whole!r} uses every "
            'card (gpus = "all"); give each its own cards'
        )
    cards_one, cards_two = one.card_ids or (), two.card_ids or ()
    shared = [card for card in cards_one if card in cards_two]
    if shared:
        return (
            f"profiles {first!r} and {second!r} both use {_cards_words(shared)}: "
            "give each engine its own cards"
        )
    if one.port and one.port == two.port:
        return (
            f"profiles {first!r} and {second!r} both listen on port {one.port}: "
            "give each engine its own port"
        )
    return None


def judge_run(profiles: ProfileSet, run: Sequence[str]) -> str:
    """The profile in force for ``run``; ``RecipeError`` (one line) for what cannot run."""
    unknown = [name for name in run if name not in profiles]
    if unknown:
        raise RecipeError(
            f"serving.run: {', '.join(repr(n) for n in unknown)} names no profile "
            f"(known: {', '.join(profiles.names)})"
        )
    for first, second in combinations(run, 2):
        why = clash(profiles, first, second)
        if why is not None:
            raise RecipeError(f"serving.run: {why}")
    return run[0]


def side_profiles(run: Sequence[str] | None) -> tuple[str, ...]:
    """The profiles ``run`` keeps running beside the primary (its first name)."""
    return () if not run else tuple(run[1:])
