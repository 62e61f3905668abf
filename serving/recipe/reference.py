"""A recipe's reference figures: what its authors measured, and where they said so.

Owners confirm a rig built from a recipe by hand against figures on forum pages; the
bench (``fleetctl bench``) judges a run against these instead. They are not launch
settings: like the canaries' expected figures they stay out of the recipe hash, and a
recipe file's ``[reference]`` table merges over its preset's key by key.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ReferenceFigures(BaseModel):
    """The published figures of a launch (tokens per second unless named otherwise).

    ``source`` says who measured them and how (a reference with no source is an opinion);
    ``cap_w``: the per-card power cap they were taken at; ``concurrency``: the streams of
    ``concurrent_total_tok_s``.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    source: str = Field(min_length=1)
    decode_tok_s: float | None = Field(default=None, gt=0)
    prefill_tok_s: float | None = Field(default=None, gt=0)
    concurrent_total_tok_s: float | None = Field(default=None, gt=0)
    concurrency: int | None = Field(default=None, ge=1)
    ttft_s_at_100k: float | None = Field(default=None, gt=0)
    decode_tok_s_at_1m: float | None = Field(default=None, gt=0)
    decode_tok_s_without_spec: float | None = Field(default=None, gt=0)
    prefill_tok_s_at_100w: float | None = Field(default=None, gt=0)
    cap_w: float | None = Field(default=None, gt=0)
    full_load_w: float | None = Field(default=None, gt=0)
