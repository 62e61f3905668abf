"""Fits-the-cards: the checkpoint's weights against the memory of the cards that load them.

A 455 GB GLM INT4 checkpoint on four 64 GiB cards never starts, and finding that out
costs a 20 to 45 minute cold start. When the model directory is readable the weight
files are summed and compared with what vLLM may take of the recipe's cards (their
memory times ``gpu_memory_utilization``): more than that is an error; more than
``TIGHT_FRACTION`` of it leaves too little for the KV cache and is a warning.

Off the rig the weights are usually not readable (linting on a laptop, a container path no
mount maps, a hub id): then a family that knows its reference checkpoint's size (DeepSeek
V4 Flash 0731: about 155.4 GiB, seeds) is judged by it, and the finding says so. Only the
"cannot fit" error is drawn from that nominal size: a proven 3-card launch sits within
10% of it, so a "tight fit" warning would only cry wolf.
"""

from __future__ import annotations

from serving.recipe.findings import Finding
from serving.recipe.lint_context import LintContext
from serving.recipe.rules_generic import memory_fraction, pp_size, tp_size

# vLLM's own default for --gpu-memory-utilization.
VLLM_DEFAULT_UTILIZATION = 0.9
TIGHT_FRACTION = 0.9
GIB = 1 << 30


def _card_memory_mib(ctx: LintContext, world: int) -> list[int]:
    """The memory of the ``world`` cards the engine loads (the named ones, else the first)."""
    ids = ctx.recipe.card_ids
    known = ctx.cards.memory_mib
    if ids is not None:
        indices = [int(card) for card in ids if card.isdecimal()]
        if len(indices) == len(ids):
            chosen = indices[:world]
            return [known.get(index, ctx.cards.expected_mib) for index in chosen]
        return [ctx.cards.expected_mib] * world  # UUIDs: their memory is not looked up here
    indices = sorted(known)[:world]
    sizes = [known[index] for index in indices]
    return sizes + [ctx.cards.expected_mib] * (world - len(sizes))


def _gib(size_bytes: float) -> str:
    return f"{size_bytes / GIB:.1f} GiB"


def _weights(ctx: LintContext) -> tuple[int, str, bool] | None:
    """The weights' size, how to show it, and whether it is the family's nominal size."""
    model = ctx.model
    if model is not None and model.weight_bytes is not None:
        return (
            model.weight_bytes,
            f"{_gib(model.weight_bytes)} in {model.weight_files} weight files",
            False,
        )
    family = ctx.family
    if family is None or family.checkpoint_bytes is None:
        return None
    shown = f"about {_gib(family.checkpoint_bytes)} ({family.checkpoint_name}, not readable here)"
    return family.checkpoint_bytes, shown, True


def rule_fits_cards(ctx: LintContext) -> list[Finding]:
    """An error when the weights cannot fit; a warning when they leave little room."""
    found = _weights(ctx)
    if found is None:
        return []
    weights, shown, nominal = found
    tp, _ = tp_size(ctx)
    pp, _ = pp_size(ctx)
    _, fraction, _ = memory_fraction(ctx)
    if tp is None or pp is None:
        return []
    utilization = fraction if fraction is not None and 0 < fraction <= 1 else None
    utilization = utilization or VLLM_DEFAULT_UTILIZATION
    sizes_mib = _card_memory_mib(ctx, tp * pp)
    usable_bytes = sum(sizes_mib) * (1 << 20) * utilization
    cards = f"{len(sizes_mib)} card{'s' if len(sizes_mib) != 1 else ''}"
    room = f"{cards} x {min(sizes_mib) / 1024:.0f} GiB at {utilization:g}"
    if weights > usable_bytes:
        what = f"the checkpoint ({_gib(weights)})"
        if nominal and ctx.family is not None:
            what = (
                f"the {ctx.family.checkpoint_name} checkpoint (about {_gib(weights)}, its known "
                "size: the weights are not readable here)"
            )
        reason = (
            f"{what} cannot fit on {room} "
            f"({_gib(usable_bytes)} for vLLM): it never starts; use more cards or a smaller quant"
        )
        return [Finding("fits-cards", "error", "model", shown, reason)]
    if not nominal and weights > TIGHT_FRACTION * usable_bytes:
        left = usable_bytes - weights
        reason = (
            f"a tight fit on {room}: {_gib(left)} left for the KV cache and activations "
            "(short contexts, or a start that fails for lack of cache blocks)"
        )
        return [Finding("fits-cards", "warning", "model", shown, reason)]
    return []


FIT_RULE_IDS = frozenset({"fits-cards"})
