"""The model builds the linter has a rule set for: a recipe names one with ``family``.

Most rules the seeds taught are true of one build only (the DeepSeek V4 Flash sm_80 fork's
``DSV4_LOGITS_ROW_CHUNK``, its DSpark drafter, its allocator): applied to every model
they refused working GLM and Qwen launches. A recipe without a ``family`` gets the
generic vLLM rules only. This module is the list of names (a leaf: the recipe model
validates ``family`` against it); the rules themselves are in ``rulesets``.

``layers`` is the build's decoder layer count, used for the partition sum when neither
the checkpoint's ``config.json`` nor the recipe's ``num_layers`` says.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    """One model build with a rule set of its own."""

    name: str
    title: str
    layers: int | None


DSV4_FLASH = Family("dsv4-flash", "DeepSeek V4 Flash (the sm_80 fork)", 43)
DSV41_FLASH = Family("dsv41-flash", "DeepSeek V4.1 Flash", 40)

FAMILIES: dict[str, Family] = {family.name: family for family in (DSV4_FLASH, DSV41_FLASH)}


def family_names() -> list[str]:
    """Known family names, sorted (for messages)."""
    return sorted(FAMILIES)
