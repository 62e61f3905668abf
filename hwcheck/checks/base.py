"""What every check takes and the small formatting helpers their messages share.

Checks are pure functions ``CheckInput -> list[CheckResult]``: no I/O, no clock, so the
same code judges a live poll, a one-shot ``fleetctl check`` and a simulated rig, and a
test can put any rig in front of them. fleetd's own checks (the kernel log, the store,
the canaries, the memory test) read ``CheckInput.readings`` the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from hwcheck.advice import RigNow
from hwcheck.checks.readings import Readings
from hwcheck.cuda_results import ProbeRound
from hwcheck.hostfacts.baseline import HostBaseline
from hwcheck.hostfacts.model import HostFacts, PcieCounterSample
from hwcheck.model import (
    CheckResult,
    ClassifiedXid,
    DeviceHolder,
    GpuSnapshot,
    LatchWaiver,
    PciDevice,
    RigProfile,
    RigSnapshot,
)
from hwcheck.resources import HostResources


@dataclass(frozen=True)
class CheckInput:
    """Everything the checks judge.

    - ``samples``: polls, oldest first; the last is "now". Several let sustained
      conditions (the power brake) be told from a single blip.
    - ``profile``: what the rig is expected to look like.
    - ``pci_devices``: CMP devices on the PCI bus (sysfs); empty when sysfs is unreadable.
    - ``xids``: this boot's classified Xids.
    - ``holders``: foreign processes holding ``/dev/nvidia*`` (engine pids excluded).
    - ``kernel_module_version``: the loaded nvidia kernel module (None when unknown).
    - ``host``: the host facts (boot chain, module, bus, P2P); None where they are not read,
      and then the host checks report nothing.
    - ``baseline``: the host baseline in force (recorded, with the config's pins).
    - ``pcie_counters``: PCIe error counters over time, oldest first (rates need two).
    - ``tensor_parallel_size``: the engine's; P2P is critical only under tensor parallel.
    - ``probes``: the last CUDA probe round (None: not probed, no ``cuda_probe`` result).
    - ``waiver``: a person's clear of the reboot latch this boot (what it waived).
    - ``rig_now``: whether the engine runs and the latch is set: a remedy's words depend
      on it (``hwcheck.model.Step``); fleetd gives the live state, ``fleetctl check`` the
      cautious default.
    - ``readings``: fleetd's own readings (``hwcheck.checks.readings``); none in
      ``fleetctl check``, whose fleetd checks then report nothing.
    - ``resources``: the model's and the state dir's filesystems and the RAM (None: not
      read, no ``host_resources`` result).
    """

    samples: Sequence[RigSnapshot]
    profile: RigProfile = field(default_factory=RigProfile)
    pci_devices: Sequence[PciDevice] = ()
    xids: Sequence[ClassifiedXid] = ()
    holders: Sequence[DeviceHolder] = ()
    kernel_module_version: str | None = None
    host: HostFacts | None = None
    baseline: HostBaseline = field(default_factory=HostBaseline)
    pcie_counters: Sequence[PcieCounterSample] = ()
    tensor_parallel_size: int = 1
    probes: ProbeRound | None = None
    waiver: LatchWaiver | None = None
    rig_now: RigNow = field(default_factory=RigNow)
    readings: Readings = field(default_factory=Readings)
    resources: HostResources | None = None

    def __post_init__(self) -> None:
        if not self.samples:
            raise ValueError("CheckInput needs at least one sample (the last one is 'now')")

    @property
    def now(self) -> RigSnapshot:
        """The latest sample."""
        return self.samples[-1]

    def live_cards(self) -> list[GpuSnapshot]:
        """Cards of the latest sample that still answer, by index.

        Lost cards are judged by ``card_lost`` alone: their readings are meaningless.
        """
        return sorted((c for c in self.now.cards if not c.lost), key=lambda c: c.index)

    def history(self, index: int, count: int) -> list[GpuSnapshot | None]:
        """Card ``index`` in the last ``count`` samples, oldest first (None where absent)."""
        return [s.card(index) for s in self.samples[-count:]]


Check = Callable[[CheckInput], list[CheckResult]]


def card_label(card: GpuSnapshot) -> str:
    """``card 1 (0000:02:00.0)``: every per-card message starts with it."""
    return f"card {card.index} ({card.pci_bus_id})"


def fmt_num(value: float | None, unit: str = "") -> str:
    """``1,140 MHz``, ``79.9 C``, ``n/a``: integers without decimals, others with one."""
    if value is None:
        return "n/a"
    text = f"{round(value):,}" if float(value).is_integer() else f"{value:,.1f}"
    return f"{text} {unit}" if unit else text
