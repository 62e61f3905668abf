"""The last good boot: the KV pool vLLM reports at ready, and what a smaller one means.

Owners read the KV pool as the fingerprint of a good boot: the same recipe on the same
cards gives the same pool (one reports 797,299 tokens; the seeds show 798,660 against
1,476,563 after rebalancing the layer partition), so a pool that shrank names a change
of the host (driver, kernel), of a card (less memory reported) or of the partition.
Pure: lines and numbers in, a fingerprint and a comparison out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

# vLLM's worker line at the end of profiling, and its concurrency line right after it.
_KV_TOKENS = re.compile(r"GPU KV cache size:\s*([\d,]+)\s*tokens")
_NUM_BLOCKS = re.compile(r"num_gpu_blocks[\"']?\s*[=:]\s*[\"']?(\d+)")
_CONCURRENCY = re.compile(r"Maximum concurrency for\s*([\d,]+)\s*tokens per request:\s*([\d.]+)x")


@dataclass(frozen=True, slots=True)
class CardAtReady:
    """One card after the model loaded: memory used and what remained free."""

    index: int
    serial: str | None
    memory_total_mib: int | None
    memory_used_mib: int | None

    @property
    def free_mib(self) -> int | None:
        """What the card still has free (None when NVML did not say)."""
        if self.memory_total_mib is None or self.memory_used_mib is None:
            return None
        return self.memory_total_mib - self.memory_used_mib


@dataclass(frozen=True, slots=True)
class BootFingerprint:
    """What one ready looked like: the KV pool, the concurrency, the cards, the partition.

    ``kv_tokens`` from "GPU KV cache size: N tokens" (or ``num_gpu_blocks`` times the
    block size); ``last_rank_free_mib`` the last pipeline rank's free margin, where an
    out-of-memory at depth shows first.
    """

    recipe_hash: str
    ts: str
    kv_tokens: int | None
    max_concurrency: float | None
    cards: tuple[CardAtReady, ...]
    partition: str | None
    driver_version: str | None = None
    kernel: str | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def last_rank_free_mib(self) -> int | None:
        """The last card's free memory after load (the last pipeline rank)."""
        return self.cards[-1].free_mib if self.cards else None

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (status, API, bundle)."""
        doc = asdict(self)
        doc["last_rank_free_mib"] = self.last_rank_free_mib
        return doc

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> BootFingerprint:
        """Back from :meth:`as_dict` (a stored fingerprint)."""
        cards = tuple(
            CardAtReady(
                int(card["index"]),
                card.get("serial"),
                card.get("memory_total_mib"),
                card.get("memory_used_mib"),
            )
            for card in doc.get("cards") or ()
        )
        return cls(
            recipe_hash=str(doc.get("recipe_hash", "")),
            ts=str(doc.get("ts", "")),
            kv_tokens=doc.get("kv_tokens"),
            max_concurrency=doc.get("max_concurrency"),
            cards=cards,
            partition=doc.get("partition"),
            driver_version=doc.get("driver_version"),
            kernel=doc.get("kernel"),
            warnings=tuple(doc.get("warnings") or ()),
        )


def kv_pool_of(
    lines: Iterable[str], block_size: int | None = None
) -> tuple[int | None, float | None]:
    """The KV pool in tokens and the maximum concurrency the engine's lines report.

    The last report wins (a relaunch in the same log prints its own). Without the tokens
    line, ``num_gpu_blocks`` times ``block_size`` when both are known.
    """
    tokens: int | None = None
    blocks: int | None = None
    concurrency: float | None = None
    for line in lines:
        if (match := _KV_TOKENS.search(line)) is not None:
            tokens = int(match.group(1).replace(",", ""))
        if (match := _NUM_BLOCKS.search(line)) is not None:
            blocks = int(match.group(1))
        if (match := _CONCURRENCY.search(line)) is not None:
            concurrency = float(match.group(2))
    if tokens is None and blocks is not None and block_size:
        tokens = blocks * block_size
    return tokens, concurrency


def drop_pct(before: int, after: int) -> float:
    """How much smaller ``after`` is than ``before``, in percent (0 when it grew)."""
    if before <= 0 or after >= before:
        return 0.0
    return 100.0 * (before - after) / before


def compare(now: BootFingerprint, good: BootFingerprint | None, warn_pct: float) -> tuple[str, ...]:
    """Warnings when ``now``'s KV pool fell more than ``warn_pct`` below ``good``'s.

    Each warning names the drop and the likely causes that the two boots show: a driver or
    kernel change since, a card that reports less memory (named), a changed partition.
    ``good`` must be the last good ready of the same recipe hash (None: nothing to compare).
    """
    if good is None or now.kv_tokens is None or good.kv_tokens is None:
        return ()
    pct = drop_pct(good.kv_tokens, now.kv_tokens)
    if pct <= warn_pct:
        return ()
    causes = list(_causes(now, good))
    head = (
        f"KV cache pool {now.kv_tokens:,} tokens, {pct:.1f}% below the last good boot of this "
        f"recipe ({good.kv_tokens:,} tokens at {good.ts})"
    )
    if not causes:
        return (
            f"{head}: no driver, kernel, card or partition change seen; compare the "
            "engine log's memory profiling lines of both boots",
        )
    return (f"{head}; likely: " + "; ".join(causes),)


def _causes(now: BootFingerprint, good: BootFingerprint) -> Sequence[str]:
    causes: list[str] = []
    if now.driver_version != good.driver_version and None not in (
        now.driver_version,
        good.driver_version,
    ):
        causes.append(f"driver changed {good.driver_version} -> {now.driver_version}")
    if now.kernel != good.kernel and None not in (now.kernel, good.kernel):
        causes.append(f"kernel changed {good.kernel} -> {now.kernel}")
    before = {card.index: card for card in good.cards}
    for card in now.cards:
        old = before.get(card.index)
        if (
            old is not None
            and card.memory_total_mib is not None
            and old.memory_total_mib is not None
            and card.memory_total_mib < old.memory_total_mib
        ):
            who = f"card {card.index}" + (f" (serial {card.serial})" if card.serial else "")
            causes.append(
                f"{who} reports {card.memory_total_mib:,} MiB, was {old.memory_total_mib:,} MiB"
            )
    if now.partition != good.partition:
        causes.append(
            f"layer partition changed {good.partition or 'even'} -> {now.partition or 'even'}"
        )
    return causes
