"""``fleetctl bench`` in fleetd: one run at a time, on its own thread, kept in the store.

A run measures the engine in service (never one it starts): it is refused while the
reboot-required latch is set or the engine is not ready, and warns when requests are
already running (live traffic lowers every figure). It answers at once with its id; the
CLI follows its progress (``GET /api/v1/bench/{id}``) and a Ctrl-C there stops it
(``POST /api/v1/bench/{id}/stop``): the cell under way is dropped, the finished ones kept.

Every cell is stored as it finishes. The method goes with the result: the axes and what
was clipped, the sampling, the speculative config, the build and its provenance, the caps
in force, the engine's clock (a simulated engine's scale).

A cap sweep (``--cap-sweep LO:HI:STEP``) sets every card's cap through the cap keeper
(``daemon.rig.caps``: the path the poller and ``caps apply`` use), measures one cell per
step, and recommends the best tok/J within 5% of the best throughput. The caps in force
before it are written to a marker first and put back at the end, on a stop, and at the
next fleetd start if fleetd died mid-sweep (``recover``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import httpx

from daemon.bench.engine_view import EngineFacts, engine_facts
from daemon.bench.sweep_marker import SweepMarker, clear_marker, read_marker
from daemon.rig.caps import CapKeeper
from daemon.rig.monitor import RigMonitor
from daemon.store import Latch, Store
from daemon.store.bench import BenchRow
from daemon.store.builds import BuildRow
from hwcheck.backend import BackendError, GpuBackend
from hwcheck.model import EventKind, RigSnapshot, Severity
from hwcheck.threads import run_in_thread
from serving.bench.figures import CellFigures, cell_figures, figures_from_dict
from serving.bench.load import run_cell
from serving.bench.matrix import Axes, BadAxis, Cell, Plan, plan
from serving.bench.sweep import SweepStep, recommend, sweep_caps
from serving.bench.verdict import BrakeReading, EarlierRun, judge
from serving.errors import Busy, Conflict, InvalidInput, NotFound, Refused
from serving.recipe.recipe import Recipe
from serving.runtime.engine_metrics import MetricsParseError, parse_engine_metrics
from serving.runtime.provenance import build_name
from serving.runtime.states import ServingState

log = logging.getLogger("fleetd.bench")

SWEEP_CELL = Cell(concurrency=8, depth_tokens=1_000, temperature=0.0)
SWEEP_OUTPUT_TOKENS = 128
BUILD_WAIT_S = 15.0
SETTLE_S = 1.0  # after a cap change, before measuring (the card's clocks follow in ms)


class EngineInService(Protocol):
    """The engine service as the bench reads it (``daemon.engine.service.EngineService``)."""

    recipe: Recipe
    profile: str

    def status_document(self) -> dict[str, Any]:
        """The status's ``serving`` block."""
        ...


class CurrentBuild(Protocol):
    """The build serving now (``daemon.engine.builds.BuildTracker``)."""

    def current(self, wait_s: float = 0.0) -> BuildRow | None:
        """The build of the run serving now, if captured (waiting up to ``wait_s``)."""
        ...


@dataclass(frozen=True, slots=True)
class BenchRequest:
    """What ``fleetctl bench`` asks for (None: the default axis)."""

    quick: bool = False
    concurrency: tuple[int, ...] | None = None
    depths: tuple[int, ...] | None = None
    temperatures: tuple[float, ...] | None = None
    output_tokens: int | None = None
    cap_sweep: tuple[float, float, float] | None = None

    def axes(self) -> Axes:
        """The axes asked for, defaults filled."""
        base = Axes.quick() if self.quick else Axes()
        return Axes(
            self.concurrency or base.concurrency,
            self.depths or base.depths,
            self.temperatures or base.temperatures,
            self.output_tokens or base.output_tokens,
        )


@dataclass(slots=True)
class _Running:
    run_id: int
    kind: str
    total: int
    stop: threading.Event = field(default_factory=threading.Event)
    done: int = 0
    current: str | None = None
    started_s: float = field(default_factory=time.monotonic)


class _Meter:
    """The cards' energy counters and draw through the backend (NVML or the simulated rig)."""

    def __init__(self, gpu: GpuBackend) -> None:
        self._gpu = gpu

    def read(self) -> dict[int, tuple[float | None, float | None]]:
        """Per card: (energy in mJ, draw in W)."""
        try:
            snapshot = self._gpu.snapshot()
        except BackendError:
            return {}
        return {
            c.index: (
                None if c.energy_total_mj is None else float(c.energy_total_mj),
                c.power_draw_w,
            )
            for c in snapshot.cards
            if not c.lost
        }


def live_requests(url: str) -> float | None:
    """``vllm:num_requests_running`` now (None when the engine does not say)."""
    try:
        response = httpx.get(f"{url.rstrip('/')}/metrics", timeout=5.0, trust_env=False)
        return parse_engine_metrics(response.text).gauges.get("requests_running")
    except (httpx.HTTPError, MetricsParseError):
        return None


def brake_reading(snapshot: RigSnapshot | None) -> BrakeReading:
    """The brake as ``snapshot`` shows it."""
    if snapshot is None:
        return BrakeReading(())
    braked = [c for c in snapshot.cards if not c.lost and c.power_brake_active]
    return BrakeReading(
        tuple(c.index for c in braked),
        tuple(c.power_draw_w for c in braked if c.power_draw_w is not None),
        tuple(c.sm_clock_mhz for c in braked if c.sm_clock_mhz is not None),
    )


def caps_in_force(snapshot: RigSnapshot | None) -> dict[str, float | None]:
    """Each card's power limit (by NVML index, as text for JSON)."""
    if snapshot is None:
        return {}
    return {str(c.index): c.power_limit_w for c in snapshot.cards if not c.lost}


def cards_benched(snapshot: RigSnapshot | None) -> dict[str, str]:
    """Which card sat at each index (by NVML index, as text): a card's passport finds the run."""
    if snapshot is None:
        return {}
    return {str(c.index): c.uuid for c in snapshot.cards if not c.lost and c.uuid}


class BenchService:
    """One bench run at a time against the engine in service; the sweep's caps kept safe."""

    def __init__(
        self,
        store: Store,
        engine: EngineInService | None,
        builds: CurrentBuild | None,
        caps: CapKeeper,
        gpu: GpuBackend,
        monitor: RigMonitor,
        latch_in_force: Callable[[], Latch | None],
        marker_path: Path,
        *,
        settle_s: float = SETTLE_S,
    ) -> None:
        self._store = store
        self._engine = engine
        self._builds = builds
        self._caps = caps
        self._gpu = gpu
        self._monitor = monitor
        self._latch_in_force = latch_in_force
        self._marker_path = marker_path
        self._settle_s = settle_s
        self._lock = threading.Lock()
        self._running: _Running | None = None

    # -- start ------------------------------------------------------------------------
    def recover(self) -> str | None:
        """At fleetd's start: runs left running are stopped; a dead sweep's caps put back."""
        now = datetime.now(UTC)
        self._store.end_stale_bench_runs(now)
        marker = read_marker(self._marker_path)
        if marker is None:
            return None
        restored = self._restore(marker, actor="fleetd")
        message = (
            f"a cap sweep was cut short (fleetd stopped during run {marker.run_id}): "
            f"caps put back: {restored}"
        )
        log.warning("%s", message)
        self._store.record_event(EventKind.DAEMON, Severity.WARNING, message)
        return message

    def start(self, request: BenchRequest, actor: str) -> dict[str, Any]:
        """Begin a run (refusals are ``serving.errors``); its document, state ``running``."""
        engine, url = self._check_can_run()
        facts = engine_facts(engine.recipe, url, engine.profile, self._recipe_hash())
        sweep_caps_w: list[float] = []
        try:
            axes = request.axes()
            if request.cap_sweep is not None:
                sweep_caps_w = self._check_sweep(request.cap_sweep)
                cell = replace(
                    SWEEP_CELL, concurrency=min(SWEEP_CELL.concurrency, facts.max_num_seqs)
                )
                axes = Axes((cell.concurrency,), (cell.depth_tokens,), (0.0,), SWEEP_OUTPUT_TOKENS)
            matrix = plan(axes, facts.max_num_seqs, facts.max_model_len)
        except BadAxis as exc:
            raise InvalidInput(str(exc), "bad_axis") from None
        snapshot = self._monitor.view().latest
        warnings = self._warnings(url)
        # A run right after the engine got ready: its build is being captured (a second or two).
        build = self._builds.current(BUILD_WAIT_S) if self._builds is not None else None
        method = self._method(request, facts, matrix, snapshot, build, warnings, sweep_caps_w)
        kind = "sweep" if sweep_caps_w else "matrix"
        with self._lock:
            if self._running is not None:
                raise Busy(
                    f"a bench run is under way (run {self._running.run_id}): wait for it, "
                    "or stop it (Ctrl-C in its fleetctl)",
                    "bench_running",
                )
            run_id = self._store.start_bench_run(
                kind=kind,
                quick=request.quick,
                actor=actor,
                build_id=None if build is None else build.id,
                build_name=None if build is None else _name(build),
                method=method,
                started_at=datetime.now(UTC),
            )
            total = len(sweep_caps_w) if sweep_caps_w else len(matrix.cells)
            running = self._running = _Running(run_id, kind, total)
        body: Callable[[], None]
        if sweep_caps_w:
            body = lambda: self._sweep(running, facts, matrix, sweep_caps_w)  # noqa: E731
        else:
            body = lambda: self._matrix(running, facts, matrix, build)  # noqa: E731
        run_in_thread("bench", lambda: self._guarded(running, body), log=log)
        return self.run_document(run_id)

    def _check_can_run(self) -> tuple[EngineInService, str]:
        latch = self._latch_in_force()
        if latch is not None:
            raise Refused(
                f"the reboot-required latch is set ({latch.reason}): no bench until it is cleared",
                "latched",
            )
        engine = self._engine
        if engine is None:
            raise Conflict("no engine is configured on this rig", "no_engine")
        serving = engine.status_document()
        if serving.get("state") != ServingState.READY.value or not serving.get("url"):
            raise Conflict(
                f"the engine is not ready (state {serving.get('state')}): the bench measures "
                "the engine in service; start it first (fleetctl start)",
                "engine_not_ready",
            )
        return engine, str(serving["url"])

    def _recipe_hash(self) -> str | None:
        engine = self._engine
        if engine is None:
            return None
        from serving.recipe.build import recipe_hash

        return recipe_hash(engine.recipe)

    def _warnings(self, url: str) -> list[str]:
        """Live traffic: requests already running in the engine (scraped now, not the poll's)."""
        running = live_requests(url)
        if running:
            return [
                f"live traffic: the engine was running {running:g} request(s) when the bench "
                "began (agents, the guard's clients, a canary round); every figure will read "
                "lower than on an idle engine"
            ]
        return []

    def _check_sweep(self, sweep: tuple[float, float, float]) -> list[float]:
        low, high, step = sweep
        if self._caps.dry_run:
            raise Refused(
                "recovery.dry_run is set: a cap sweep would not change the caps", "dry_run"
            )
        snapshot = self._monitor.view().latest
        caps = sweep_caps(low, high, step)
        for card in [] if snapshot is None else snapshot.cards:
            if card.lost:
                raise Refused(f"card {card.index} is lost: no cap sweep", "card_lost")
            floor, ceiling = card.power_min_limit_w, card.power_max_limit_w
            out = [
                cap
                for cap in caps
                if (floor is not None and cap < floor) or (ceiling is not None and cap > ceiling)
            ]
            if out:
                raise InvalidInput(
                    f"--cap-sweep: {', '.join(f'{c:g}' for c in out)} W outside card "
                    f"{card.index}'s range {floor:g}-{ceiling:g} W",
                    "cap_out_of_range",
                )
        return caps

    def _method(
        self,
        request: BenchRequest,
        facts: EngineFacts,
        matrix: Plan,
        snapshot: RigSnapshot | None,
        build: BuildRow | None,
        warnings: list[str],
        sweep_caps_w: list[float],
    ) -> dict[str, Any]:
        reference = facts.reference
        return {
            "axes": {
                "concurrency": list(matrix.concurrency),
                "depth_tokens": list(matrix.depths),
                "temperature": list(matrix.temperatures),
                "output_tokens": matrix.output_tokens,
                "asked": {
                    "concurrency": list(request.axes().concurrency),
                    "depth_tokens": list(request.axes().depths),
                },
            },
            "notes": list(matrix.notes),
            "warnings": warnings,
            "sampling": {
                "temperature": list(matrix.temperatures),
                "max_tokens": matrix.output_tokens,
                "ignore_eos": True,
                "stream": True,
                "unique_prefixes": True,
                "top_p": "engine default",
            },
            "speculative": facts.speculative or {"method": "none"},
            "engine": {
                "model": facts.model,
                "profile": facts.profile,
                "max_num_seqs": facts.max_num_seqs,
                "max_model_len": facts.max_model_len,
                "recipe_hash": facts.recipe_hash,
            },
            "build": build_document(build),
            "caps_w": caps_in_force(snapshot),
            "card_uuids": cards_benched(snapshot),
            "brake": brake_reading(snapshot).text(),
            "reference": None if reference is None else reference.model_dump(mode="json"),
            "sweep_caps_w": sweep_caps_w or None,
            "quick": request.quick,
        }

    # -- runs -------------------------------------------------------------------------
    def _guarded(self, running: _Running, body: Callable[[], None]) -> None:
        try:
            body()
        except Exception as exc:  # the run fails, fleetd carries on
            log.exception("bench run %s failed", running.run_id)
            self._store.update_bench_run(
                running.run_id,
                state="failed",
                error=str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                finished_at=datetime.now(UTC),
            )
        finally:
            with self._lock:
                self._running = None

    def _cell(self, running: _Running, facts: EngineFacts, cell: Cell, output: int) -> CellFigures:
        running.current = cell.key
        raw = run_cell(
            facts.url,
            facts.model,
            cell,
            output,
            f"{running.run_id}-{cell.key}",
            running.stop,
            _Meter(self._gpu),
        )
        return cell_figures(raw)

    def _matrix(
        self, running: _Running, facts: EngineFacts, matrix: Plan, build: BuildRow | None
    ) -> None:
        cells: list[CellFigures] = []
        for cell in matrix.cells:
            if running.stop.is_set():
                break
            figures = self._cell(running, facts, cell, matrix.output_tokens)
            if running.stop.is_set():
                break  # the cell under way is dropped: its streams were cut
            cells.append(figures)
            running.done += 1
            self._store.update_bench_run(running.run_id, cells=[c.as_dict() for c in cells])
        stopped = running.stop.is_set()
        verdict = self._verdict(running.run_id, cells, facts, build)
        self._store.update_bench_run(
            running.run_id,
            state="stopped" if stopped else "done",
            verdict=verdict,
            finished_at=datetime.now(UTC),
        )

    def _verdict(
        self, run_id: int, cells: list[CellFigures], facts: EngineFacts, build: BuildRow | None
    ) -> dict[str, Any]:
        same, other = self._earlier(run_id, build)
        name = "unknown" if build is None else _name(build)
        return judge(
            cells, facts.reference, brake_reading(self._monitor.view().latest), name, same, other
        ).as_dict()

    def _earlier(
        self, run_id: int, build: BuildRow | None
    ) -> tuple[EarlierRun | None, EarlierRun | None]:
        same: EarlierRun | None = None
        other: EarlierRun | None = None
        for row in self._store.list_bench_runs(limit=200, kind="matrix"):
            if row.id >= run_id or row.state not in ("done", "stopped"):
                continue
            figure = _headline_decode(row)
            if figure is None:
                continue
            earlier = EarlierRun(row.id, row.build_name or "unknown", figure)
            if build is not None and row.build_id == build.id:
                same = same or earlier
            elif other is None and row.build_id is not None:
                other = earlier
        return same, other

    def _sweep(
        self, running: _Running, facts: EngineFacts, matrix: Plan, caps_w: list[float]
    ) -> None:
        snapshot = self._gpu.snapshot()
        before = {c.index: c.power_limit_w for c in snapshot.cards if c.power_limit_w is not None}
        marker = SweepMarker.now(before, running.run_id)
        marker.write(self._marker_path)
        steps: list[SweepStep] = []
        cells: list[CellFigures] = []
        try:
            for cap in caps_w:
                if running.stop.is_set():
                    break
                running.current = f"{cap:g} W"
                self._set_caps(dict.fromkeys(before, cap), "bench")
                if running.stop.wait(self._settle_s):
                    break
                figures = self._cell(running, facts, matrix.cells[0], matrix.output_tokens)
                if running.stop.is_set():
                    break
                cells.append(figures)
                mean_w = (
                    sum(figures.power_w.values()) / len(figures.power_w)
                    if figures.power_w
                    else None
                )
                steps.append(
                    SweepStep(cap, figures.decode_tok_s_total, figures.tokens_per_joule, mean_w)
                )
                running.done += 1
                self._store.update_bench_run(
                    running.run_id,
                    cells=[c.as_dict() for c in cells],
                    sweep={"steps": [s.as_dict() for s in steps]},
                )
        finally:
            restored = self._restore(marker, actor="bench")
            log.info("cap sweep %s: caps put back: %s", running.run_id, restored)
        best = recommend(steps)
        sweep = {
            "steps": [s.as_dict() for s in steps],
            "recommended_cap_w": None if best is None else best.cap_w,
            "restored_caps_w": {str(k): v for k, v in before.items()},
            "rule": "the best tok/J within 5% of the best throughput",
        }
        text = (
            "no step measured"
            if best is None
            else (
                f"recommended cap {best.cap_w:g} W: {best.tokens_per_joule:.2f} tok/J at "
                f"{best.decode_tok_s_total:,.1f} tok/s (the best tok/J within 5% of the best "
                "throughput)"
            )
        )
        self._store.update_bench_run(
            running.run_id,
            state="stopped" if running.stop.is_set() else "done",
            sweep=sweep,
            verdict={"status": "sweep", "text": text, "comparisons": []},
            finished_at=datetime.now(UTC),
        )

    def _set_caps(self, caps_w: dict[int, float], actor: str) -> None:
        """Every card to its cap in ``caps_w`` through the cap keeper (audited like any cap)."""
        self._caps.override(caps_w)
        snapshot = self._gpu.snapshot()
        results = self._caps.apply(snapshot, actor=actor, only_off_target=False)
        failed = [r for r in results if r.outcome == "failed"]
        if failed:
            raise RuntimeError(f"card {failed[0].card}: the cap was not set: {failed[0].detail}")

    def _restore(self, marker: SweepMarker, actor: str) -> str:
        """Put the marker's caps back, then hand the cards to the configured caps again."""
        try:
            self._set_caps(marker.caps_w, actor)
        except (RuntimeError, BackendError) as exc:
            log.error("the caps could not all be put back: %s", exc)
            self._caps.override(None)
            return f"failed: {exc}"
        self._caps.override(None)
        clear_marker(self._marker_path)
        return ", ".join(f"card {card} {cap:g} W" for card, cap in sorted(marker.caps_w.items()))

    # -- reads ------------------------------------------------------------------------
    def stop(self, run_id: int) -> dict[str, Any]:
        """Stop run ``run_id`` (Ctrl-C): the cell under way dropped, the finished kept."""
        with self._lock:
            running = self._running
        if running is None or running.run_id != run_id:
            row = self._store.get_bench_run(run_id)
            if row is None:
                raise NotFound(f"no bench run {run_id}", "no_run")
            return self.run_document(run_id)
        running.stop.set()
        return self.run_document(run_id)

    def run_document(self, run_id: int) -> dict[str, Any]:
        """One run: method, cells, verdict, and its progress while it runs."""
        row = self._store.get_bench_run(run_id)
        if row is None:
            raise NotFound(f"no bench run {run_id}", "no_run")
        document = _row_document(row)
        with self._lock:
            running = self._running
        if running is not None and running.run_id == run_id:
            document["progress"] = {
                "done": running.done,
                "total": running.total,
                "current": running.current,
                "elapsed_s": round(time.monotonic() - running.started_s, 1),
                "stopping": running.stop.is_set(),
            }
        return document

    def list_document(self, limit: int) -> dict[str, Any]:
        """The runs newest first, grouped by build."""
        rows = self._store.list_bench_runs(limit=limit)
        builds: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            builds.setdefault(row.build_name or "unknown", []).append(_summary(row))
        with self._lock:
            running = None if self._running is None else self._running.run_id
        return {
            "running": running,
            "runs": [_summary(row) for row in rows],
            "builds": [{"build": name, "runs": runs} for name, runs in builds.items()],
        }

    def last_runs(self, limit: int = 5) -> list[dict[str, Any]]:
        """The newest finished runs in full (the report, the dashboard)."""
        return [
            _row_document(row)
            for row in self._store.list_bench_runs(limit=limit)
            if row.state != "running"
        ]


def _name(build: BuildRow) -> str:
    return build_name(build.build_key, build.image_digest, build.engine_version)


def build_document(build: BuildRow | None) -> dict[str, Any] | None:
    """A build's provenance as the method and the report record it."""
    if build is None:
        return None
    return {
        "id": build.id,
        "name": _name(build),
        "build_key": build.build_key,
        "recipe_hash": build.recipe_hash,
        "image": build.image,
        "image_digest": build.image_digest,
        "engine_version": build.engine_version,
        "labels": build.labels,
        "provenance_output": build.provenance_output,
    }


def _headline_decode(row: BenchRow) -> float | None:
    cells = [figures_from_dict(c) for c in row.cells]
    single = [c for c in cells if c.concurrency == 1 and c.decode_tok_s_per_stream]
    if not single:
        return None
    return min(single, key=lambda c: (c.depth_tokens, c.temperature)).decode_tok_s_per_stream


def _summary(row: BenchRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "kind": row.kind,
        "state": row.state,
        "quick": row.quick,
        "build": row.build_name,
        "started_at": row.started_at.isoformat(),
        "finished_at": None if row.finished_at is None else row.finished_at.isoformat(),
        "cells": len(row.cells),
        "verdict": (row.verdict or {}).get("text"),
    }


def _row_document(row: BenchRow) -> dict[str, Any]:
    return row.to_dict()
