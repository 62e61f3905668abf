"""Which build's rule set a recipe gets when it does not say: inferred from evidence.

Owners copy launches, and few add a key they have never heard of: a DeepSeek V4 Flash
launch without ``family`` must still get the fork's rules. The evidence, strongest first:

1. the checkpoint's ``config.json`` (``model_type``, ``architectures``), when readable:
   a checkpoint of another model (GLM, Qwen) gets the generic rules, whatever else says;
2. the build's own flags and environment: ``--tokenizer-mode``, ``--tool-call-parser``,
   ``--reasoning-parser`` set to ``deepseek_v4`` or ``deepseek_v41``, ``DSV4_*`` or
   ``DSV41_*`` variables;
3. the model's name (``DeepSeek-V4-Flash-0731``, ``dsv41``): the weakest hint.

V4.1 builds descend from the V4 forks and keep their marks (the V4.1 preset runs
``--tokenizer-mode deepseek_v4``; its forks read ``DSV4_*`` variables), while nothing of
V4.1 appears in a V4 launch: so one V4.1 mark anywhere picks the V4.1 rules over any
number of V4 marks. That errs on the safe side: the V4.1 rules only warn, the V4 fork's
refuse. DSpark is no mark: its drafters exist for other models too.

An explicit ``family`` always wins and ``family = "none"`` opts out; lint says in a note
which evidence chose an inferred family.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from serving.recipe.families import DSV4_FLASH, DSV41_FLASH, FAMILIES, NO_FAMILY, Family
from serving.recipe.flags import split_flags
from serving.recipe.model_dir import ModelFacts
from serving.recipe.recipe import Recipe

# The flags whose value names the build's own tokenizer and parsers.
BUILD_FLAGS = ("--tokenizer-mode", "--tool-call-parser", "--reasoning-parser")
# Names of the two checkpoints as owners write them: "DeepSeek-V4.1-Flash", "dsv41",
# "deepseek_v4_1" / "DeepSeek-V4-Flash-0731", "dsv4f". A date code ("v4-1017") is no ".1".
# The name starts a word ("builds-v4" is no "ds-v4").
_V41_NAME = re.compile(r"(?<![a-z0-9])(?:deepseek|ds)[-_ ]?v4(?:\.|_|-)?1(?!\d)")
_V4_NAME = re.compile(r"(?<![a-z0-9])(?:deepseek|ds)[-_ ]?v4(?!\d)")
_LEVELS = ("the checkpoint's config.json", "the build's flags and environment", "the model name")
CHECKPOINT, BUILD, NAME = range(3)


@dataclass(frozen=True)
class Sign:
    """One piece of evidence: which family it points at, how strong, and where it was."""

    family: Family
    level: int
    where: str


@dataclass(frozen=True)
class FamilyChoice:
    """The rule set a recipe gets and why.

    ``family`` None: the generic rules only. ``inferred``: chosen from ``signs`` (not the
    recipe's ``family`` key); ``other_model`` names a checkpoint of another model that
    overruled the build's marks.
    """

    family: Family | None
    inferred: bool
    signs: tuple[Sign, ...] = ()
    other_model: str | None = None

    def note(self) -> str | None:
        """The lint note's reason: which evidence chose (or overruled) the family."""
        if not self.inferred:
            return None
        if self.family is None:
            if self.other_model is None or not self.signs:
                return None
            marks = ", ".join(sign.where for sign in self.signs[:3])
            return (
                f"{self.other_model}: another model, so the generic rules only (the DeepSeek "
                f"marks {marks} do not apply); set family to choose a rule set"
            )
        chosen = [sign for sign in self.signs if sign.family is self.family]
        level = min(sign.level for sign in chosen)
        marks = ", ".join(sign.where for sign in chosen[:4])
        reason = f"the {self.family.title} rules apply, chosen by {_LEVELS[level]} ({marks})"
        overruled = [sign.where for sign in self.signs if sign.family is not self.family]
        if overruled:
            reason += (
                f"; V4.1 builds keep the V4 fork's marks ({', '.join(overruled[:3])}), "
                "so a V4.1 mark wins"
            )
        return reason + '; set family to say otherwise, or family = "none" for the generic rules'


def _checkpoint_signs(model: ModelFacts | None) -> tuple[list[Sign], str | None]:
    """Signs from config.json, or the other model it names (``None`` when it says nothing)."""
    if model is None or (model.model_type is None and not model.architectures):
        return [], None
    signs = []
    for family in (DSV41_FLASH, DSV4_FLASH):
        if model.model_type in family.model_types:
            signs.append(Sign(family, CHECKPOINT, f"config.json model_type {model.model_type}"))
        for name in model.architectures:
            if name in family.architectures:
                signs.append(Sign(family, CHECKPOINT, f"config.json architectures {name}"))
    if signs:
        return signs, None
    shown = model.model_type or ", ".join(model.architectures)
    what = "model_type" if model.model_type else "architectures"
    return [], f"config.json {what} {shown}"


def _build_signs(recipe: Recipe) -> list[Sign]:
    signs = []
    for group in split_flags(recipe.extra_args):
        if group.name not in BUILD_FLAGS:
            continue
        for family in (DSV41_FLASH, DSV4_FLASH):
            if group.value.strip().lower() in family.flag_values:
                signs.append(Sign(family, BUILD, f"{group.name} {group.value.strip()}"))
    for name in recipe.env:
        for family in (DSV41_FLASH, DSV4_FLASH):
            prefix = family.env_prefix
            if prefix is not None and name.upper().startswith(prefix):
                signs.append(Sign(family, BUILD, f"env {name}"))
                break
    return signs


def _name_signs(recipe: Recipe) -> list[Sign]:
    """The model's own name: the last two parts of its path or hub id (not a mount root)."""
    text = "/".join([part for part in recipe.model.lower().split("/") if part][-2:])
    if _V41_NAME.search(text):
        return [Sign(DSV41_FLASH, NAME, f"model {recipe.model}")]
    if _V4_NAME.search(text):
        return [Sign(DSV4_FLASH, NAME, f"model {recipe.model}")]
    return []


def choose_family(recipe: Recipe, model: ModelFacts | None) -> FamilyChoice:
    """The family whose rules ``recipe`` gets: its own ``family``, else the evidence's."""
    if recipe.family == NO_FAMILY:
        return FamilyChoice(None, inferred=False)
    if recipe.family is not None:
        return FamilyChoice(FAMILIES[recipe.family], inferred=False)
    checkpoint, other_model = _checkpoint_signs(model)
    signs = sorted(
        [*checkpoint, *_build_signs(recipe), *_name_signs(recipe)], key=lambda s: s.level
    )
    if other_model is not None:
        return FamilyChoice(None, True, tuple(signs), other_model)
    for family in (DSV41_FLASH, DSV4_FLASH):  # one V4.1 mark outweighs any V4 marks
        if any(sign.family is family for sign in signs):
            return FamilyChoice(family, True, tuple(signs))
    return FamilyChoice(None, True)
