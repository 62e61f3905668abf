"""The real host's sources: NVML, sysfs, /proc, /dev/kmsg (or journald, or a file).

Roots are parameters so the same wiring can be pointed at recorded trees.
"""

from __future__ import annotations

from collections.abc import Collection
from functools import partial
from pathlib import Path
from typing import Literal

from hwcheck.bootid import read_boot_id
from hwcheck.driver_module import read_kernel_module_version
from hwcheck.holders import find_device_holders
from hwcheck.host import HostSources
from hwcheck.hostfacts.grubby import grubby_default_info
from hwcheck.hostfacts.model import DeviceAer, HostFacts
from hwcheck.hostfacts.pcitree import card_bus, read_aer_counters
from hwcheck.hostfacts.reader import read_host_facts
from hwcheck.kernellog.filelog import FileSource
from hwcheck.kernellog.history import host_kernel_log_history, open_host_kernel_log
from hwcheck.kernellog.records import KernelLogCursor, KernelLogSource, KernelRecord
from hwcheck.model import RigSnapshot
from hwcheck.nvml.backend import NvmlBackend
from hwcheck.sysfs import scan_cmp_devices

KernelLogChoice = Literal["auto", "kmsg", "journal", "file"]


def real_host_sources(
    nvml_timeout_s: float = 10.0,
    *,
    kernel_log: KernelLogChoice = "auto",
    kernel_log_file: str | None = None,
    sys_root: Path = Path("/sys"),
    proc_root: Path = Path("/proc"),
    exclude_pids: Collection[int] = (),
    host_root: Path = Path("/"),
) -> HostSources:
    """Sources reading this machine (NVML is initialised lazily, at the first snapshot).

    ``exclude_pids`` never count as ``/dev/nvidia*`` holders (fleetd and its engine, as
    named by a running fleetd, when ``fleetctl check`` runs beside one). ``host_root`` is
    where the host-truth readers find ``/proc``, ``/sys``, ``/boot`` and ``/lib/modules``.
    """
    boot_id = partial(read_boot_id, proc_root)
    gpu = NvmlBackend(call_timeout_s=nvml_timeout_s)

    def card_addresses(snapshot: RigSnapshot) -> list[str]:
        """NVML's cards and every CMP card on the bus (a card NVML lost is still judged)."""
        found = {card.pci_bus_id for card in snapshot.cards if card.pci_bus_id}
        found |= {device.pci_bus_id for device in scan_cmp_devices(sys_root)}
        return sorted(found)

    def host_facts(snapshot: RigSnapshot) -> HostFacts:
        return read_host_facts(
            host_root,
            card_addresses(snapshot),
            p2p=partial(gpu.p2p_status, snapshot),
            grubby_info=grubby_default_info(),
        )

    def pcie_aer(snapshot: RigSnapshot) -> tuple[DeviceAer, ...]:
        buses = [card_bus(host_root, address) for address in card_addresses(snapshot)]
        return read_aer_counters(host_root, buses)

    def open_log(cursor: KernelLogCursor | None) -> KernelLogSource:
        if kernel_log == "file":
            # A syslog file mixes boots and has no kernel seq: follow it from its end, so an
            # old boot's Xid is never counted in this one nor stored again at each restart.
            return FileSource(
                kernel_log_file or "/var/log/kern.log", None, boot_id(), from_start=False
            )
        # from_start: a first start reads this boot's history; the cursor skips the rest.
        return open_host_kernel_log(cursor, boot_id(), prefer=kernel_log, from_start=True)

    def history() -> list[KernelRecord]:
        if kernel_log == "file":
            return []  # which lines of a syslog file belong to this boot is unknowable
        return host_kernel_log_history(boot_id(), prefer=kernel_log)

    return HostSources(
        gpu=gpu,
        pci_devices=partial(scan_cmp_devices, sys_root),
        boot_id=boot_id,
        device_holders=lambda ours: find_device_holders(exclude_pids=ours | set(exclude_pids)),
        open_kernel_log=open_log,
        kernel_log_history=history,
        simulated=False,
        kernel_module_version=partial(read_kernel_module_version, proc_root, sys_root),
        host_facts=host_facts,
        pcie_aer=pcie_aer,
    )
