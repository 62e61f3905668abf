"""The host facts of a simulated rig: what its scenario's ``[host]`` table says, nothing real.

The boot chain, the nvidia module, each card's bus (driver, bridges, uplink), P2P between
cards and the PCIe error counters all come from ``HostFactsScenario``; error counters
climb with the simulated uptime at the scenario's rates, so ``fleetctl check`` and fleetd
see them climbing the way a bad riser's do. The simulated rig's baseline is its healthy
self (the defaults), changed by ``[host.baseline]``: as if ``fleetctl init`` had run on
the rig before whatever the scenario shows went wrong.

A simulated reboot boots the default boot entry (``default_boot_kernel``). When that is
not the baseline's patched kernel, the rig comes up as on a stock kernel: the running
kernel and the command line's image are the entry's, every pair's P2P is not supported
and (``SimulatedRig``) BAR1 is 256 MiB. That is the trap ``boot-drift`` warns about.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from hwcheck.hostfacts.baseline import HostBaseline, merge_baseline, record_baseline
from hwcheck.hostfacts.cmdline import without_bootloader_args
from hwcheck.hostfacts.model import (
    AerCounts,
    BootEntry,
    CardBus,
    DeviceAer,
    HostFacts,
    P2pPair,
    P2pStatus,
    PciLink,
    pair_key,
)
from hwcheck.model import GpuSnapshot, RigSnapshot
from hwcheck.sim.scenario import CMP170HX_DEFAULTS, Scenario
from hwcheck.sim.scenario_hostfacts import HostFactsScenario, SimCardHost, sim_module_path

# BAR1 without the baseline kernel's bridge-window patch (the stock-kernel scenario's).
STOCK_KERNEL_BAR1_MIB = 256
# What a healthy card reads for the facts a baseline records.
_BASELINE_CARD_FIELDS = (
    "bar1_total_mib",
    "vbios_version",
    "sm_clock_max_mhz",
    "memory_clock_max_mhz",
)


def root_port(index: int) -> str:
    """The root port a card sits under on the simulated board (one riser each)."""
    return f"0000:00:{index + 1:02x}.1"


def _per_uptime(rate_per_min: float, uptime_s: float) -> int:
    return int(rate_per_min * uptime_s / 60.0)


class SimulatedHostFacts:
    """Host facts, AER counters, replay counts and the baseline of one simulated rig."""

    def __init__(
        self,
        scenario: Scenario,
        uptime_s: Callable[[], float],
        booted_kernel: Callable[[], str | None] = lambda: None,
    ) -> None:
        """``booted_kernel``: what the last simulated reboot booted (None: no reboot yet)."""
        self._scenario = scenario
        self._facts: HostFactsScenario = scenario.host.facts
        self._uptime_s = uptime_s
        self._booted_kernel = booted_kernel

    def running_kernel(self) -> str:
        """The kernel running now: the last reboot's, else the scenario's."""
        return self._booted_kernel() or self._facts.kernel_release

    def next_boot_kernel(self) -> str:
        """What a reboot boots: the default entry (the running kernel when it is unknown)."""
        return self._facts.default_boot_kernel or self.running_kernel()

    def patched(self, kernel: str) -> bool:
        """True for the baseline's kernel (the one with the BAR1 bridge-window patch)."""
        return kernel == (self._facts.baseline.kernel_release or HostFactsScenario().kernel_release)

    def _rebooted_stock(self) -> bool:
        """A simulated reboot booted a kernel other than the baseline's."""
        booted = self._booted_kernel()
        return booted is not None and not self.patched(booted)

    def replay_count(self, index: int, base: int | None) -> int | None:
        """Card ``index``'s replay counter now: the scenario's value plus its climb."""
        rate = self._facts.card(index).replay_per_min
        if base is None or not rate:
            return base
        return base + _per_uptime(rate, self._uptime_s())

    def _bridges(self, index: int) -> tuple[str, ...]:
        return self._facts.card(index).bridges or (root_port(index),)

    def _card_bus(self, card: GpuSnapshot, sim: SimCardHost) -> CardBus:
        return CardBus(
            pci_bus_id=card.pci_bus_id,
            driver=sim.driver,
            bridges=self._bridges(card.index),
            uplink=PciLink(
                gen=sim.uplink_gen or card.pcie_gen_current,
                width=sim.uplink_width or card.pcie_width_current,
            ),
        )

    def _buses(self) -> tuple[CardBus, ...]:
        cards = [
            self._card_bus(card, self._facts.card(card.index)) for card in self._scenario.cards
        ]
        extra = [
            CardBus(device.pci_bus_id, "nvidia", (root_port(len(cards) + n),))
            for n, device in enumerate(self._scenario.host.extra_pci_devices)
        ]
        return tuple(cards + extra)

    def aer(self) -> tuple[DeviceAer, ...]:
        """AER counters of every card and of the port above it, climbing with uptime."""
        uptime_s = self._uptime_s()
        devices: dict[str, AerCounts] = {}
        for card in self._scenario.cards:
            sim = self._facts.card(card.index)
            devices[card.pci_bus_id] = AerCounts(
                correctable=_per_uptime(sim.aer_correctable_per_min, uptime_s),
                nonfatal=_per_uptime(sim.aer_nonfatal_per_min, uptime_s),
                fatal=sim.aer_fatal,
            )
            port = self._bridges(card.index)[0]
            known = devices.get(port, AerCounts(0, 0, 0))
            devices[port] = AerCounts(
                correctable=(known.correctable or 0)
                + _per_uptime(sim.port_correctable_per_min, uptime_s),
                nonfatal=(known.nonfatal or 0) + _per_uptime(sim.port_nonfatal_per_min, uptime_s),
                fatal=(known.fatal or 0) + sim.port_fatal,
            )
        return tuple(DeviceAer(address, counts) for address, counts in devices.items())

    def _p2p(self, snapshot: RigSnapshot) -> tuple[P2pPair, ...]:
        live = [card for card in snapshot.cards if not card.lost]
        stock = self._rebooted_stock()
        pairs = [
            P2pPair(
                *pair_key(a.pci_bus_id, b.pci_bus_id),
                P2pStatus.NOT_SUPPORTED if stock else self._facts.pair(a.index, b.index),
            )
            for a, b in itertools.combinations(live, 2)
        ]
        return tuple(sorted(pairs, key=lambda pair: (pair.a, pair.b)))

    def facts(self, snapshot: RigSnapshot) -> HostFacts:
        """Everything the real readers would read, as the scenario describes it now."""
        facts = self._facts
        running = self.running_kernel()
        cmdline = tuple(
            f"BOOT_IMAGE=/vmlinuz-{running}" if arg.startswith("BOOT_IMAGE=") else arg
            for arg in facts.cmdline
        )
        boot_args = facts.boot_args or without_bootloader_args(facts.cmdline)
        default = facts.default_boot_kernel
        return HostFacts(
            running_kernel=running,
            cmdline=cmdline,
            default_boot=None
            if default is None
            else BootEntry(default, boot_args, f"Simulated Linux {default}", "simulated"),
            module_path=facts.module_path or sim_module_path(running),
            module_srcversion=facts.module_srcversion,
            registry_dwords=facts.registry_dwords,
            cards=self._buses(),
            aer=self.aer(),
            p2p=self._p2p(snapshot),
        )

    def known_good(self, now: datetime) -> HostBaseline:
        """The baseline the simulated rig was initialised with (its healthy self, pinned)."""
        defaults = {name: CMP170HX_DEFAULTS[name] for name in _BASELINE_CARD_FIELDS}
        cards = tuple(replace(card, lost=False, **defaults) for card in self._scenario.cards)  # type: ignore[arg-type]
        snapshot = RigSnapshot(taken_at=now, monotonic_s=0.0, cards=cards)
        healthy = HostFactsScenario()
        buses = tuple(replace(bus, driver="nvidia") for bus in self._buses()[: len(cards)])
        facts = HostFacts(
            running_kernel=healthy.kernel_release,
            cmdline=healthy.cmdline,
            default_boot=BootEntry(
                healthy.kernel_release,
                without_bootloader_args(healthy.cmdline),
                f"Simulated Linux {healthy.kernel_release}",
                "simulated",
            ),
            module_path=sim_module_path(healthy.kernel_release),
            module_srcversion=healthy.module_srcversion,
            registry_dwords=healthy.registry_dwords,
            cards=buses,
            p2p=tuple(
                P2pPair(*pair_key(a.pci_bus_id, b.pci_bus_id), P2pStatus.OK)
                for a, b in itertools.combinations(cards, 2)
            ),
        )
        return merge_baseline(record_baseline(snapshot, facts, now), self._facts.baseline)
