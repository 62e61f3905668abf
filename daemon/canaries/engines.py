"""Canaries per engine (``[serving] run``): each side engine's output is checked too.

The primary engine's canary service is built with its watchers (``daemon.canaries.
wiring``); each side engine (``daemon.engine.fleet``) gets a service of its own here: its
rounds (short and deep, on ``[canary]``'s schedule) probe that engine's port and served
model with that profile's expectations, its verdicts are stored under its profile (the
primary's rows and every surface that reads them stay as with one engine), and a failing
round's ``on_fail`` goes to that engine's recovery controller, never the primary's: the
engine whose output is wrong is the one restarted or held.

``FleetCanaries`` is what the API reads: the primary's service as it always was (the
status's ``canaries``, ``canary run``), plus each engine's results by name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from daemon.canaries.service import CanaryService, build_canaries
from daemon.config import Settings
from daemon.engine.builds import BuildProbe, BuildTracker
from daemon.engine.fleet import SideEngine, SideEngines
from daemon.rig.monitor import RigMonitor
from daemon.store import Store
from hwcheck.checks.readings import CanaryReading
from hwcheck.threads import CrashReport
from serving.errors import NotFound
from web.metrics_model import EngineCanaries


@dataclass(frozen=True)
class SideCanary:
    """One side engine's canary service and build tracker, by the engine's profile.

    ``builds`` captures each of that engine's ready runs' build (its provenance: image,
    digest, ``/version``, labels), stores it, points that engine's launch row at it, and
    stamps its canary verdicts with it, as the primary's tracker does for the primary.
    """

    engine: str
    service: CanaryService
    builds: BuildTracker | None = None


class SideCanaries:
    """Every side engine's canary service, in ``run``'s order (none with one engine)."""

    def __init__(self, services: Sequence[SideCanary] = ()) -> None:
        self._services = tuple(services)

    def __iter__(self) -> Iterator[SideCanary]:
        return iter(self._services)

    def __len__(self) -> int:
        return len(self._services)

    def build_trackers(self) -> dict[str, BuildTracker]:
        """Each side engine's build tracker, by profile (``GET /api/v1/builds?engine=``)."""
        return {side.engine: side.builds for side in self if side.builds is not None}

    def poll_builds(self) -> None:
        """Each poll: each side engine's new ready run gets its build captured."""
        for side in self:
            if side.builds is not None:
                side.builds.poll()

    def start(self) -> None:
        """Start each side engine's schedule (with fleetd's start, after the engines open)."""
        for side in self:
            side.service.start()

    def stop(self) -> None:
        """Stop each schedule (a round in flight ends at its own timeouts)."""
        for side in self:
            side.service.stop()

    def status_entries(self) -> dict[str, list[dict[str, Any]]]:
        """Each side engine's ``canaries`` list, by profile."""
        return {side.engine: side.service.status_entries() for side in self}

    def beside(self, primary: CanaryReading) -> CanaryReading:
        """The primary's reading with each side engine's in ``others`` (``engine_output``)."""
        if not self._services:
            return primary
        others = tuple((side.engine, side.service.reading()) for side in self)
        return dataclasses.replace(primary, others=others)

    def metrics(self) -> tuple[EngineCanaries, ...]:
        """Each side engine's last verdicts for ``/metrics`` (labelled by its profile)."""
        return tuple(EngineCanaries(side.engine, side.service.metrics()[0]) for side in self)


def build_side_canaries(
    config: Settings,
    store: Store,
    sides: SideEngines,
    monitor: RigMonitor,
    on_crash: CrashReport | None = None,
    probe: BuildProbe | None = None,
) -> SideCanaries:
    """A canary service per side engine, its ``on_fail`` asking that engine's controller.

    With ``probe`` (the container runtime, the simulated one under ``--simulate``) each
    side engine also gets its build tracker, whose builds stamp its verdicts.
    """
    found: list[SideCanary] = []
    for side in sides:
        builds = None if probe is None else BuildTracker(store, side.service, probe, config.serving)
        service = build_canaries(
            config,
            store,
            side.service,
            monitor,
            on_crash,
            builds=builds,
            ask_recovery=partial(_ask_side, side),
            side=side.name,
        )
        found.append(SideCanary(side.name, service, builds))
    return SideCanaries(found)


def _ask_side(side: SideEngine, action: str, reason: str) -> str:
    """``on_fail`` of a side engine's round: its own controller decides.

    The reason goes in bare: the side engine's audit trail (``EngineAudit``) and its
    serving events already begin ``engine NAME: ``, so naming it here too read twice.
    """
    return side.recovery.on_canary_failure(action, reason)


class FleetCanaries:
    """The API's canaries (``web.routes.canaries.CanaryControl``) on a rig of several engines.

    The primary engine's service answers as it always did (the status's ``canaries``,
    ``canary run``); ``GET /api/v1/canary`` adds ``engines``, each engine's last results
    by its profile, the primary first, so ``fleetctl canary status`` shows every engine.
    """

    def __init__(
        self, primary: CanaryService, primary_engine: Callable[[], str], sides: SideCanaries
    ) -> None:
        self._primary = primary
        self._primary_engine = primary_engine  # read each time: a switch changes the profile
        self._sides = sides

    def status_entries(self) -> list[dict[str, Any]]:
        """The primary engine's ``canaries`` list (the status's top-level ``canaries``)."""
        return self._primary.status_entries()

    def log_signature_entries(self) -> list[dict[str, Any]]:
        """The primary engine's log-signature counts."""
        return self._primary.log_signature_entries()

    def run_canaries(
        self, force: bool, deep: bool = False, engine: str | None = None
    ) -> dict[str, Any]:
        """One round now on ``engine`` (``canary run NAME``; None: the primary engine)."""
        primary = self._primary_engine()
        if engine is None or engine == primary:
            return self._primary.run_canaries(force, deep)
        for side in self._sides:
            if side.engine == engine:
                return side.service.run_canaries(force, deep)
        names = ", ".join([primary, *(side.engine for side in self._sides)])
        raise NotFound(f"no engine {engine!r} on this rig (engines: {names})")

    def canary_document(self, limit: int) -> dict[str, Any]:
        """The primary's document, with ``engines`` (every engine's results) when several run."""
        document = self._primary.canary_document(limit)
        if len(self._sides):
            document["engines"] = [
                {
                    "engine": self._primary_engine(),
                    "canaries": document["canaries"],
                    "log_signatures": document["log_signatures"],
                },
                *(
                    {"engine": engine, "canaries": entries}
                    for engine, entries in self._sides.status_entries().items()
                ),
            ]
        return document
