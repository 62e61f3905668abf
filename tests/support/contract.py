"""CONTRACT.md's fixed names, written out once for the tests (independent of the code)."""

from __future__ import annotations

CONTRACT_CHECK_IDS = frozenset(
    {
        "card_count",
        "vram_unlocked",
        "power_brake",
        "power_cap",
        "pcie_link",
        "temperature",
        "xid_since_boot",
        "persistence_mode",
        "driver_version",
        "foreign_gpu_processes",
    }
)
