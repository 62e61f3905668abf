"""Named builders for card, rig and Xid records, defaulting to a real recorded card.

Defaults follow the recorded CMP 170HX of docs/domain.md "One recorded card" (tim-odonnell
card records): device 0x20c2, VBIOS 92.00.6D.00.0A, 65,536 MiB unlocked, PCIe Gen2 x4 (max
Gen2), power limits 100/250/300 W capped to 180 W, about 1,400 MHz SM clock under load. Tests
override only the field they are about, so each test reads as "a healthy card, except".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from hwcheck.advice import RigNow
from hwcheck.checks import CheckInput, run_checks
from hwcheck.cuda_results import CardProbe, ProbeOutcome, ProbeRound
from hwcheck.hostfacts.baseline import HostBaseline
from hwcheck.hostfacts.model import HostFacts, PcieCounterSample
from hwcheck.model import (
    NVIDIA_VENDOR_ID,
    CheckResult,
    ClassifiedXid,
    ClockEventReason,
    DeviceHolder,
    GpuSnapshot,
    LatchWaiver,
    PciDevice,
    RigProfile,
    RigSnapshot,
    XidAction,
    XidClass,
    XidEvent,
    XidInfo,
)
from hwcheck.resources import FilesystemRoom, HostResources

DRIVER_VERSION = "570.172.08"
BOOT_AT = datetime(2026, 9, 29, 13, 0, 0, tzinfo=UTC)

# The PWRBRK# signature as NVML reports it (brake plus the generic HW slowdown bit).
BRAKE_ONLY = int(ClockEventReason.HW_POWER_BRAKE_SLOWDOWN | ClockEventReason.HW_SLOWDOWN)


def bus_id(index: int) -> str:
    """The PCI address card ``index`` sits at on the recorded 4-card rig."""
    return f"0000:{index + 1:02x}:00.0"


def make_card(index: int = 0, **overrides: Any) -> GpuSnapshot:
    """A healthy, unlocked, capped CMP 170HX under load; ``overrides`` change fields."""
    card = GpuSnapshot(
        index=index,
        pci_bus_id=bus_id(index),
        uuid=f"GPU-5e2a{index:04x}-1c3b-4f7d-9a00-00000000000{index}",
        name="NVIDIA CMP 170HX",
        serial=f"13230200{index:05d}",
        pci_device_id=0x20C2,
        vbios_version="92.00.6D.00.0A",
        driver_version=DRIVER_VERSION,
        memory_total_mib=65_536,
        memory_used_mib=55_700,
        power_draw_w=152.0,
        power_limit_w=180.0,
        power_enforced_limit_w=180.0,
        power_default_limit_w=250.0,
        power_min_limit_w=100.0,
        power_max_limit_w=300.0,
        clock_event_reasons=0,
        sm_clock_mhz=1_400,
        memory_clock_mhz=1_215,
        temperature_c=64.0,
        memory_temperature_c=70.0,
        pcie_gen_current=2,
        pcie_width_current=4,
        pcie_gen_max=2,
        pcie_width_max=4,
        persistence_mode=True,
        fan_speed_pct=None,
        recovery_action=0,
        bar1_total_mib=65_536,
        sm_clock_max_mhz=1_410,
        memory_clock_max_mhz=1_728,
        pcie_replay_count=0,
    )
    return replace(card, **overrides)


def make_braked_card(index: int = 0, **overrides: Any) -> GpuSnapshot:
    """A card under PWRBRK#: about 88 W and 1,140 MHz, brake bit with no cause."""
    values: dict[str, Any] = {
        "clock_event_reasons": BRAKE_ONLY,
        "power_draw_w": 88.0,
        "sm_clock_mhz": 1_140,
    }
    values.update(overrides)
    return make_card(index, **values)


def make_lost_card(index: int = 0, reason: str = "GPU is lost") -> GpuSnapshot:
    """A card that stopped answering NVML: identity only, no readings."""
    return GpuSnapshot(
        index=index,
        pci_bus_id=bus_id(index),
        uuid=f"GPU-5e2a{index:04x}-1c3b-4f7d-9a00-00000000000{index}",
        name="NVIDIA CMP 170HX",
        lost=True,
        lost_reason=reason,
    )


def make_rig(
    cards: Iterable[GpuSnapshot] | None = None,
    *,
    count: int = 4,
    at_s: float = 100.0,
    driver_version: str | None = DRIVER_VERSION,
) -> RigSnapshot:
    """One poll: the given cards, or ``count`` healthy ones."""
    chosen = tuple(cards) if cards is not None else tuple(make_card(i) for i in range(count))
    return RigSnapshot(
        taken_at=BOOT_AT + timedelta(seconds=at_s),
        monotonic_s=at_s,
        cards=chosen,
        driver_version=driver_version,
        nvml_version="13.570.172.08",
    )


def make_samples(*polls: Sequence[GpuSnapshot]) -> list[RigSnapshot]:
    """Several polls, oldest first, one second apart."""
    return [make_rig(cards, at_s=100.0 + n) for n, cards in enumerate(polls)]


def pci_for(cards: Iterable[GpuSnapshot]) -> list[PciDevice]:
    """The sysfs view of the given cards (every card on the bus)."""
    return [PciDevice(c.pci_bus_id, NVIDIA_VENDOR_ID, c.pci_device_id or 0x20C2) for c in cards]


def make_xid(
    xid: int,
    pci_bus_id: str | None,
    *,
    xid_class: XidClass = XidClass.HARDWARE,
    action: XidAction = XidAction.REBOOT,
    explanation: str = "catalogue explanation",
) -> ClassifiedXid:
    """A classified Xid as the catalogue would hand it over."""
    where = f"PCI:{pci_bus_id[:-2]}" if pci_bus_id else ""
    text = f"NVRM: Xid ({where}): {xid}, pid=4242, name=python3, details"
    return ClassifiedXid(
        event=XidEvent(xid=xid, text=text, message="details", pci_bus_id=pci_bus_id),
        info=XidInfo(xid=xid, xid_class=xid_class, action=action, explanation=explanation),
    )


# Plenty of room: the state dir's filesystem half free, 256 GiB of RAM for a 44 GiB need.
HEALTHY_ROOM = HostResources(
    (FilesystemRoom("state dir", "/var/lib/cmpfleet", 512 * 1024, 256 * 1024),),
    memory_total_mib=256 * 1024,
    memory_available_mib=200 * 1024,
    ram_needed_mib=44 * 1024,
)


def make_input(
    samples: Sequence[RigSnapshot] | None = None,
    *,
    profile: RigProfile | None = None,
    pci_devices: Sequence[PciDevice] | None = None,
    xids: Sequence[ClassifiedXid] = (),
    holders: Sequence[DeviceHolder] = (),
    host: HostFacts | Literal["healthy"] | None = "healthy",
    baseline: HostBaseline | None = None,
    pcie_counters: Sequence[PcieCounterSample] = (),
    tensor_parallel_size: int = 1,
    probes: ProbeRound | None = None,
    waiver: LatchWaiver | None = None,
    rig_now: RigNow | None = None,
    resources: HostResources | Literal["healthy"] | None = "healthy",
) -> CheckInput:
    """A CheckInput over a healthy 4-card rig on a healthy patched host unless told otherwise.

    ``pci_devices`` defaults to the cards of the last sample (all on the bus); ``host``
    and ``baseline`` to the healthy host of ``tests.support.hosts`` for that many cards
    (``host=None``: host facts not read); ``probes`` to a CUDA probe that passed on every
    card that answers.
    """
    from tests.support.hosts import make_baseline, make_host

    chosen = list(samples) if samples is not None else [make_rig()]
    count = max(len(chosen[-1].cards), 1)
    if probes is None:
        live = [card.index for card in chosen[-1].cards if not card.lost]
        probes = ProbeRound(BOOT_AT, tuple(CardProbe(card, ProbeOutcome.OK) for card in live))
    return CheckInput(
        samples=chosen,
        profile=profile if profile is not None else RigProfile(card_count=4),
        pci_devices=pci_devices if pci_devices is not None else pci_for(chosen[-1].cards),
        xids=xids,
        holders=holders,
        host=make_host(count) if host == "healthy" else host,
        baseline=baseline if baseline is not None else make_baseline(count),
        pcie_counters=pcie_counters,
        tensor_parallel_size=tensor_parallel_size,
        probes=probes,
        waiver=waiver,
        rig_now=rig_now or RigNow(),
        resources=HEALTHY_ROOM if resources == "healthy" else resources,
    )


def results_for(inp: CheckInput, check_id: str) -> list[CheckResult]:
    """The results of one check id, taken from the full ``run_checks`` run."""
    return [r for r in run_checks(inp) if r.id == check_id]


def result_for(inp: CheckInput, check_id: str, card: int | None) -> CheckResult:
    """The single result of ``check_id`` for ``card`` (None: the rig-wide one)."""
    found = [r for r in results_for(inp, check_id) if r.card == card]
    assert len(found) == 1, f"expected one {check_id} result for card {card}, got {found}"
    return found[0]
