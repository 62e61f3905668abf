"""``[evidence]``: how much the crash bundles may keep, and when a smaller KV pool warns."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

# One bundle never grows past this: the engine log tail is what grows, and it is cut first.
BUNDLE_MAX_BYTES = 20 * 1024 * 1024


class EvidenceSettings(BaseModel):
    """``[evidence]``: the bundles' bound and the KV pool's warning threshold.

    ``max_total_mib``: every bundle together (oldest pruned first); ``kv_drop_warn_pct``:
    a KV pool this much smaller than the last good ready of the same recipe warns.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_total_mib: int = Field(default=500, ge=1, le=1_000_000)
    kv_drop_warn_pct: float = Field(default=5.0, gt=0, le=100)
