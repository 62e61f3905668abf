"""The NVML readings the readers may ask the gateway for, by name (no ``pynvml`` here).

Split from ``hwcheck.nvml.gateway``, which binds each to its ``pynvml`` function: the names
need no NVML, and the gateway stays one module's worth of plumbing as calls are added.
"""

from __future__ import annotations

import enum


class Call(enum.Enum):
    """The NVML functions the readers may ask for (the gateway binds each to ``pynvml``)."""

    DEVICE_COUNT = "device_count"
    DRIVER_VERSION = "driver_version"
    NVML_VERSION = "nvml_version"
    HANDLE_BY_INDEX = "handle_by_index"
    PCI_INFO = "pci_info"
    UUID = "uuid"
    NAME = "name"
    SERIAL = "serial"
    VBIOS_VERSION = "vbios_version"
    MEMORY_INFO = "memory_info"
    POWER_USAGE = "power_usage"
    POWER_LIMIT = "power_limit"
    ENFORCED_POWER_LIMIT = "enforced_power_limit"
    DEFAULT_POWER_LIMIT = "default_power_limit"
    POWER_LIMIT_CONSTRAINTS = "power_limit_constraints"
    TOTAL_ENERGY = "total_energy"  # mJ since the driver loaded (Volta and newer)
    SET_POWER_LIMIT = "set_power_limit"
    CLOCK_EVENT_REASONS = "clock_event_reasons"
    CLOCK_THROTTLE_REASONS = "clock_throttle_reasons"
    SM_CLOCK = "sm_clock"
    MEMORY_CLOCK = "memory_clock"
    TEMPERATURE = "temperature"
    TEMPERATURE_V = "temperature_v"
    FAN_SPEED = "fan_speed"
    PCIE_GEN_CURRENT = "pcie_gen_current"
    PCIE_WIDTH_CURRENT = "pcie_width_current"
    PCIE_GEN_MAX = "pcie_gen_max"
    PCIE_WIDTH_MAX = "pcie_width_max"
    PERSISTENCE_ENABLED = "persistence_enabled"
    BAR1_MEMORY = "bar1_memory"
    SM_CLOCK_MAX = "sm_clock_max"
    MEMORY_CLOCK_MAX = "memory_clock_max"
    PCIE_REPLAY_COUNTER = "pcie_replay_counter"
    P2P_READ_STATUS = "p2p_read_status"  # two handles; answers a ``P2pStatus``
    # What nvitop shows (issue 31): busy share of the SMs and of the memory controller over
    # the driver's last sample period, PCIe traffic (KB/s over 20 ms), the compute processes.
    UTILIZATION_RATES = "utilization_rates"
    PCIE_TX_THROUGHPUT = "pcie_tx_throughput"
    PCIE_RX_THROUGHPUT = "pcie_rx_throughput"
    COMPUTE_PROCESSES = "compute_processes"
    # (correctable, uncorrectable, pending, failed): NotSupported without ECC reporting.
    REMAPPED_ROWS = "remapped_rows"


class Field(enum.Enum):
    """Readings that come through the field-values API."""

    MEMORY_TEMPERATURE = "memory_temperature"
    GPU_RECOVERY_ACTION = "gpu_recovery_action"
