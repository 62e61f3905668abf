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

The model is not the build: the parsers and the checkpoint name DeepSeek V4, and upstream
vLLM serves it with the same parsers. The fork's own rules (``rulesets``' fork rules: the
row-chunk patch, the spawn method, its DSpark and memory findings) need evidence of the
fork itself (``fork_evidence``): its image, a ``DSV4_*`` variable, its provenance labels,
or the explicit ``family``. An upstream image with DSV4 backported, launched with those
parsers and no ``DSV4_*`` variable, gets the model's rules only, and the note says why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
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
    # Where the fork itself shows (its image, env, labels, the explicit family): empty when
    # only the model does, and then the family's fork rules are not applied.
    fork: tuple[str, ...] = ()

    def fork_missing(self) -> str | None:
        """Why the fork's own rules were left out (None when they apply or there are none)."""
        family = self.family
        if family is None or self.fork or not (family.fork_images or family.fork_label_prefix):
            return None
        images = ", ".join(sorted(family.fork_images)) or "none known"
        return (
            f"the {family.name} fork's own rules (row chunk, spawn, DSpark, memory ceiling) "
            f"are not applied: nothing here shows the fork (its image {images}, "
            f"{family.env_prefix}* env, its {family.fork_label_prefix}* labels, or "
            f'family = "{family.name}"); the parsers and the checkpoint name the model, '
            "which upstream vLLM serves too"
        )

    def note(self) -> str | None:
        """The lint note's reason: which evidence chose (or overruled) the family."""
        if not self.inferred:
            return self.fork_missing()
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
        reason += '; set family to say otherwise, or family = "none" for the generic rules'
        missing = self.fork_missing()
        return reason if missing is None else f"{reason}. {missing}"


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


def _image_repository(image: str) -> str:
    """``dsv4-a100`` of ``registry:5000/team/dsv4-a100:devel`` or ``dsv4-a100@sha256:...``."""
    name = image.split("@", 1)[0]
    head, sep, tag = name.rpartition(":")
    if sep and "/" not in tag:
        name = head
    return name.rsplit("/", 1)[-1].lower()


def fork_evidence(
    family: Family,
    recipe: Recipe,
    env: Mapping[str, str],
    labels: Mapping[str, str] | None = None,
) -> tuple[str, ...]:
    """Where ``family``'s fork itself shows: the explicit family, its image, env, labels."""
    found: list[str] = []
    if recipe.family == family.name:
        found.append(f"family = {family.name}")
    if recipe.image is not None and _image_repository(recipe.image) in family.fork_images:
        found.append(f"image {recipe.image}")
    prefix = family.env_prefix
    if prefix is not None:
        found += [f"env {name}" for name in env if name.upper().startswith(prefix)]
    label_prefix = family.fork_label_prefix
    if label_prefix is not None and labels:
        found += [f"label {name}" for name in labels if name.startswith(label_prefix)]
    return tuple(found)


def _build_signs(recipe: Recipe, env: Mapping[str, str]) -> list[Sign]:
    signs = []
    for group in split_flags(recipe.extra_args):
        if group.name not in BUILD_FLAGS:
            continue
        for family in (DSV41_FLASH, DSV4_FLASH):
            if group.value.strip().lower() in family.flag_values:
                signs.append(Sign(family, BUILD, f"{group.name} {group.value.strip()}"))
    for name in env:
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


def choose_family(
    recipe: Recipe,
    model: ModelFacts | None,
    *,
    env: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> FamilyChoice:
    """The family whose rules ``recipe`` gets: its own ``family``, else the evidence's.

    ``env``: the launch's environment as lint sees it (``[env]`` plus a launcher script's
    exports; ``recipe.env`` by default); ``labels``: the image's provenance labels, where
    the caller knows them. Both count as evidence of the fork.
    """
    env = recipe.env if env is None else env
    if recipe.family == NO_FAMILY:
        return FamilyChoice(None, inferred=False)
    if recipe.family is not None:
        family = FAMILIES[recipe.family]
        return FamilyChoice(family, False, fork=fork_evidence(family, recipe, env, labels))
    checkpoint, other_model = _checkpoint_signs(model)
    signs = sorted(
        [*checkpoint, *_build_signs(recipe, env), *_name_signs(recipe)], key=lambda s: s.level
    )
    if other_model is not None:
        return FamilyChoice(None, True, tuple(signs), other_model)
    for family in (DSV41_FLASH, DSV4_FLASH):  # one V4.1 mark outweighs any V4 marks
        if any(sign.family is family for sign in signs):
            fork = fork_evidence(family, recipe, env, labels)
            return FamilyChoice(family, True, tuple(signs), fork=fork)
    return FamilyChoice(None, True)
