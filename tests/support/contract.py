"""The outside's fixed names (docs/reference.md), written out once for the tests (not from code)."""

from __future__ import annotations

# The host checks, judged against the baseline fleetctl init records.
CONTRACT_HOST_CHECK_IDS = frozenset(
    {
        "host_kernel",
        "kernel_cmdline",
        "driver_module",
        "bar1",
        "p2p",
        "vbios",
        "clocks",
        "pcie_errors",
    }
)
CONTRACT_CHECK_IDS = CONTRACT_HOST_CHECK_IDS | frozenset(
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
        "cuda_probe",
    }
)

CONTRACT_CARD_KEYS = frozenset(
    {
        "index",
        "pci_bus_id",
        "uuid",
        "name",
        "memory_total_mib",
        "power_limit_w",
        "power_draw_w",
        "power_brake_active",
        "temperature_c",
        "pcie_gen",
        "pcie_width",
        "xid_since_boot",
        "state",
    }
)
CONTRACT_SERVING_STATES = frozenset(
    {"stopped", "starting", "ready", "unhealthy", "stopping", "backoff", "held", "failed"}
)
CONTRACT_CANARY_NAMES = frozenset({"copy_fidelity", "tool_calls", "reasoning_field", "throughput"})
CONTRACT_EVENT_KEYS = frozenset({"id", "ts", "kind", "card", "xid", "severity", "message"})
