"""Immutable facts about the rig, shared by every backend, check and consumer.

Everything here is plain data: frozen dataclasses with units in field names, so a
snapshot can be stored, compared and sent over the API without a backend in reach.
The rig profile is a frozen pydantic model instead: it is also the config's ``[rig]``
table, so its one declaration carries the defaults and the validation.
A field that the card or driver cannot report is ``None`` ("not available"), which is
normal on CMP cards; a card that stopped answering is marked ``lost`` instead.
"""

from __future__ import annotations

import enum
import re
import socket
import textwrap
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# PCI ids of the CMP 170HX (both report "GA100 [CMP 170HX]").
NVIDIA_VENDOR_ID = 0x10DE
CMP170HX_DEVICE_IDS: frozenset[int] = frozenset({0x20C2, 0x2082})


class ClockEventReason(enum.IntFlag):
    """NVML clock event (throttle) reason bits, as in ``nvmlClocksEventReason*``."""

    GPU_IDLE = 0x1
    APPLICATIONS_CLOCKS_SETTING = 0x2
    SW_POWER_CAP = 0x4
    HW_SLOWDOWN = 0x8
    SYNC_BOOST = 0x10
    SW_THERMAL_SLOWDOWN = 0x20
    HW_THERMAL_SLOWDOWN = 0x40
    HW_POWER_BRAKE_SLOWDOWN = 0x80
    DISPLAY_CLOCK_SETTING = 0x100


# A brake is "unexplained" only when none of these causes is also set.
BRAKE_EXPLAINING_REASONS = (
    ClockEventReason.HW_THERMAL_SLOWDOWN
    | ClockEventReason.SW_THERMAL_SLOWDOWN
    | ClockEventReason.SW_POWER_CAP
)


def decode_clock_event_reasons(mask: int) -> list[str]:
    """Return the lower-case names of the bits set in ``mask`` (unknown bits as hex)."""
    names: list[str] = []
    known = 0
    for flag in ClockEventReason:
        known |= flag.value
        if mask & flag.value:
            names.append(str(flag.name).lower())
    rest = mask & ~known
    if rest:
        names.append(f"0x{rest:x}")
    return names


def normalize_pci_bus_id(raw: str) -> str:
    """Normalise an NVML or kernel PCI address to ``dddd:bb:dd.f`` lower case.

    NVML says ``00000000:01:00.0`` and the kernel's Xid line says ``0000:01:00``
    (no function): both become ``0000:01:00.0`` so they can be joined.
    """
    text = raw.strip().lower()
    if text.startswith("pci:"):
        text = text[4:]
    parts = text.split(":")
    if len(parts) == 2:  # bb:dd.f without a domain
        parts = ["0", *parts]
    if len(parts) != 3:
        raise ValueError(f"not a PCI address: {raw!r}")
    domain, bus, devfn = parts
    dev, _, fn = devfn.partition(".")
    try:
        domain_n, bus_n = int(domain, 16) & 0xFFFF, int(bus, 16)
        dev_n, fn_n = int(dev, 16), int(fn or "0", 16)
    except ValueError as exc:
        raise ValueError(f"not a PCI address: {raw!r}") from exc
    return f"{domain_n:04x}:{bus_n:02x}:{dev_n:02x}.{fn_n:x}"


class LostKind(enum.StrEnum):
    """How a card stopped answering NVML, as NVML said it (never parsed back from text).

    ``reset_required`` (NVML's ``ResetRequired``) and ``gpu_is_lost`` (``GpuIsLost``) are the
    driver's own verdicts; ``not_answering`` is a call that timed out or never returned;
    ``unknown`` is NVML's ``Unknown`` or any other error that lost the card.
    """

    GPU_IS_LOST = "gpu_is_lost"
    RESET_REQUIRED = "reset_required"
    NOT_ANSWERING = "not_answering"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A compute process on a card, as NVML lists it (``nvidia-smi``'s process rows).

    ``used_memory_mib``: the card memory it holds (None where the driver does not say);
    ``name`` and ``container`` come from ``/proc`` (``hwcheck.gpu_processes``), None when
    it cannot be read there.
    """

    pid: int
    used_memory_mib: int | None = None
    name: str | None = None
    container: str | None = None

    def as_dict(self) -> dict[str, object]:
        """The status document's ``processes`` entry."""
        return {
            "pid": self.pid,
            "name": self.name,
            "container": self.container,
            "used_memory_mib": self.used_memory_mib,
        }


@dataclass(frozen=True, slots=True)
class GpuSnapshot:
    """One card, read once. ``None`` means the card or driver does not report it.

    A lost card has ``lost=True``, ``lost_kind`` (how NVML said so) and ``lost_reason``
    (NVML's words, for people).
    """

    index: int
    pci_bus_id: str
    uuid: str
    name: str
    serial: str | None = None
    pci_device_id: int | None = None  # 0x20c2, without the vendor half
    vbios_version: str | None = None
    driver_version: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    power_enforced_limit_w: float | None = None
    power_default_limit_w: float | None = None
    power_min_limit_w: float | None = None
    power_max_limit_w: float | None = None
    energy_total_mj: int | None = None  # since the driver loaded: a counter, 0 at each boot
    clock_event_reasons: int | None = None
    sm_clock_mhz: int | None = None
    memory_clock_mhz: int | None = None
    temperature_c: float | None = None
    memory_temperature_c: float | None = None
    pcie_gen_current: int | None = None
    pcie_width_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    persistence_mode: bool | None = None
    fan_speed_pct: int | None = None
    recovery_action: int | None = None
    # Host truth (issue 18): the BAR1 aperture (64 GiB with the bridge-window patch, 256 MiB
    # stock), the VBIOS's top clocks (1,728 MHz memory; 1,458 on an old VBIOS) and the
    # PCIe replay counter since boot (risers at Gen1/2 x4 are where link errors live).
    bar1_total_mib: int | None = None
    sm_clock_max_mhz: int | None = None
    memory_clock_max_mhz: int | None = None
    pcie_replay_count: int | None = None
    # What nvitop shows: the SMs' and the memory controller's busy share over the driver's
    # sample period, PCIe traffic in KiB/s, and the compute processes (None: not supported).
    utilization_gpu_pct: int | None = None
    utilization_memory_pct: int | None = None
    pcie_tx_kib_s: int | None = None
    pcie_rx_kib_s: int | None = None
    # Row remapping (Ampere's spare HBM rows, NVML's GetRemappedRows, persisted on the card):
    # rows remapped after correctable and uncorrectable errors, a remap waiting for the next
    # reset, a remap that failed (no spare row left: NVIDIA's RMA case). None: the card does
    # not report it (a CMP 170HX reports no ECC; docs/domain.md).
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    row_remap_pending: bool | None = None
    row_remap_failed: bool | None = None
    processes: tuple[GpuProcess, ...] | None = None
    lost: bool = False
    lost_reason: str | None = None
    lost_kind: LostKind | None = None

    @property
    def clock_event_names(self) -> list[str]:
        """The clock event reason bits decoded to names (empty when unknown)."""
        if self.clock_event_reasons is None:
            return []
        return decode_clock_event_reasons(self.clock_event_reasons)

    @property
    def power_brake_active(self) -> bool:
        """True when the hardware power brake (PWRBRK#) bit is set."""
        mask = self.clock_event_reasons or 0
        return bool(mask & ClockEventReason.HW_POWER_BRAKE_SLOWDOWN)

    @property
    def power_brake_unexplained(self) -> bool:
        """Brake set with no thermal or power-cap cause: the B30 pin signature."""
        mask = self.clock_event_reasons or 0
        return self.power_brake_active and not mask & BRAKE_EXPLAINING_REASONS


@dataclass(frozen=True, slots=True)
class RigSnapshot:
    """Every card of one poll, with when it was taken."""

    taken_at: datetime
    monotonic_s: float
    cards: tuple[GpuSnapshot, ...]
    driver_version: str | None = None
    nvml_version: str | None = None

    def card(self, index: int) -> GpuSnapshot | None:
        """The card with NVML index ``index``, if present."""
        for card in self.cards:
            if card.index == index:
                return card
        return None


@dataclass(frozen=True, slots=True)
class PciDevice:
    """An NVIDIA CMP device found in sysfs (independent of NVML)."""

    pci_bus_id: str
    vendor_id: int
    device_id: int


_CARD_NODE = re.compile(r"^/dev/nvidia(\d+)$")


def card_of_device(device: str) -> int | None:
    """``/dev/nvidia3`` -> 3; control nodes (``nvidiactl``, ``nvidia-uvm``) -> None."""
    match = _CARD_NODE.match(device)
    return None if match is None else int(match.group(1))


@dataclass(frozen=True, slots=True)
class DeviceHolder:
    """A process that holds a ``/dev/nvidia*`` node open.

    ``container``/``image``: the container it runs in, when the source knows it (the
    simulated host does; on a real host the serving preflight asks the runtime).
    """

    pid: int
    name: str
    device: str
    cmdline: str = ""
    container: str | None = None
    image: str | None = None
    # The runtime and short id its cgroup names (``docker 3f2a1b0c9d8e``), read from /proc
    # on a real host: enough to tell a container from a display server without a runtime.
    cgroup_container: str | None = None

    @property
    def card(self) -> int | None:
        """The card its node is (``/dev/nvidia3`` -> 3); ``None`` for control nodes."""
        return card_of_device(self.device)


class XidClass(enum.StrEnum):
    """Who is to blame for an Xid."""

    APPLICATION = "application"
    HARDWARE = "hardware"
    DRIVER = "driver"
    UNKNOWN = "unknown"


class XidAction(enum.StrEnum):
    """What cmpfleet advises after an Xid."""

    NONE = "none"
    RESTART_ENGINE = "restart_engine"
    REBOOT = "reboot"
    COLD_POWER_CYCLE = "cold_power_cycle"
    INSPECT = "inspect"


@dataclass(frozen=True, slots=True)
class XidEvent:
    """One Xid found in the kernel log.

    ``pci_bus_id`` is normalised (``0000:01:00.0``) or ``None`` on old drivers that omit it.
    ``seq``/``boot_id`` identify the kernel record when the source knows them.
    """

    xid: int
    text: str
    message: str
    pci_bus_id: str | None = None
    pid: int | None = None
    process: str | None = None
    seq: int | None = None
    boot_id: str | None = None
    line: int | None = None
    ts_kernel: datetime | None = None  # when the kernel printed it (``kernellog.kernel_time``)


class Severity(enum.StrEnum):
    """How bad something is, for checks, events and alerts alike.

    Ordered ok < warning < critical. ``info`` is news rather than a verdict (a daemon
    start, a cleared latch): it ranks with ``ok``, so it never makes a rig look worse.
    Checks themselves report only ok, warning or critical.
    """

    OK = "ok"
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        """0, 1, 2 (``info`` counts as ``ok``): also the monitoring-plugin exit code."""
        return {"ok": 0, "info": 0, "warning": 1, "critical": 2}[self.value]

    def as_event(self) -> Severity:
        """The severity an event reporting a change to this level is stored with.

        Reaching ``ok`` (an engine that became ready) is news, not a problem: ``info``.
        """
        return Severity.INFO if self is Severity.OK else self


class EventKind(enum.StrEnum):
    """What a stored event is about: the values of the events API and fleetctl events --kind."""

    XID = "xid"
    CHECK = "check"
    SERVING = "serving"
    RECOVERY = "recovery"
    DAEMON = "daemon"
    REBOOT = "reboot"
    OPERATOR = "operator"
    LAUNCH = "launch"
    CANARY = "canary"
    DIAG = "diag"  # a diagnostic run (the memory test)
    GUARD = "guard"  # the traffic guard: its process, and agent sessions crossing a threshold
    CRASH = "crash"  # a crash bundle, its verdict and recurrence; a boot's smaller KV pool


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The outcome of one check for one card (``card=None`` for rig-wide checks)."""

    id: str
    card: int | None
    severity: Severity
    message: str
    remedy: str = ""
    # False while a check has seen a fault too briefly to call it (the power brake in 1 of
    # 3 samples): status shows it, alerts wait for the confirmed result (no warning that
    # a critical follows a second later).
    confirmed: bool = True

    def as_dict(self) -> dict[str, object]:
        """The ``{id, card, severity, message, remedy}`` form (docs/reference.md "Checks")."""
        return {
            "id": self.id,
            "card": self.card,
            "severity": self.severity.value,
            "message": self.message,
            "remedy": self.remedy,
        }


def worst_severity(results: list[CheckResult]) -> Severity:
    """The most severe result, ``ok`` for none."""
    worst = Severity.OK
    for result in results:
        if result.severity.rank > worst.rank:
            worst = result.severity
    return worst


class _ConfigSection(BaseModel):
    """A config table: unknown keys are errors, values are frozen once read."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class PcieBaseline(_ConfigSection):
    """One card's recorded PCIe link (``fleetctl init`` writes these)."""

    gen: Annotated[int, Field(ge=1, le=6)]
    width: Annotated[int, Field(ge=1, le=16)]


class RigProfile(_ConfigSection):
    """What this rig is expected to look like: the config's ``[rig]`` table, as the checks take it.

    Declared here once, defaults and validation included; the daemon's settings compose
    it as ``[rig]``. ``pcie_gen_min``/``pcie_width_min`` default to the Gen2 x4 risers these
    rigs use; ``fleetctl init`` records the real baseline per card in ``pcie_baseline``.
    ``apply_power_caps`` is for the daemon (re-apply ``power_cap_w`` when a card is off it).
    ``name`` is what alerts, the status and the dashboard call the rig (``display_name``:
    the host name when unset, read at use so a renamed host is not frozen in the config).
    """

    name: Annotated[str, Field(max_length=64)] | None = None
    card_count: Annotated[int, Field(ge=1, le=16)] | None = None
    memory_total_mib: Annotated[int, Field(ge=1024)] = 65536
    power_cap_w: Annotated[float, Field(ge=50, le=400)] = 180.0
    # Per card, beside the rig's default: by NVML index ("0"), a run of them ("0-3") or the
    # PCI address ("0000:21:00.0", which wins: it stays with the card when slots move).
    power_cap_w_by_card: dict[str, Annotated[float, Field(ge=50, le=400)]] = Field(
        default_factory=dict
    )
    power_cap_tolerance_w: Annotated[float, Field(ge=0, le=50)] = 2.0
    apply_power_caps: bool = True
    pcie_gen_min: Annotated[int, Field(ge=1, le=6)] = 2
    pcie_width_min: Annotated[int, Field(ge=1, le=16)] = 4
    temperature_warn_c: Annotated[float, Field(gt=0, le=120)] = 80.0
    temperature_crit_c: Annotated[float, Field(gt=0, le=120)] = 90.0
    memory_temperature_warn_c: Annotated[float, Field(gt=0, le=130)] = 85.0
    memory_temperature_crit_c: Annotated[float, Field(gt=0, le=130)] = 95.0
    brake_sustained_samples: Annotated[int, Field(ge=1, le=100)] = 3
    # host_resources: free space on the model's and the state dir's filesystems.
    disk_free_warn_pct: Annotated[float, Field(ge=0, le=100)] = 10.0
    disk_free_crit_pct: Annotated[float, Field(ge=0, le=100)] = 2.0
    require_persistence_mode: bool = True
    # the driver this rig is pinned to (None: any)
    driver_version: Annotated[str, Field(pattern=r"^\d+\.\d+(\.\d+)?$")] | None = None
    # holder names never foreign (globs)
    allowed_gpu_processes: tuple[Annotated[str, Field(min_length=1)], ...] = ()
    pcie_baseline: dict[str, PcieBaseline] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _one_printable_line(cls, value: str | None) -> str | None:
        # It lands in alert labels, log lines and the dashboard's title.
        if value is None:
            return None
        if not value.strip() or not value.isprintable():
            raise ValueError("expected one line of printable characters, not empty")
        return value.strip()

    def display_name(self) -> str:
        """The rig's name: ``[rig] name``, else this host's name."""
        return self.name or socket.gethostname()

    @field_validator("power_cap_w_by_card")
    @classmethod
    def _card_keys(cls, value: dict[str, float]) -> dict[str, float]:
        # A key is a card index, a run of them, or a PCI address (kept normalised).
        keyed: dict[str, float] = {}
        for key, watts in value.items():
            keyed[_card_key(key)] = watts
        return keyed

    def power_cap_for(self, index: int, pci_bus_id: str = "") -> float:
        """The cap card ``index`` should run at: its address's, its index's, else the rig's."""
        by_card = self.power_cap_w_by_card
        for key in (pci_bus_id, str(index)):
            if key and key in by_card:
                return by_card[key]
        for key, watts in by_card.items():
            first, dash, last = key.partition("-")
            if dash and first.isdecimal() and int(first) <= index <= int(last):
                return watts
        return self.power_cap_w

    @model_validator(mode="after")
    def _warn_below_critical(self) -> RigProfile:
        for name in ("temperature", "memory_temperature"):
            warn, crit = getattr(self, f"{name}_warn_c"), getattr(self, f"{name}_crit_c")
            if warn >= crit:
                raise ValueError(f"{name}_warn_c ({warn:g}) must be below {name}_crit_c ({crit:g})")
        if self.disk_free_crit_pct > self.disk_free_warn_pct:
            raise ValueError(
                f"disk_free_crit_pct ({self.disk_free_crit_pct:g}) must not be above "
                f"disk_free_warn_pct ({self.disk_free_warn_pct:g})"
            )
        return self


def _card_key(key: str) -> str:
    """``"0"``, ``"0-3"`` or a PCI address (normalised); ``ValueError`` naming the key else."""
    text = key.strip()
    first, dash, last = text.partition("-")
    if first.isdecimal() and (not dash or last.isdecimal()):
        if dash and int(last) < int(first):
            raise ValueError(f"{key!r}: the run of cards goes backwards")
        return text
    try:
        return normalize_pci_bus_id(text)
    except ValueError:
        raise ValueError(
            f'{key!r} is not a card: a card index ("0"), a run ("0-3") or a PCI address '
            '("0000:21:00.0")'
        ) from None


class Advice(enum.StrEnum):
    """The host-level step a reboot-required latch asks a person for (stored as this word).

    Its words, by the rig's state, are the one advice table's (``hwcheck.advice``).
    """

    WARM_REBOOT = "warm_reboot"
    COLD_POWER_CYCLE = "cold_power_cycle"
    # The rung after a cold power cycle that did not help: no reboot fixes the card.
    TAKE_CARD_OUT = "take_card_out"


# A title's length: "Xid 154 (<title>) on 0000:21:00.0" stays within 80 characters.
TITLE_MAX_CHARS = 48
_HOST_ACTIONS = frozenset({XidAction.REBOOT, XidAction.COLD_POWER_CYCLE})


@dataclass(frozen=True, slots=True)
class XidInfo:
    """What the catalogue says about one Xid (class, advised action, one-line why).

    ``latches`` and ``advice`` are the one answer to "does this Xid need the host?": the
    xid check (critical or not), the recovery policy (latch or not), the stored event's
    severity, alerts and the status all read them here. A reboot or cold power cycle
    advised latches whatever the class; a hardware-class Xid latches unless its action is
    ``none`` (a ``[xid.N] action = "none"`` override means what it says).
    """

    xid: int
    xid_class: XidClass
    action: XidAction
    explanation: str
    # NVIDIA's published resolution for the code ("MNEMONIC: BUCKET (what it asks)"), and
    # why cmpfleet's action departs from it on a CMP rig, with its source ("" = it follows).
    nvidia: str = ""
    differs: str = ""

    @property
    def latches(self) -> bool:
        """True when this Xid sets the reboot-required latch (and its check is critical)."""
        if self.action in _HOST_ACTIONS:
            return True
        return self.xid_class is XidClass.HARDWARE and self.action is not XidAction.NONE

    @property
    def title(self) -> str:
        """The fault's short name, cut at a word so that a headline stays short.

        It is the explanation's lead clause: the catalogue writes each one as "name: why".
        """
        lead = self.explanation.split(": ", 1)[0]
        return textwrap.shorten(lead, TITLE_MAX_CHARS, placeholder="…")

    def headline(self, where: str | None) -> str:
        """``Xid 31 (MMU page fault) on card 1``: what and where, at most 80 characters.

        Events, log lines, the latch's reason and alerts carry this; the explanation is
        shown once (``fleetctl explain xid N``, the status document's ``explanations``).
        """
        line = f"Xid {self.xid} ({self.title})"
        return line if where is None else f"{line} on {where}"

    @property
    def advice(self) -> Advice | None:
        """The latch's advice for this Xid (``None`` when it does not latch)."""
        if not self.latches:
            return None
        if self.action is XidAction.COLD_POWER_CYCLE:
            return Advice.COLD_POWER_CYCLE
        return Advice.WARM_REBOOT


@dataclass(frozen=True, slots=True)
class ClassifiedXid:
    """An Xid event with the catalogue's verdict on it."""

    event: XidEvent
    info: XidInfo


def xid_key(event: XidEvent) -> str:
    """One Xid's identity within a boot: its kernel sequence number, else what it said."""
    if event.seq is not None:
        return f"{event.boot_id or ''}#{event.seq}"
    return f"{event.pci_bus_id or ''}|{event.xid}|{event.text}"


@dataclass(frozen=True, slots=True)
class LatchWaiver:
    """A person's clear of the reboot-required latch, the recorded operator override.

    The Xids (``xid_keys``) and CUDA probe failures seen before ``at`` stay in the history
    and in ``xid_since_boot``'s count, but no longer make their checks critical, so they no
    longer refuse a start; a fault after the clear latches again. It lasts for the boot.
    """

    reason: str
    at: datetime
    xid_keys: frozenset[str] = frozenset()

    @property
    def label(self) -> str:
        """``cleared by <reason> at <time>``, as the checks show it."""
        return f"cleared by {self.reason!r} at {self.at.isoformat(timespec='seconds')}"

    def covers(self, event: XidEvent) -> bool:
        """True when ``event`` was seen before the clear."""
        return xid_key(event) in self.xid_keys
