"""What the bench needs of the engine in service, read once at a run's start.

The URL and model it serves, its slots (``--max-num-seqs``) and context
(``max_model_len``: the recipe's, else what ``/v1/models`` answers), the speculative
config, the recipe's reference figures, and the build serving now.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from serving.bench.matrix import max_num_seqs_of
from serving.recipe.recipe import Recipe
from serving.recipe.reference import ReferenceFigures


@dataclass(frozen=True, slots=True)
class EngineFacts:
    """The engine a run measures."""

    url: str
    model: str
    max_num_seqs: int
    max_model_len: int | None
    speculative: dict[str, Any] | None
    reference: ReferenceFigures | None
    profile: str | None
    recipe_hash: str | None


def served_max_model_len(url: str, model: str) -> int | None:
    """``max_model_len`` as the engine's ``/v1/models`` reports it (vLLM does), or None."""
    try:
        response = httpx.get(f"{url}/v1/models", timeout=5.0, trust_env=False)
        for entry in response.json().get("data") or []:
            if entry.get("id") == model and isinstance(entry.get("max_model_len"), int):
                return int(entry["max_model_len"])
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return None


def engine_facts(
    recipe: Recipe, url: str, profile: str | None, recipe_hash: str | None
) -> EngineFacts:
    """The facts of the engine serving ``recipe`` at ``url``."""
    model = recipe.served_model_name or recipe.model
    speculative = None
    if recipe.speculative is not None:
        speculative = recipe.speculative.model_dump(mode="json")
    return EngineFacts(
        url=url.rstrip("/"),
        model=model,
        max_num_seqs=max_num_seqs_of(recipe.extra_args),
        max_model_len=recipe.max_model_len or served_max_model_len(url.rstrip("/"), model),
        speculative=speculative,
        reference=recipe.reference,
        profile=profile,
        recipe_hash=recipe_hash,
    )
