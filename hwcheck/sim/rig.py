"""The simulated host: a scenario's cards plus everything that happened to them since boot.

``SimulatedRig`` is what ``--simulate`` puts where the real host would be. Its state lives
in the state dir (``sim-boot-id``, ``sim-state.json``, ``sim-kmsg.log``), not in memory,
so that a restarted daemon finds the same host: same boot id, same kernel log, the same
fired timeline steps and the same runtime faults. Only ``reboot()`` starts a new boot.

The scenario timeline counts from the simulated boot. Monotonic time does not survive a
restart, so the boot is stored as a wall-clock time; within one process the elapsed time
then advances with the (injectable) monotonic clock, never with wall-clock jumps.

Every public method takes the rig's lock: the daemon's API thread injects faults while
its poll thread reads snapshots.
"""

from __future__ import annotations

import math
import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from hwcheck.backend import CardLostError, PowerLimitError
from hwcheck.host import HostSources
from hwcheck.kernellog.filelog import FileSource, KmsgFileWriter
from hwcheck.kernellog.kmsg_format import format_xid_text
from hwcheck.kernellog.records import KernelLogCursor, KernelLogSource, KernelRecord
from hwcheck.model import NVIDIA_VENDOR_ID, ClockEventReason, DeviceHolder, GpuSnapshot, PciDevice
from hwcheck.resources import FilesystemRoom, HostResources
from hwcheck.sim.backend import SimulatedBackend
from hwcheck.sim.card import SimCard
from hwcheck.sim.carddiag import SimulatedDiagnoser
from hwcheck.sim.cuda import SimulatedCudaProber
from hwcheck.sim.fields import CardValue, FieldError, check_card_field
from hwcheck.sim.heat import SimHeat
from hwcheck.sim.hostfacts import STOCK_KERNEL_BAR1_MIB, SimulatedHostFacts
from hwcheck.sim.memtest import SimulatedMemtester
from hwcheck.sim.power_model import write_power_file
from hwcheck.sim.scenario import (
    CMP170HX_DEFAULTS,
    LoseCardStep,
    Scenario,
    SetCardStep,
    TimelineStep,
    XidStep,
    step_key,
)
from hwcheck.sim.state import HostState, StateFiles
from hwcheck.sim.workload import EngineLoad
from hwcheck.sim.xid_messages import default_xid_message

KMSG_FILE = "sim-kmsg.log"
KMSG_ROTATED_FILE = "sim-kmsg.log.1"

# What NVML says about a card that stopped answering.
DEFAULT_LOST_REASON = "GPU is lost"

# A card's readings while PWRBRK# is asserted (docs/domain.md "The power brake (PWRBRK#)").
BRAKE_POWER_DRAW_W = 88.0
BRAKE_SM_CLOCK_MHZ = 1140

# Kernel log levels (facility kern): boot chatter is info, Xids are warnings.
_KERN_INFO = 6
_KERN_WARNING = 4

# Identity never changes at runtime: the daemon joins events to cards by it.
_IMMUTABLE_FIELDS = frozenset({"pci_bus_id", "uuid"})


class SimulationError(ValueError):
    """A fault-API call that cannot be done (bad card, field or value); one line."""


SIM_DISK_MIB = 2 * 1024 * 1024  # each simulated filesystem: 2 TiB


def _utc_now() -> datetime:
    return datetime.now(UTC)


class SimulatedRig:
    """The simulated host behind ``--simulate``: cards, kernel log, boot id, fault injection."""

    def __init__(
        self,
        scenario: Scenario,
        state_dir: Path,
        clock: Callable[[], float] = time.monotonic,
        *,
        wall_clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self.scenario = scenario
        self.state_dir = state_dir
        self.kmsg_path = state_dir / KMSG_FILE
        self._clock = clock
        self._wall_clock = wall_clock
        self._lock = threading.RLock()
        self._stopped_containers: set[str] = set()
        self._engine_loads: list[Callable[[], EngineLoad | None]] = []
        self._files = StateFiles(state_dir)
        self._files.prepare_dir()
        self._state: HostState
        self._writer: KmsgFileWriter
        self._started_mono_s = 0.0
        self._uptime_at_start_s = 0.0
        self.rebooted = False  # a simulated reboot happened in this process (wedges cleared)
        self.host_truth = SimulatedHostFacts(scenario, self.uptime_s, self.booted_kernel)
        boot_id = self._files.read_boot_id()
        if boot_id is None:
            self._boot(reset_power_limits=False)
            self._publish_caps()
            return
        state = self._files.read_state()
        if state is None or state.boot_id != boot_id:
            # Interrupted between writing the boot id and the state: keep the boot,
            # start its clock now.
            state = HostState(boot_id=boot_id, booted_at=self._wall_clock())
            self._files.write_state(state)
        self._state = state
        self._started_mono_s = self._clock()
        uptime_s = (self._wall_clock() - state.booted_at).total_seconds()
        self._uptime_at_start_s = max(0.0, uptime_s)  # the wall clock may have stepped back
        self._writer = self._new_writer(boot_id)
        self._publish_caps()

    def _publish_caps(self) -> None:
        """Tell the simulated engine the caps in force (``hwcheck.sim.power_model``)."""
        caps = [self._card(card.index).card.power_limit_w for card in self.scenario.cards]
        write_power_file(self.state_dir, caps)

    # -- boot ---------------------------------------------------------------------------

    def _boot(self, *, reset_power_limits: bool) -> None:
        """Start a new simulated boot: new id, fresh kernel log, timeline from zero.

        ``reset_power_limits`` is for a reboot: the limits return to each card's default.
        The first start on a fresh state dir keeps the scenario's readings as they are.
        """
        boot_id = str(uuid.uuid4())
        if self.kmsg_path.exists():
            self.kmsg_path.replace(self.state_dir / KMSG_ROTATED_FILE)
        self._files.write_boot_id(boot_id)
        state = HostState(boot_id=boot_id, booted_at=self._wall_clock())
        if reset_power_limits:  # a reboot: it boots the default entry
            state.booted_kernel = self.host_truth.next_boot_kernel()
            for card in self.scenario.cards:
                overrides: dict[str, CardValue] = {}
                if card.power_default_limit_w is not None:
                    overrides["power_limit_w"] = card.power_default_limit_w
                    overrides["power_enforced_limit_w"] = card.power_default_limit_w
                if not self.host_truth.patched(state.booted_kernel):
                    overrides["bar1_total_mib"] = STOCK_KERNEL_BAR1_MIB
                smaller = self.scenario.host.less_memory_after_reboot
                if smaller is not None and smaller[0] == card.index:
                    overrides["memory_total_mib"] = smaller[1]
                if overrides:
                    state.card_overrides[card.index] = overrides
        self._files.write_state(state)
        self._state = state
        self._started_mono_s = self._clock()
        self._uptime_at_start_s = 0.0
        self._writer = self._new_writer(boot_id)
        for line in self.scenario.host.boot_log:
            self._writer.append(line, prio=_KERN_INFO)
        for card in self.scenario.cards:
            address = card.pci_bus_id.rsplit(".", 1)[0]
            self._writer.append(f"NVRM: GPU at PCI:{address}: {card.uuid}", prio=_KERN_INFO)

    def _new_writer(self, boot_id: str) -> KmsgFileWriter:
        """A kernel-log writer stamping records with microseconds since the simulated boot."""
        return KmsgFileWriter(
            self.kmsg_path, boot_id, clock_usec=lambda: int(self.uptime_s() * 1_000_000)
        )

    def reboot(self) -> str:
        """Simulate a host reboot and return the new boot id.

        New boot id; power limits back at each card's default (the cap is lost, as on a
        real boot); the old kernel log rotated to ``sim-kmsg.log.1``; the timeline
        restarts; every runtime fault (lost card, changed readings) is cleared. It boots
        the default boot entry: when that is not the baseline's patched kernel (the
        ``boot-drift`` scenario) the rig comes up on it with a 256 MiB BAR1 and no P2P, as
        a real one does.
        """
        with self._lock:
            self._boot(reset_power_limits=True)
            self._publish_caps()
            self.rebooted = True
            return self._state.boot_id

    def check_can_reboot(self) -> None:
        """``SimulationError`` when the simulated host's disk (the state dir) is read-only.

        The simulated boot lives in files there (boot id, state, kernel log): a reboot
        that cannot write them would leave half a boot. Asked before anything is ended,
        so a refused reboot changes nothing (the engine and the follower carry on).
        """
        if not os.access(self.state_dir, os.W_OK):
            raise SimulationError(
                f"the simulated host cannot reboot: its disk ({self.state_dir}) is not "
                "writable (read-only?); nothing was changed"
            )

    def booted_kernel(self) -> str | None:
        """The kernel the last simulated reboot booted (None: the scenario's, no reboot yet)."""
        with self._lock:
            return self._state.booted_kernel

    def boot_id(self) -> str:
        """The simulated ``/proc/sys/kernel/random/boot_id``."""
        with self._lock:
            return self._state.boot_id

    def uptime_s(self) -> float:
        """Seconds since the simulated boot (what the timeline counts)."""
        with self._lock:
            return self._uptime_at_start_s + (self._clock() - self._started_mono_s)

    def wall_now(self) -> datetime:
        """The rig's wall clock (for snapshot timestamps)."""
        return self._wall_clock()

    def monotonic_s(self) -> float:
        """The rig's monotonic clock (for snapshot intervals)."""
        return self._clock()

    # -- timeline -----------------------------------------------------------------------

    def tick(self) -> list[str]:
        """Fire every timeline step that is due and has not fired; return their keys.

        A step is recorded as fired before it takes effect, so that it never fires twice
        even if the process dies in between (at most once, never double counted).
        """
        with self._lock:
            uptime_s = self.uptime_s()
            fired: list[str] = []
            for position, step in enumerate(self.scenario.timeline):
                key = step_key(position, step)
                if step.at_s > uptime_s or key in self._state.fired_steps:
                    continue
                self._state.fired_steps.append(key)
                self._files.write_state(self._state)
                self._apply_step(step)
                fired.append(key)
            return fired

    def _apply_step(self, step: TimelineStep) -> None:
        if isinstance(step, XidStep):
            self.inject_xid(step.card, step.xid, step.message, step.pid, step.process)
        elif isinstance(step, LoseCardStep):
            self.lose_card(step.card, step.reason or DEFAULT_LOST_REASON)
        elif isinstance(step, SetCardStep):
            self.set_card(step.card, **dict(step.fields))
        else:
            self.set_brake(step.card, step.on)

    # -- fault injection ----------------------------------------------------------------

    def _check_index(self, index: int) -> GpuSnapshot:
        if isinstance(index, bool) or not isinstance(index, int):
            raise SimulationError(f"card index: expected an integer, got {index!r}")
        count = len(self.scenario.cards)
        if not 0 <= index < count:
            raise SimulationError(
                f"card {index} does not exist (the rig has {count} cards: 0 to {count - 1})"
            )
        return self.scenario.cards[index]

    def inject_xid(
        self,
        card: int,
        xid: int,
        message: str | None = None,
        pid: int | None = None,
        process: str | None = None,
    ) -> int:
        """Write a real-format NVRM Xid line for ``card`` to the kernel log; return its seq.

        Only the line is written: the card's readings do not change (use ``lose_card`` or
        ``set_card`` for that), so tests can combine the two as they need.
        """
        with self._lock:
            base = self._check_index(card)
            if isinstance(xid, bool) or not isinstance(xid, int) or xid <= 0:
                raise SimulationError(f"xid: expected a positive integer, got {xid!r}")
            if pid is not None and (isinstance(pid, bool) or not isinstance(pid, int)):
                raise SimulationError(f"pid: expected an integer, got {pid!r}")
            if message is not None and not isinstance(message, str):
                raise SimulationError(f"message: expected a string, got {message!r}")
            if process is not None and not isinstance(process, str):
                raise SimulationError(f"process: expected a string, got {process!r}")
            text = format_xid_text(
                base.pci_bus_id, xid, message or default_xid_message(xid), pid, process
            )
            return self._writer.append(text, prio=_KERN_WARNING)

    def set_card(self, index: int, **fields: object) -> GpuSnapshot:
        """Change card ``index``'s readings (any ``GpuSnapshot`` field); return the card.

        ``lost=True`` makes the backend report the card lost (``lost_reason`` defaults to
        NVML's "GPU is lost", ``lost_kind`` to ``gpu_is_lost``; ``"reset_required"`` is
        NVML's ResetRequired); ``lost=False`` brings it back. Changes last until reboot.
        """
        with self._lock:
            self._check_index(index)
            checked: dict[str, CardValue] = {}
            for name, value in fields.items():
                if name in _IMMUTABLE_FIELDS:
                    raise SimulationError(f"card {index}: {name}: a card's identity cannot change")
                try:
                    checked[name] = check_card_field("", name, value)
                except FieldError as exc:
                    raise SimulationError(f"card {index}: {exc}") from None
            if checked.get("lost") is True and "lost_reason" not in checked:
                checked["lost_reason"] = DEFAULT_LOST_REASON
            if checked.get("lost") is False:
                checked.setdefault("lost_reason", None)
                checked.setdefault("lost_kind", None)
            if "power_limit_w" in checked and "power_enforced_limit_w" not in checked:
                checked["power_enforced_limit_w"] = checked["power_limit_w"]
            self._state.card_overrides.setdefault(index, {}).update(checked)
            self._files.write_state(self._state)
            return self._card(index).card

    def lose_card(self, index: int, reason: str = DEFAULT_LOST_REASON) -> GpuSnapshot:
        """The card stops answering NVML (it stays on the PCI bus) until reboot."""
        return self.set_card(index, lost=True, lost_reason=reason)

    def set_brake(self, index: int | None, on: bool) -> None:
        """Assert (``on``) or release the HW power brake on card ``index`` or every card.

        Asserting it also drops the card to the braked readings (about 88 W, 1,140 MHz).
        """
        with self._lock:
            indexes = (
                range(len(self.scenario.cards))
                if index is None
                else [self._check_index(index).index]
            )
            for card_index in indexes:
                current = self._card(card_index).card
                reasons = current.clock_event_reasons or 0
                brake = int(ClockEventReason.HW_POWER_BRAKE_SLOWDOWN)
                overrides = self._state.card_overrides.setdefault(card_index, {})
                if on:
                    overrides["clock_event_reasons"] = (reasons | brake) & ~int(
                        ClockEventReason.GPU_IDLE
                    )
                    overrides["power_draw_w"] = BRAKE_POWER_DRAW_W
                    overrides["sm_clock_mhz"] = BRAKE_SM_CLOCK_MHZ
                    continue
                overrides["clock_event_reasons"] = reasons & ~brake
                base = self.scenario.cards[card_index]
                if base.power_brake_active:
                    # The scenario's readings are the braked ones: use a healthy card's.
                    overrides["power_draw_w"] = CMP170HX_DEFAULTS["power_draw_w"]
                    overrides["sm_clock_mhz"] = CMP170HX_DEFAULTS["sm_clock_mhz"]
                else:
                    overrides.pop("power_draw_w", None)
                    overrides.pop("sm_clock_mhz", None)
            self._files.write_state(self._state)

    def set_power_limit(self, index: int, watts: float) -> None:
        """Set a card's power limit as NVML would: within min..max, lost at reboot."""
        with self._lock:
            if isinstance(index, bool) or not isinstance(index, int):
                raise PowerLimitError(f"card {index!r}: not a card index")
            count = len(self.scenario.cards)
            if not 0 <= index < count:
                raise PowerLimitError(
                    f"card {index}: no such card (the rig has {count} cards: 0 to {count - 1})"
                )
            card = self._card(index).card
            if card.lost:
                raise CardLostError(index, card.lost_reason or DEFAULT_LOST_REASON)
            if (
                isinstance(watts, bool)
                or not isinstance(watts, int | float)
                or not math.isfinite(watts)
            ):
                raise PowerLimitError(
                    f"card {index}: power limit must be a number of watts, got {watts!r}"
                )
            low, high = card.power_min_limit_w, card.power_max_limit_w
            if (low is not None and watts < low) or (high is not None and watts > high):
                raise PowerLimitError(
                    f"card {index} ({card.pci_bus_id}): power limit {watts:g} W is not valid: "
                    f"it must be between {low:g} W and {high:g} W"
                    if low is not None and high is not None
                    else f"card {index} ({card.pci_bus_id}): power limit {watts:g} W is out of range"
                )
            overrides = self._state.card_overrides.setdefault(index, {})
            overrides["power_limit_w"] = float(watts)
            overrides["power_enforced_limit_w"] = float(watts)
            self._files.write_state(self._state)
            self._publish_caps()

    # -- reading ------------------------------------------------------------------------

    def _card(self, index: int) -> SimCard:
        base = self.scenario.cards[index]
        overrides = self._state.card_overrides.get(index, {})
        if not overrides:
            return SimCard(base, frozenset())
        card = replace(base, **overrides)  # type: ignore[arg-type]
        return SimCard(card, frozenset(overrides))

    def cards(self) -> tuple[SimCard, ...]:
        """Every card as it is now (due timeline steps fired first; replays climbed)."""
        with self._lock:
            self.tick()
            return tuple(
                self._climbed(self._card(index)) for index in range(len(self.scenario.cards))
            )

    def _climbed(self, sim: SimCard) -> SimCard:
        """The card with its PCIe replay counter climbed at the scenario's rate."""
        if "pcie_replay_count" in sim.overridden:
            return sim
        count = self.host_truth.replay_count(sim.card.index, sim.card.pcie_replay_count)
        if count == sim.card.pcie_replay_count:
            return sim
        return SimCard(replace(sim.card, pcie_replay_count=count), sim.overridden)

    def pci_devices(self) -> list[PciDevice]:
        """Cards on the simulated PCI bus: every scenario card (lost ones too) and extras."""
        with self._lock:
            devices = [
                PciDevice(
                    pci_bus_id=sim.card.pci_bus_id,
                    vendor_id=NVIDIA_VENDOR_ID,
                    device_id=sim.card.pci_device_id or 0x20C2,
                )
                for sim in (self._card(i) for i in range(len(self.scenario.cards)))
            ]
            return devices + list(self.scenario.host.extra_pci_devices)

    def device_holders(self, ours: frozenset[int] = frozenset()) -> list[DeviceHolder]:
        """The scenario's foreign processes holding ``/dev/nvidia*`` (less stopped containers).

        ``ours`` (this machine's fleetd and engines) leaves none out: the scenario's
        processes live in the simulated host's pid space, and a real pid here may bear the
        same number as one of them (``HostSources.device_holders``).
        """
        del ours
        with self._lock:
            stopped = set(self._stopped_containers)
        return [h for h in self.scenario.host.foreign_processes if h.container not in stopped]

    def signal_container(self, name: str, signal_name: str) -> bool | None:
        """A signal to a foreign container of the scenario (``--stop-foreign``).

        True: it stopped (its processes stop holding the cards); False: it ignores the
        signal (``ignores_signals`` in the scenario) and keeps running; None: no such
        running container. Kept in memory only: a restarted fleetd sees the scenario's
        containers again, as it would see a restarted container.
        """
        host = self.scenario.host
        known = {h.container for h in host.foreign_processes if h.container}
        with self._lock:
            if name not in known or name in self._stopped_containers:
                return None
            if name in host.containers_ignoring_signals:
                return False
            self._stopped_containers.add(name)
        return True

    def attach_engine(self, load: Callable[[], EngineLoad | None]) -> None:
        """Where the simulated cards learn what an engine does to them (fleetd's engines).

        Read at every snapshot: the engine's cards fill, get busy and list its pid, as a
        real engine's do to NVML (``hwcheck.sim.workload``). Each engine of a rig of
        several (``[serving] run``) is attached: each loads its own cards.
        """
        self._engine_loads.append(load)

    def engine_loads(self) -> tuple[EngineLoad, ...]:
        """What each attached engine does now (those running; none: no engine runs)."""
        return tuple(load for reader in self._engine_loads if (load := reader()) is not None)

    def resources(
        self, paths: Sequence[tuple[str, Path]], ram_needed_mib: int | None
    ) -> HostResources:
        """The scenario's room: every filesystem asked about at ``[host] disk_free_pct``."""
        host = self.scenario.host
        rooms = tuple(
            FilesystemRoom(
                label, str(path), SIM_DISK_MIB, round(SIM_DISK_MIB * host.disk_free_pct / 100)
            )
            for label, path in paths
        )
        available = round(host.memory_total_mib * 0.8)
        return HostResources(rooms, host.memory_total_mib, available, ram_needed_mib)

    def kernel_module_version(self) -> str | None:
        """The simulated loaded module: ``[host] kernel_module_version``, else card 0's driver."""
        if self.scenario.host.kernel_module_version is not None:
            return self.scenario.host.kernel_module_version
        cards = self.scenario.cards
        return cards[0].driver_version if cards else None

    def open_kernel_log(self, cursor: KernelLogCursor | None) -> KernelLogSource:
        """A follower of the simulated kernel log, resuming after ``cursor``."""
        with self._lock:
            # Like the real host: without a cursor, this boot's records so far come first
            # (the boot log and Xids at at_s = 0), then the follow.
            return FileSource(
                self.kmsg_path, boot_id=self._state.boot_id, cursor=cursor, from_start=True
            )

    def kernel_log_history(self) -> list[KernelRecord]:
        """Every record of the current simulated boot's kernel log, oldest first."""
        with self._lock:
            source = FileSource(
                self.kmsg_path, cursor=None, boot_id=self._state.boot_id, from_start=True
            )
        try:
            return source.read_available()
        finally:
            source.close()

    def host_sources(self, nvml_timeout_s: float = 10.0) -> HostSources:
        """Every host source of this simulated rig (``simulated=True``).

        ``nvml_timeout_s`` is ``[poll] nvml_timeout_s``: a simulated slow driver
        (``nvml_delay_s``) beyond it marks the cards lost, as on a real rig.
        """
        return HostSources(
            gpu=SimulatedBackend(self, call_timeout_s=nvml_timeout_s),
            pci_devices=self.pci_devices,
            boot_id=self.boot_id,
            device_holders=self.device_holders,
            open_kernel_log=self.open_kernel_log,
            kernel_log_history=self.kernel_log_history,
            simulated=True,
            kernel_module_version=self.kernel_module_version,
            cuda_prober=SimulatedCudaProber(self.scenario, lambda: self.rebooted),
            host_facts=self.host_truth.facts,
            pcie_aer=lambda _snapshot: self.host_truth.aer(),
            known_good_baseline=lambda: self.host_truth.known_good(self._state.booted_at),
            memtester=SimulatedMemtester(self.scenario, SimHeat(self)),
            diagnoser=SimulatedDiagnoser(self),
            kernel_clock_s=self.uptime_s,  # its kmsg records count the simulated uptime
            resources=self.resources,
        )
