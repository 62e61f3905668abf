"""The black box's readers over fleetd's parts (monitor, store, engine, guard, builds)."""

from __future__ import annotations

import dataclasses
import platform
from collections.abc import Callable, Mapping
from typing import Any

from daemon.engine.service import EngineService
from daemon.evidence.sources import EvidenceSources, RecipeFacts
from daemon.rig.monitor import RigMonitor
from daemon.store import Store
from hwcheck.kernellog.records import KernelRecord
from hwcheck.memtest.results import MemtestOutcome
from hwcheck.model import EventKind, GpuSnapshot, RigSnapshot, Severity
from serving.canary.model import DEEP_NAMES
from serving.recipe.build import build_launch, recipe_hash
from serving.recipe.flags import find_flag, split_flags
from serving.recipe.masking import KnownSecrets
from serving.recipe.recipe import PARTITION_ENV, Recipe
from serving.runtime.launchers import launch_secrets
from serving.runtime.states import ServingState


def _flag_int(argv: list[str], flag: str) -> int | None:
    group = find_flag(split_flags(argv), flag)
    if group is None or not group.values:
        return None
    try:
        return int(group.values[0])
    except ValueError:
        return None


def recipe_facts(recipe: Recipe, rig_cards: tuple[int, ...]) -> RecipeFacts:
    """The recipe as triage and the fingerprint read it (its launch's flags included)."""
    spec = build_launch(recipe)
    argv = list(spec.argv)
    ids = recipe.card_ids
    cards = rig_cards
    if ids is not None and all(part.isdecimal() for part in ids):
        cards = tuple(int(part) for part in ids)
    env = recipe.effective_env()
    return RecipeFacts(
        recipe_hash=recipe_hash(recipe),
        pp_size=recipe.pipeline_parallel_size or _flag_int(argv, "--pipeline-parallel-size"),
        cards=cards,
        partition=env.get(PARTITION_ENV),
        block_size=_flag_int(argv, "--block-size"),
        env=env,
    )


def evidence_sources(
    store: Store,
    monitor: RigMonitor,
    engine: EngineService | None,
    *,
    defer: Callable[[Callable[[], None]], None],
    known: KnownSecrets,
    booted_kernel: Callable[[], str | None] = platform.release,
    guard_sessions: Callable[[], list[Mapping[str, Any]]] | None = None,
    kernel_records: Callable[[], list[KernelRecord]] | None = None,
    read_rig: Callable[[], RigSnapshot] | None = None,
    sides: Mapping[str, EngineService] | None = None,
) -> EvidenceSources:
    """Every reader the black box needs, over fleetd's own parts.

    ``read_rig``: NVML read now (the GPU backend's snapshot, what the poll calls), for the
    bundle's reading of the cards right after the stop. ``sides``: the engines beside the
    primary by profile (``of_engine`` gives a side engine's own readers).
    """

    def cards() -> tuple[GpuSnapshot, ...]:
        latest = monitor.view().latest
        return () if latest is None else latest.cards

    def build() -> Mapping[str, Any] | None:
        return _last_build(store, None)

    def deep_canaries() -> list[Mapping[str, Any]]:
        rows = store.latest_canary_results(judged_only=True)
        return [
            {
                "name": name,
                "result": row.result,
                "ts": row.ts.isoformat(),
                "message": row.message,
            }
            for name, row in sorted(rows.items())
            if name in DEEP_NAMES
        ]

    def memtested() -> frozenset[int]:
        passed: set[int] = set()
        for address, verdict in store.memtest_verdicts().items():
            index = monitor.card_index_of(address)
            if index is not None and str(verdict.get("outcome")) == MemtestOutcome.PASSED.value:
                passed.add(index)
        return frozenset(passed)

    def host() -> Mapping[str, str | None]:
        latest = monitor.view().latest
        return {
            "driver_version": None if latest is None else latest.driver_version,
            "kernel": booted_kernel(),
        }

    def mask(text: str) -> str:
        if engine is not None:
            for name in engine.profiles.names:
                known.add(launch_secrets(build_launch(engine.profiles.get(name).recipe)))
        return known.mask(text)

    def record_event(severity: Severity, message: str, details: dict[str, Any]) -> None:
        def write() -> None:
            store.record_event(EventKind.CRASH, severity, message, details=details)

        defer(write)

    sources = EvidenceSources(
        cards=cards,
        xids=monitor.xids,
        build=build,
        deep_canaries=deep_canaries,
        memtested_cards=memtested,
        host=host,
        mask=mask,
        record_event=record_event,
        card_of=monitor.card_index_of,
        guard_sessions=guard_sessions,
        kernel_records=kernel_records,
        fresh_cards=None if read_rig is None else lambda: read_rig().cards,
        **engine_readers(store, monitor, engine, None),
    )
    if not sides:
        return sources

    def of_engine(name: str) -> EvidenceSources | None:
        side = sides.get(name)
        if side is None:
            return None
        # A side engine's build: its own build tracker's (``daemon.canaries.engines``).
        return dataclasses.replace(
            sources,
            build=lambda: _last_build(store, name),
            **engine_readers(store, monitor, side, name),
        )

    return dataclasses.replace(sources, of_engine=of_engine)


def _last_build(store: Store, engine: str | None) -> Mapping[str, Any] | None:
    """The engine's newest build (``engine``: a side engine's profile; None: the primary)."""
    rows = store.list_builds(1, engine=engine)
    return None if not rows else _launch_dict(rows[0])


def engine_readers(
    store: Store, monitor: RigMonitor, engine: EngineService | None, key: str | None
) -> dict[str, Any]:
    """The readers of one engine's evidence: its log, launches, recipe, figures and ready.

    ``key``: the side engine's profile (its launch rows), ``None`` for the primary.
    """

    def launches() -> tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]:
        newest = store.list_launches(1, engine=key)
        good = store.last_ready_launch(key)
        return (
            None if not newest else _launch_dict(newest[0]),
            None if good is None else _launch_dict(good),
        )

    def recipe() -> RecipeFacts | None:
        if engine is None:
            return None
        return recipe_facts(engine.recipe, tuple(index for index, _ in _rig_ids(monitor)))

    def engine_metrics() -> Mapping[str, Any] | None:
        if engine is None:
            return None
        status = engine.supervisor.status()
        return None if status.metrics is None else status.metrics.as_dict()

    def engine_ready() -> str | None:
        if engine is None:
            return None
        status = engine.supervisor.status()
        if status.state is not ServingState.READY or status.pid is None:
            return None
        return f"{status.pid}@{status.since.isoformat()}"

    return {
        "log_tail": (lambda lines: []) if engine is None else engine.logs,
        "launch_log_tail": (lambda lines: []) if engine is None else engine.launch_logs,
        "launches": launches,
        "recipe": recipe,
        "engine_metrics": engine_metrics,
        "engine_ready": engine_ready,
    }


def _launch_dict(row: Any) -> dict[str, Any]:
    doc = dataclasses.asdict(row)
    for key, value in list(doc.items()):
        if hasattr(value, "isoformat"):
            doc[key] = value.isoformat()
    return doc


def _rig_ids(monitor: RigMonitor) -> list[tuple[int, str]]:
    latest = monitor.view().latest
    return [] if latest is None else [(card.index, card.uuid) for card in latest.cards]
