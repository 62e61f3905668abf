"""The engines that run beside the primary one (``[serving] run = ["a", "b", ...]``).

The first profile ``run`` names is the rig's primary engine (``daemon.runtime``'s
``engine``: the profile in force, the status's ``serving``, what ``fleetctl serve``
switches). Each other one is a ``SideEngine``: an engine service of its own (supervisor,
port, log, restart backoff, launch record, metrics scrape) whose files live under
``<state-dir>/engines/<profile>/``, so a single-engine config keeps every file where it
always was, and a recovery controller of its own that shares the primary's ports (the
latch, the rig's checks, the audit trail, the host). Keeping one controller per engine
keeps the one recovery path (``recovery.policy.decide``, with its move token) while
making each rule per engine where it must be:

- a hardware-class fault reaches every controller (each hears the Xid path and the
  poller): each stops its engine gracefully; the latch is the host's, so every start is
  refused until the reboot;
- an engine's run that ends reaches only its own controller: it alone restarts, with its
  own backoff and streak; escalation, held states and ``on_fail`` stay per engine;
- each controller's start gate reads its own engine's cards (a brake on card 6 warns the
  engine on cards 4-7, not the one on 0-3; a host-wide fault refuses both).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from daemon.engine.service import EngineService
from daemon.statedir import DIR_MODE
from recovery.actions import Action
from recovery.controller import RecoveryController
from recovery.decisions import Reason
from recovery.facts import Trigger
from recovery.ports import AuditTrail, BeforeReboot, DrainPort, StopNotice, StopWitness
from serving.engines import side_profiles
from serving.errors import NotFound
from serving.guard.repair.queue import max_num_seqs_of
from serving.profiles import ProfileSet
from web.metrics_model import EngineSeries

log = logging.getLogger("fleetd.engines")

ENGINES_DIR = "engines"


def side_state_dir(state_dir: Path, profile: str) -> Path:
    """Where a side engine keeps its files (its pid record, log, port, restart count)."""
    return state_dir / ENGINES_DIR / profile


@dataclass(frozen=True)
class SideEngine:
    """One engine beside the primary: its service and the controller that drives it."""

    name: str
    service: EngineService
    recovery: RecoveryController


class SideEngines:
    """Every side engine, keyed by profile name, in ``run``'s order."""

    def __init__(self, engines: Sequence[SideEngine] = ()) -> None:
        self._engines = {engine.name: engine for engine in engines}

    def __iter__(self) -> Iterator[SideEngine]:
        return iter(self._engines.values())

    def __len__(self) -> int:
        return len(self._engines)

    def names(self) -> tuple[str, ...]:
        """The side engines' profile names."""
        return tuple(self._engines)

    def get(self, name: str) -> SideEngine:
        """The side engine serving profile ``name`` (``NotFound`` when none does)."""
        try:
            return self._engines[name]
        except KeyError:
            raise NotFound(f"no engine {name!r} runs beside the primary one") from None

    def controllers(self) -> tuple[RecoveryController, ...]:
        """Every side engine's recovery controller (the fault listeners add each)."""
        return tuple(engine.recovery for engine in self)

    def open(self) -> None:
        """Adopt each side engine still running; start the others as autostart says."""
        for engine in self:
            if engine.service.open():
                continue
            answer = engine.recovery.request_start(Trigger.AUTOSTART, actor="fleetd")
            if not answer.started:
                log.warning("not autostarting engine %s: %s", engine.name, answer.why_not)

    def new_boot(self, boot_id: str) -> None:
        """A new boot, or fleetd's start in one: each controller judges card faults afresh."""
        for engine in self:
            engine.recovery.new_boot(boot_id)

    def begin_host_reboot(self) -> None:
        """The host goes down: no side engine's end is a crash to restart."""
        for engine in self:
            engine.recovery.begin_host_reboot()

    def end_host_reboot(self) -> None:
        """The reboot failed before the host went down: the side engines may restart again."""
        for engine in self:
            engine.recovery.end_host_reboot()

    def bring_up(self) -> None:
        """After the reboot's bring-up (the primary's): each side engine's start, decided."""
        for engine in self:
            engine.recovery.end_host_reboot()
            answer = engine.recovery.request_start(Trigger.BRING_UP, actor="fleetd")
            if not answer.started:
                log.warning(
                    "engine %s not started after the reboot: %s", engine.name, answer.why_not
                )

    def stop_all(self, trigger: Trigger, actor: str, reason: str = "") -> None:
        """Each side engine's stop, through its own controller (fleetd's exit, a reboot)."""
        for engine in self:
            answer = engine.recovery.request_stop(trigger, actor, reason)
            if not answer.stopped:
                log.warning("engine %s did not stop: %s", engine.name, answer.why_not)

    def stop_before_reboot(self, actor: str) -> tuple[str, tuple[str, ...]]:
        """A confirmed reboot: each side engine stopped cleanly by its controller; what it did.

        The reboot ends every process; a side engine is stopped the graceful way first
        (recovery rule 2), through its own controller's stop path, recorded like any stop.
        Returns the words and the names of the engines that would not stop.
        """
        words: list[str] = []
        left: list[str] = []
        for engine in self:
            engine.recovery.begin_host_reboot()
            answer = engine.recovery.request_stop(Trigger.HOST_REBOOT, actor, "the host reboots")
            words.append(f"engine {engine.name} {'stopped' if answer.stopped else 'not stopped'}")
            if not answer.stopped:
                left.append(engine.name)
                log.warning(
                    "engine %s did not stop before the reboot: %s", engine.name, answer.why_not
                )
        return "; ".join(words), tuple(left)

    def attach_witness(self, witness: StopWitness) -> None:
        """The black box hears each side controller's events, each note naming its engine.

        A side engine's own crash is then kept with its own log and launches; a host-wide
        Xid, which every controller hears, is kept once with the primary's.
        """
        for engine in self:
            engine.recovery.attach_witness(_NamedWitness(witness, engine.name))

    def status_documents(self) -> list[dict[str, Any]]:
        """Each side engine's status block (as the status's ``serving``), in ``run``'s order."""
        return [engine.service.status_document() for engine in self]

    def close(self) -> None:
        """Stop supervising (the engines keep running) and the controllers' workers."""
        for engine in self:
            engine.service.close()
            engine.recovery.close()


class _NamedWitness:
    """A ``StopWitness`` whose notes name the side engine they came from."""

    def __init__(self, witness: StopWitness, name: str) -> None:
        self._witness = witness
        self._name = name

    def witness(self, notice: StopNotice) -> None:
        """The note, with its engine (never blocks: the black box's own ``witness``)."""
        self._witness.witness(dataclasses.replace(notice, engine=self._name))


class EngineAudit:
    """The rig's audit trail as one side engine's controller writes it: reasons named.

    Every engine's controller writes the one trail; a side engine's rows begin
    ``engine NAME: `` (as its serving events do), so a restart, a hold or a refusal in
    the status's ``recovery.decisions``, the events and the alerts says whose it was.
    The primary's rows read as on a one-engine rig.
    """

    def __init__(self, audit: AuditTrail, name: str) -> None:
        self._audit = audit
        self._prefix = f"engine {name}: "

    def record(
        self,
        actor: str,
        action: Action,
        reason: str,
        result: str,
        warnings: tuple[str, ...] = (),
        reasons: tuple[Reason, ...] = (),
    ) -> None:
        """The row, its reason named by the engine."""
        self._audit.record(actor, action, self._prefix + reason, result, warnings, reasons)


def build_side_engines(
    profiles: ProfileSet | None,
    run: Sequence[str] | None,
    state_dir: Path,
    new_recovery: Callable[[AuditTrail], RecoveryController],
    audit: AuditTrail,
    wire: Callable[[ProfileSet, Path, RecoveryController], EngineService],
) -> SideEngines:
    """One side engine per profile ``run`` names after the first (none for one engine).

    ``new_recovery`` builds a controller on the primary's ports with the audit trail it
    is given (``audit``, each row's reason named by its engine); ``wire`` builds an engine
    service for one profile in its own state dir, driven by that controller.
    """
    if profiles is None:
        return SideEngines()
    engines: list[SideEngine] = []
    for name in side_profiles(run):
        directory = side_state_dir(state_dir, name)
        directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        directory.chmod(DIR_MODE)
        recovery = new_recovery(EngineAudit(audit, name))
        only = ProfileSet([profiles.get(name)], name)
        engines.append(SideEngine(name, wire(only, directory, recovery), recovery))
    return SideEngines(engines)


def share_cards(
    primary: EngineService | None, primary_recovery: RecoveryController, sides: SideEngines
) -> None:
    """Tell each engine's controller the cards the others use (a brake there is theirs).

    A power brake on card 6 then warns the engine on cards 4-7 and not the one on 0-3;
    a result on a card no engine uses still warns every engine, as on a one-engine rig.
    """
    if primary is None or not len(sides):
        return
    pairs = [(primary, primary_recovery), *((side.service, side.recovery) for side in sides)]
    for engine, recovery in pairs:
        others = [other for other, _ in pairs if other is not engine]
        recovery.attach_others_cards(partial(_cards_of, tuple(others)))


def every_engines_cards(primary: EngineService | None, sides: SideEngines) -> frozenset[int] | None:
    """The cards some engine uses: the primary's recipe cards with every side engine's.

    None as the primary's is None (its profile runs on every card, or there is no engine).
    What the judge reads as "the profile's cards" and the status's ``in_profile`` show.
    """
    if primary is None:
        return None
    own = primary.recipe_cards()
    if own is None or not len(sides):
        return own
    return own | _cards_of(tuple(side.service for side in sides))


def every_engines_profile_cards(
    primary: EngineService | None, sides: SideEngines
) -> list[int] | None:
    """The cards ``/metrics`` marks ``in_profile``: the primary's, or every engine's."""
    if primary is None:
        return None
    if not len(sides):
        return primary.profile_cards()
    engines = (primary, *(side.service for side in sides))
    return sorted({card for engine in engines for card in engine.profile_cards()})


def _cards_of(engines: Sequence[EngineService]) -> frozenset[int]:
    return frozenset(card for engine in engines for card in engine.profile_cards())


def guard_route(engine: EngineService) -> dict[str, Any]:
    """One engine as the guard routes to it: served model, URL, state, profile, build, slots."""
    status = engine.supervisor.status()
    latest = engine.latest_launch
    launch = latest[1] if latest is not None else None
    return {
        "model": engine.recipe.engine_name,
        "url": status.url,
        "state": status.state.value,
        "profile": engine.profile,
        "build": None if launch is None else launch.recipe_hash,
        "max_num_seqs": None if launch is None else max_num_seqs_of(launch.argv),
    }


def guard_routes(primary: EngineService | None, sides: SideEngines) -> tuple[dict[str, Any], ...]:
    """The guard's ``engines`` (the primary first); none with one engine (it passes through)."""
    if primary is None or not len(sides):
        return ()
    return (guard_route(primary), *(guard_route(side.service) for side in sides))


def engine_series(primary: EngineService | None, sides: SideEngines) -> tuple[EngineSeries, ...]:
    """Every engine's ``/metrics`` series (the primary first); none with one engine."""
    if primary is None or not len(sides):
        return ()
    return tuple(_series(engine) for engine in (primary, *(side.service for side in sides)))


def _series(engine: EngineService) -> EngineSeries:
    status = engine.supervisor.status()
    figures: dict[str, float | None] = {}
    if status.metrics is not None:
        figures = {k: v for k, v in status.metrics.as_dict().items() if not isinstance(v, str)}
    return EngineSeries(engine.profile, status.state, status.restarts, figures)


class DrainThenStopSides:
    """The primary controller's ``DrainPort``: the rig's drain, then the side engines' stops.

    A confirmed reboot drains the rig first (the guard sends traffic elsewhere), then each
    side engine is stopped by its own controller, then the primary's executor stops the
    primary engine and reboots. The drain's words and the stops' go to the audit trail.
    """

    def __init__(self, drain: DrainPort, sides: SideEngines) -> None:
        self._drain = drain
        self._sides = sides

    @property
    def default_grace_s(self) -> float:
        """The drain's grace (``[recovery] drain_grace_s``)."""
        return self._drain.default_grace_s

    def before_reboot(self, actor: str) -> BeforeReboot:
        """Drain, then stop every side engine; what both did, and which would not stop.

        One that would not stop makes the reboot refuse, as its own engine does.
        """
        drained = self._drain.before_reboot(actor)
        stopped, left = self._sides.stop_before_reboot(actor)
        words = drained.words if not stopped else f"{drained.words}; {stopped}"
        return BeforeReboot(words, left)
