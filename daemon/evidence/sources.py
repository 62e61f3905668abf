"""What the black box reads, as callables fleetd hands in (each may raise: noted, skipped)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hwcheck.kernellog.records import KernelRecord
from hwcheck.model import ClassifiedXid, GpuSnapshot, Severity


@dataclass(frozen=True, slots=True)
class RecipeFacts:
    """The recipe in force as the black box reads it."""

    recipe_hash: str
    pp_size: int | None
    cards: tuple[int, ...]  # the recipe's cards in rank order (PP rank r on cards[r])
    partition: str | None
    block_size: int | None
    env: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class EvidenceSources:
    """Every part's reader.

    ``cards``: the last full NVML reading of each card (the last poll's); ``fresh_cards``:
    every card read from NVML now (None: no such reader, as in unit tests); ``xids``: this
    boot's Xids;
    ``log_tail(n)``: the engine log's last lines, masked; ``launch_log_tail(n)``: the
    current launch's only, the file read up to now; ``launches``: the newest launch
    and the last one that reached ready (stored, secrets masked); ``build``: the image ID,
    digest and provenance of the run; ``engine_metrics``: the engine's own figures now;
    ``guard_sessions``: the guard's sessions (None: no guard); ``deep_canaries``: the last
    deep canary verdicts; ``memtested_cards``: cards a memory test ever passed on;
    ``recipe``: the recipe in force; ``host``: driver and kernel; ``mask``: the masking of
    every text; ``record_event``: an event in the history (deferred: never blocks).
    """

    cards: Callable[[], tuple[GpuSnapshot, ...]]
    xids: Callable[[], tuple[ClassifiedXid, ...]]
    log_tail: Callable[[int], list[str]]
    launches: Callable[[], tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]]
    build: Callable[[], Mapping[str, Any] | None]
    engine_metrics: Callable[[], Mapping[str, Any] | None]
    deep_canaries: Callable[[], list[Mapping[str, Any]]]
    memtested_cards: Callable[[], frozenset[int]]
    recipe: Callable[[], RecipeFacts | None]
    host: Callable[[], Mapping[str, str | None]]
    mask: Callable[[str], str]
    record_event: Callable[[Severity, str, dict[str, Any]], None]
    engine_ready: Callable[[], str | None]  # a mark of the run when ready, else None
    card_of: Callable[[str | None], int | None]  # a PCI address's card index
    guard_sessions: Callable[[], list[Mapping[str, Any]]] | None = None
    # The current launch's lines (None: the plain tail stands in, as in unit tests).
    launch_log_tail: Callable[[int], list[str]] | None = None
    # This boot's kernel-log records (the ring a reboot wipes); None: only the Xids known.
    kernel_records: Callable[[], list[KernelRecord]] | None = None
    fresh_cards: Callable[[], tuple[GpuSnapshot, ...]] | None = None
    # A side engine's own readers by its profile (None: one engine, or no such engine).
    of_engine: Callable[[str], EvidenceSources | None] | None = None
