"""What every lint rule reads: the recipe, its flags split once, the model's facts, the cards.

Rules are small functions ``LintContext -> list[Finding]`` spread over the generic vLLM
rules (``rules_generic``) and the per-build rule sets (``rulesets``); they share this one
view so a flag is found however it is written (``--flag value``, ``--flag=value``, or
the typed key that emits it) and the layer count has one source.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from serving.recipe.families import Family
from serving.recipe.findings import Finding
from serving.recipe.flags import FlagGroup, find_flag, split_flags
from serving.recipe.model_dir import ModelFacts
from serving.recipe.recipe import Recipe

# The CMP 170HX unlocked (docs/domain.md "VRAM unlock bands"): a card's size when nothing says.
DEFAULT_CARD_MIB = 65536


@dataclass(frozen=True)
class RigCards:
    """The cards a recipe may run on, as far as the caller knows them.

    ``count``: cards on the rig (None: unknown, as for a recipe linted off the rig);
    ``memory_mib``: what each card reports, by NVML index (empty when not read);
    ``expected_mib``: a card's memory when it was not read (``[rig] memory_total_mib``).
    """

    count: int | None = None
    memory_mib: Mapping[int, int] = field(default_factory=dict)
    expected_mib: int = DEFAULT_CARD_MIB


@dataclass(frozen=True)
class Setting:
    """An effective value and the recipe key (or flag) it came from."""

    key: str
    value: Any


def env_key(name: str) -> str:
    """The finding key of an environment variable: ``env.NAME``."""
    return f"env.{name}"


def invalid(key: str, value: str, reason: str) -> Finding:
    """A value the rule cannot read (``invalid-value``, an error)."""
    return Finding("invalid-value", "error", key, value, reason)


class LintContext:
    """A recipe with its ``extra_args`` split into flags, its model facts and the cards."""

    def __init__(
        self,
        recipe: Recipe,
        *,
        model: ModelFacts | None,
        cards: RigCards,
        family: Family | None = None,
        layers_override: int | None = None,
        env: Mapping[str, str] | None = None,
        fork: bool = False,
    ) -> None:
        """``family``: the rule set chosen for it (``family_evidence.choose_family``).

        ``env``: the launch's environment as lint sees it (``[env]`` over a launcher
        script's exports); ``fork``: evidence of the family's fork, so its fork rules apply.
        """
        self.recipe = recipe
        self.model = model
        self.cards = cards
        self.flags: list[FlagGroup] = split_flags(recipe.extra_args)
        self.env: Mapping[str, str] = recipe.env if env is None else env
        self.family = family
        self.fork = fork
        self.layers, self.layers_source = self._layers(layers_override)

    def _layers(self, override: int | None) -> tuple[int | None, str | None]:
        """config.json when readable, else ``num_layers``, else the family's build."""
        if override is not None:
            return override, "the caller"
        if self.model is not None and self.model.layers is not None:
            return self.model.layers, self.model.layers_source
        if self.recipe.num_layers is not None:
            return self.recipe.num_layers, "num_layers"
        if self.family is not None and self.family.layers is not None:
            return self.family.layers, self.family.title
        return None, None

    def flag(self, *names: str) -> FlagGroup | None:
        """The last occurrence of any of ``names`` in ``extra_args``."""
        return find_flag(self.flags, *names)

    def setting(self, key: str, *flags: str) -> Setting | None:
        """A typed key's value, else the flag's value from ``extra_args``, else None."""
        value = getattr(self.recipe, key)
        if value is not None:
            return Setting(key, value)
        group = self.flag(*flags)
        if group is not None:
            return Setting(group.name, group.value)
        return None
