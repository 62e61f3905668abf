"""Every host source in one bundle, so a simulated rig can replace all of them at once.

A scenario replaces every host source: NVML, sysfs PCI ids, the kernel log, the boot id and
the holders of /dev/nvidia* (docs/reference.md "Simulation"). Code that reads the host takes a
``HostSources`` and never reaches for ``/sys``, ``/proc`` or NVML on its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hwcheck.backend import GpuBackend
from hwcheck.carddiag.diagnoser import Diagnoser
from hwcheck.cuda_results import CudaProber
from hwcheck.hostfacts.baseline import HostBaseline
from hwcheck.hostfacts.model import DeviceAer, HostFacts
from hwcheck.kernellog.records import KernelLogCursor, KernelLogSource, KernelRecord
from hwcheck.memtest.results import Memtester
from hwcheck.model import DeviceHolder, PciDevice, RigSnapshot
from hwcheck.resources import HostResources, read_resources

ResourceReader = Callable[[Sequence[tuple[str, Path]], int | None], HostResources]


@dataclass(frozen=True)
class HostSources:
    """The readers of one host, real or simulated.

    - ``gpu``: the NVML or simulated backend.
    - ``pci_devices``: CMP devices found on the PCI bus (sysfs), independent of NVML.
    - ``boot_id``: ``/proc/sys/kernel/random/boot_id`` or the simulated one.
    - ``device_holders``: processes holding ``/dev/nvidia*`` open, less the pids given
      (this machine's own fleetd and engines). A simulated host's holders are its
      scenario's processes, numbered in a pid space of their own: none is one of ours,
      whatever its number (a real engine's pid here once equalled a scenario's 812, and
      nvidia-persistenced vanished from the check).
    - ``open_kernel_log``: a follower resuming after a cursor (``None``: from now on,
      history of this boot included when ``history`` is true).
    - ``kernel_log_history``: this boot's records so far (for one-shot checks).
    - ``kernel_module_version``: the loaded nvidia kernel module's version, or None.
    - ``cuda_prober``: the simulated rig's CUDA probe (None: the real subprocess probe).
    - ``host_facts``: the boot chain, nvidia module, bus and P2P facts for the cards of a
      snapshot (files and bootloader: read once a minute by fleetd); None: not read.
    - ``pcie_aer``: only the AER counters (cheap file reads, for rates between facts).
    - ``known_good_baseline``: the simulated rig's baseline (None on a real host: there
      the baseline is recorded from what is read).
    - ``memtester``: the simulated memory test (None: the real subprocess test).
    - ``diagnoser``: the simulated card diagnostics (None: the real child processes).
    - ``kernel_clock_s``: the clock kernel-log stamps count on (``CLOCK_MONOTONIC``; the
      simulated rig's uptime), to map a record's stamp to wall time.
    - ``resources``: the filesystems of ``(label, path)``s and the RAM, with the RAM the
      profile needs (``hwcheck.resources``; the simulated rig's come from its scenario).
    """

    gpu: GpuBackend
    pci_devices: Callable[[], list[PciDevice]]
    boot_id: Callable[[], str]
    device_holders: Callable[[frozenset[int]], list[DeviceHolder]]
    open_kernel_log: Callable[[KernelLogCursor | None], KernelLogSource]
    kernel_log_history: Callable[[], list[KernelRecord]]
    simulated: bool = False
    kernel_module_version: Callable[[], str | None] = field(default=lambda: None)  # unknown
    cuda_prober: CudaProber | None = None
    host_facts: Callable[[RigSnapshot], HostFacts] | None = None
    pcie_aer: Callable[[RigSnapshot], tuple[DeviceAer, ...]] | None = None
    known_good_baseline: Callable[[], HostBaseline] | None = None
    memtester: Memtester | None = None
    diagnoser: Diagnoser | None = None
    kernel_clock_s: Callable[[], float] = time.monotonic
    resources: ResourceReader = read_resources

    def close(self) -> None:
        """Release the GPU backend."""
        self.gpu.close()
