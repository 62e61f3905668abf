"""The last good boot: each engine ready's fingerprint, held to the last good one.

At each engine ready (seen at the next poll) it keeps the boot's fingerprint
(``serving.evidence.kvpool``: the KV pool vLLM reports, the cards, the partition, the
driver and kernel) and compares it with the last good ready of the same recipe: a drop
beyond ``[evidence] kv_drop_warn_pct`` is a warning event naming the likely causes. The
pool is read from the current launch's lines only, and a ready waits (up to
``FINGERPRINT_WAIT_S``) for its own pool line: the log is read by a polling thread, and
the previous launch's figures, still in the tail, would hide the drop.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime

from daemon.evidence.fingerprints import FingerprintBook
from daemon.evidence.sources import EvidenceSources
from hwcheck.model import RigSnapshot, Severity
from serving.evidence.kvpool import BootFingerprint, CardAtReady, compare, kv_pool_of
from serving.evidence.settings import EvidenceSettings

LOG = logging.getLogger("fleetd.evidence")
FINGERPRINT_LOG_LINES = 5000
# How long a ready waits for its launch's KV pool line before it is fingerprinted without
# one: vLLM prints it before it answers ready, but the log is read by a polling thread.
FINGERPRINT_WAIT_S = 30.0


class BootWatch:
    """Fingerprints each ready once (the poll's thread calls ``on_poll``)."""

    def __init__(
        self,
        book: FingerprintBook,
        sources: EvidenceSources,
        settings: EvidenceSettings,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.book = book
        self._sources = sources
        self._settings = settings
        self._clock = clock
        self._fingerprinted: str | None = None
        self._ready_seen: tuple[str, float] | None = None  # a ready still waiting for its pool

    def on_poll(self, snapshot: RigSnapshot) -> None:
        """Fingerprint a new ready once its launch's pool line is read (or waited for)."""
        try:
            mark = self._sources.engine_ready()
        except Exception:
            mark = None
        if mark is None or mark == self._fingerprinted:
            return
        if self._ready_seen is None or self._ready_seen[0] != mark:
            self._ready_seen = (mark, self._clock())
        wait = self._clock() - self._ready_seen[1] < FINGERPRINT_WAIT_S
        try:
            taken = self.fingerprint(snapshot, wait=wait)
        except Exception:
            LOG.exception("the boot fingerprint could not be taken")
            wait = False  # a broken source: logged once, not once a poll
            taken = None
        if taken is not None or not wait:
            self._fingerprinted = mark

    def fingerprint(self, snapshot: RigSnapshot, wait: bool = False) -> BootFingerprint | None:
        """This ready's fingerprint, compared with the last good one; a warning when smaller.

        Read from the current launch's lines only: the previous launch's pool, still in the
        tail, would pass for this one's and hide the drop. ``wait``: None while the launch's
        pool line is not read yet (the caller tries again on the next poll).
        """
        recipe = self._sources.recipe()
        if recipe is None:
            return None
        reader = self._sources.launch_log_tail or self._sources.log_tail
        lines = reader(FINGERPRINT_LOG_LINES)
        kv_tokens, concurrency = kv_pool_of(lines, recipe.block_size)
        if kv_tokens is None and wait:
            return None
        wanted = set(recipe.cards) if recipe.cards else {card.index for card in snapshot.cards}
        order = list(recipe.cards) or sorted(wanted)
        by_index = {card.index: card for card in snapshot.cards}
        cards = tuple(
            CardAtReady(index, card.serial, card.memory_total_mib, card.memory_used_mib)
            for index in order
            if (card := by_index.get(index)) is not None
        )
        host = self._sources.host()
        now = BootFingerprint(
            recipe_hash=recipe.recipe_hash,
            ts=datetime.now(UTC).isoformat(timespec="seconds"),
            kv_tokens=kv_tokens,
            max_concurrency=concurrency,
            cards=cards,
            partition=recipe.partition,
            driver_version=host.get("driver_version") or snapshot.driver_version,
            kernel=host.get("kernel"),
        )
        good = self.book.last_good(recipe.recipe_hash)
        warnings = compare(now, good, self._settings.kv_drop_warn_pct)
        now = dataclasses.replace(now, warnings=warnings)
        self.book.note(now)
        for warning in warnings:
            self._sources.record_event(
                Severity.WARNING,
                f"boot fingerprint: {warning}",
                {"evidence": "kv_drop", "fingerprint": now.as_dict()},
            )
        return now
