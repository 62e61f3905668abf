"""Test helpers shared across test modules (once in tests.daemon.rig.test_xidpath).

Helpers live only in tests/support: a test never imports another test module.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hwcheck.host import HostSources
from hwcheck.kernellog.kmsg import KmsgSource
from hwcheck.kernellog.records import KernelLogCursor, KernelRecord
from hwcheck.sim.rig import SimulatedRig
from hwcheck.sim.scenario import load_scenario
from tests.support.scripted_kernel import ScriptedKernel

BOOT = "5f0c0b6e-1c59-4b59-9d43-2c7b3a1f8e11"


class ReplayingSource:
    """A journald-like source that hands back the whole boot every time it is opened."""

    name = "journal"
    lost_records = 0

    def __init__(self, records: list[KernelRecord]) -> None:
        self._records = records
        self._given = False

    def read_available(self) -> list[KernelRecord]:
        if self._given:
            return []
        self._given = True
        return list(self._records)

    def wait(self, timeout_s: float) -> bool:
        return False

    def close(self) -> None:
        pass


XID_TEXT = "NVRM: Xid (PCI:0000:01:00): 31, pid=7, name=python3, MMU Fault"


def scripted_host(tmp_path: Path, opens: list[list[bytes | OSError]]) -> tuple[HostSources, list]:
    """A simulated rig's sources whose kernel log is /dev/kmsg with scripted reads."""
    device = tmp_path / "kmsg"
    device.write_bytes(b"")
    rig = SimulatedRig(load_scenario("healthy"), tmp_path / "sim")
    cursors: list[KernelLogCursor | None] = []

    def open_kernel_log(cursor: KernelLogCursor | None) -> KmsgSource:
        cursors.append(cursor)
        reader = ScriptedKernel(opens.pop(0) if opens else [])
        return KmsgSource(device, cursor, BOOT, from_start=True, read_record=reader)

    return replace(rig.host_sources(), open_kernel_log=open_kernel_log), cursors
