"""``SimulatedBackend``: the ``GpuBackend`` of a simulated rig, shaped like NVML's answers.

The rig holds the truth (scenario plus runtime faults); this module presents it the way
the NVML backend would: one ``RigSnapshot`` per call, lost cards with their identity but
no readings, and power limits validated like NVML does. Readings that come from the
scenario move a little between samples, deterministically (a function of the sample
number and card index, no random generator), so charts look alive while every check
stays far from its thresholds and no test can flake. The energy counter (NVML's total
energy since the driver loaded) is the power drawn integrated over the simulated boot:
it starts as if the first reading had been drawn since boot and goes back to 0 at a
simulated reboot, as a real driver's does at a real one.
"""

from __future__ import annotations

import math
import threading
import time
from concurrent.futures import Future
from dataclasses import replace
from datetime import datetime
from typing import Any, Protocol

from hwcheck.backend import BackendUnavailable
from hwcheck.model import GpuSnapshot, LostKind, RigSnapshot
from hwcheck.nvml.errors import nvml_unavailable
from hwcheck.sim.card import SimCard
from hwcheck.sim.power_model import draw_w as loaded_draw_w
from hwcheck.sim.scenario import Scenario
from hwcheck.sim.workload import EngineLoad, loaded
from hwcheck.timed_calls import CallTimedOut, TimedCaller, TooManyStuckCalls

# Peak deviation of jittered readings: small next to any check's margin.
POWER_DRAW_JITTER_W = 1.5
TEMPERATURE_JITTER_C = 0.8

# What the engine's load sets, unless a scenario or the fault API set it on the card.
_LOAD_FIELDS = (
    "memory_used_mib",
    "utilization_gpu_pct",
    "utilization_memory_pct",
    "pcie_tx_kib_s",
    "pcie_rx_kib_s",
)

# What a lost card still reports: the identity the driver learned before it went away.
_LOST_CARD_KEEPS = ("index", "pci_bus_id", "uuid", "name", "serial", "pci_device_id")


def _wave(sample: int, index: int, phase: float) -> float:
    """A deterministic value in [-1, 1] for one sample of one card."""
    return math.sin(sample * 0.9 + index * 2.3 + phase)


def present_card(sim: SimCard, sample: int, load: EngineLoad | None = None) -> GpuSnapshot:
    """The card as NVML would return it in sample number ``sample``, under ``load``."""
    card = sim.card
    if card.lost:
        return lost_card(sim, card.lost_reason, LostKind(card.lost_kind or LostKind.GPU_IS_LOST))
    draw_w = card.power_draw_w
    braked = card.power_brake_active or "power_draw_w" in sim.overridden
    if draw_w is not None and load is not None and load.runs_on(card.index) and not braked:
        draw_w = loaded_draw_w(card.power_limit_w, load.busy_fraction(), draw_w)
    if draw_w is not None and "power_draw_w" not in sim.overridden:
        draw_w = round(draw_w + POWER_DRAW_JITTER_W * _wave(sample, card.index, 0.0), 2)
    temp_c = card.temperature_c
    if temp_c is not None and "temperature_c" not in sim.overridden:
        temp_c = round(temp_c + TEMPERATURE_JITTER_C * _wave(sample, card.index, 1.0), 1)
    mem_temp_c = card.memory_temperature_c
    if mem_temp_c is not None and "memory_temperature_c" not in sim.overridden:
        mem_temp_c = round(mem_temp_c + TEMPERATURE_JITTER_C * _wave(sample, card.index, 2.0), 1)
    busy = replace(
        loaded(card, load, sample),
        **{name: getattr(card, name) for name in _LOAD_FIELDS if name in sim.overridden},
    )
    return replace(busy, power_draw_w=draw_w, temperature_c=temp_c, memory_temperature_c=mem_temp_c)


def _load_on(loads: tuple[EngineLoad, ...], index: int) -> EngineLoad | None:
    """The engine running on card ``index`` (engines of one rig hold disjoint cards)."""
    return next((load for load in loads if load.runs_on(index)), None)


def lost_card(
    sim: SimCard, reason: str | None, kind: LostKind = LostKind.NOT_ANSWERING
) -> GpuSnapshot:
    """The card as NVML reports one that stopped answering: identity, no readings."""
    kept = {name: getattr(sim.card, name) for name in _LOST_CARD_KEEPS}
    return GpuSnapshot(**kept, lost=True, lost_reason=reason, lost_kind=kind)


class EnergyMeter:
    """Per card, the joules drawn this simulated boot (what NVML's energy counter says)."""

    def __init__(self) -> None:
        self._boot_id: str | None = None
        self._uptime_s = 0.0
        self._joules: dict[int, float] = {}

    def metered(
        self, cards: tuple[GpuSnapshot, ...], boot_id: str, uptime_s: float
    ) -> tuple[GpuSnapshot, ...]:
        """``cards`` with ``energy_total_mj`` after adding the power drawn since last time."""
        if boot_id != self._boot_id:  # a new boot (or the first reading): since boot
            self._boot_id, self._uptime_s, self._joules = boot_id, 0.0, {}
        elapsed_s = max(0.0, uptime_s - self._uptime_s)
        self._uptime_s = max(self._uptime_s, uptime_s)
        metered = []
        for card in cards:
            if card.lost or card.power_draw_w is None:
                metered.append(card)
                continue
            joules = self._joules.get(card.index, 0.0) + card.power_draw_w * elapsed_s
            self._joules[card.index] = joules
            metered.append(replace(card, energy_total_mj=round(joules * 1000)))
        return tuple(metered)


class SimulatedCards(Protocol):
    """The simulated host as its backend reads it (``hwcheck.sim.rig.SimulatedRig``).

    Declared here, not imported: the rig builds its backend, so the backend names only
    what it reads of the rig (the cards, the clocks, the boot, the engine's load, the
    scenario's NVML faults) and the one thing it writes (a power limit).
    """

    @property
    def scenario(self) -> Scenario:
        """The scenario the rig runs (its host's NVML outage and delay)."""
        ...

    def cards(self) -> tuple[SimCard, ...]:
        """Every card as it is now."""
        ...

    def boot_id(self) -> str:
        """The simulated boot's id."""
        ...

    def uptime_s(self) -> float:
        """Seconds since the simulated boot."""
        ...

    def wall_now(self) -> datetime:
        """The rig's wall clock."""
        ...

    def monotonic_s(self) -> float:
        """The rig's monotonic clock."""
        ...

    def engine_loads(self) -> tuple[EngineLoad, ...]:
        """What each attached engine does now (those running; none: no engine runs)."""
        ...

    def set_power_limit(self, index: int, watts: float) -> None:
        """Set a card's power limit as NVML would."""
        ...


class SimulatedBackend:
    """A ``GpuBackend`` reading a simulated rig (``SimulatedCards``) instead of NVML.

    The card reads run on a ``TimedCaller`` with ``call_timeout_s``, as the NVML
    backend's do, and the scenario's ``nvml_delay_s`` is spent *inside* that call: a
    slow driver beyond the timeout marks every card lost, and the cards stay lost
    (without another call) until the stuck read returns, like a real stuck driver.
    """

    name = "simulated"

    def __init__(self, rig: SimulatedCards, call_timeout_s: float = 10.0) -> None:
        if not call_timeout_s > 0:
            raise ValueError(f"call_timeout_s must be positive, got {call_timeout_s!r}")
        self._rig = rig
        self._call_timeout_s = float(call_timeout_s)
        self._caller = TimedCaller("sim-nvml-call")
        self._lock = threading.Lock()
        self._samples = 0
        self._closed = False
        self._stuck: Future[Any] | None = None
        self._energy = EnergyMeter()

    def snapshot(self) -> RigSnapshot:
        """Read every card once (firing due timeline steps first)."""
        with self._lock:
            if self._closed:
                raise BackendUnavailable("the simulated backend was closed: open a new one")
        self._raise_if_nvml_down()
        with self._lock:
            sample = self._samples
            self._samples += 1
        # Stamped before the cards are read, as the NVML backend stamps its snapshots.
        taken_at, monotonic_s = self._rig.wall_now(), self._rig.monotonic_s()
        cards = self._read_cards(sample)
        with self._lock:
            cards = self._energy.metered(cards, self._rig.boot_id(), self._rig.uptime_s())
        driver = next((card.driver_version for card in cards if card.driver_version), None)
        return RigSnapshot(
            taken_at=taken_at,
            monotonic_s=monotonic_s,
            cards=cards,
            driver_version=driver,
            # NVML's version is the CUDA major in front of the driver version.
            nvml_version=f"13.{driver}" if driver else None,
        )

    def _raise_if_nvml_down(self) -> None:
        """The scenario's NVML outage, raised as the NVML backend would raise it."""
        host = self._rig.scenario.host
        if host.nvml_unavailable is None:
            return
        if host.nvml_back_after_s is not None and self._rig.uptime_s() >= host.nvml_back_after_s:
            return
        raise nvml_unavailable(host.nvml_unavailable, "simulated")

    def _read_cards(self, sample: int) -> tuple[GpuSnapshot, ...]:
        """Every card through the timed call; all lost while a slow read is stuck."""
        stuck = self._stuck
        if stuck is not None and not stuck.done():
            reason = f"NVML call timed out after {self._call_timeout_s:g} s and has not returned"
            return tuple(lost_card(sim, reason) for sim in self._rig.cards())
        self._stuck = None
        delay_s = self._rig.scenario.host.nvml_delay_s
        loads = self._rig.engine_loads()

        def read() -> tuple[GpuSnapshot, ...]:
            if delay_s:
                time.sleep(delay_s)  # the simulated sick driver: NVML calls that take long
            return tuple(
                present_card(sim, sample, _load_on(loads, sim.card.index))
                for sim in self._rig.cards()
            )

        try:
            return self._caller.call(read, self._call_timeout_s)
        except CallTimedOut as exc:
            self._stuck = exc.pending
            reason = f"NVML call timed out after {exc.timeout_s:g} s"
            return tuple(lost_card(sim, reason) for sim in self._rig.cards())
        except TooManyStuckCalls as exc:
            raise BackendUnavailable(f"NVML is not answering: {exc}") from exc

    def set_power_limit(self, index: int, watts: float) -> None:
        """Set card ``index``'s limit; ``PowerLimitError`` outside min..max like NVML."""
        with self._lock:
            if self._closed:
                raise BackendUnavailable("the simulated backend was closed: open a new one")
        self._rig.set_power_limit(index, watts)

    def close(self) -> None:
        """Stop answering; safe to call twice. The rig and its files stay."""
        with self._lock:
            self._closed = True
        self._caller.close()
