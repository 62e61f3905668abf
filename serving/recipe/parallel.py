"""How a recipe spreads the model over the cards: its tensor-parallel size.

Tensor parallel all-reduces over P2P at every layer; pipeline parallel moves a few
activations through the host. So a card pair that lost P2P is critical only for a
recipe that runs tensor parallel (``p2p`` check), which this reads from the launch's
flags however they were written (``--tensor-parallel-size 2``, ``=2``, ``-tp 2``).
"""

from __future__ import annotations

from serving.recipe.flags import find_flag, split_flags
from serving.recipe.recipe import Recipe

TP_FLAGS = ("--tensor-parallel-size", "-tp")


def tensor_parallel_size(recipe: Recipe | None) -> int:
    """The recipe's tensor-parallel size (1 when it sets none, or sets nonsense)."""
    if recipe is None:
        return 1
    found = find_flag(split_flags(recipe.extra_args), *TP_FLAGS)
    if found is None or not found.value.strip().isdecimal():
        return 1
    return max(int(found.value.strip()), 1)
