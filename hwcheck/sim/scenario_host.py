"""The ``[host]`` table of a scenario: what the simulated host shows besides NVML.

Foreign GPU processes, cards on the PCI bus that NVML does not list, boot log lines, a slow
or missing NVML, a half-upgraded kernel module and per-card CUDA probe answers. Split from
``scenario.py`` so each file holds one part of the format.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hwcheck.model import NVIDIA_VENDOR_ID, DeviceHolder, PciDevice
from hwcheck.nvml.errors import NvmlDown
from hwcheck.sim.fields import (
    FieldError,
    card_index,
    check_card_field,
    expect_bool,
    expect_int,
    expect_list,
    expect_number,
    expect_seconds,
    expect_str,
    expect_table,
    reject_unknown,
)
from hwcheck.sim.scenario_hostfacts import HOST_FACT_KEYS, HostFactsScenario, build_host_facts

SIM_DISK_FREE_PCT = 60.0
SIM_MEMORY_MIB = 262_144  # 256 GiB


@dataclass(frozen=True, slots=True)
class HostScenario:
    """What the simulated host shows besides NVML.

    ``extra_pci_devices`` are cards on the PCI bus that NVML does not list (a card the
    driver failed to bring up); ``boot_log`` lines are written to the simulated kernel
    log at every simulated boot.
    """

    foreign_processes: tuple[DeviceHolder, ...] = ()
    # Foreign containers whose processes ignore SIGINT and SIGTERM (``ignores_signals``):
    # ``--stop-foreign`` must leave them running and refuse, never kill them.
    containers_ignoring_signals: frozenset[str] = frozenset()
    extra_pci_devices: tuple[PciDevice, ...] = ()
    boot_log: tuple[str, ...] = ()
    # Every snapshot's NVML reads take this long (a sick GPU's slow driver); beyond the
    # NVML call timeout ([poll] nvml_timeout_s) every card is reported lost.
    nvml_delay_s: float = 0.0
    # The loaded kernel module's version (None: the cards' driver version, as on a
    # consistent host); set it apart from the cards' to simulate a half-done upgrade.
    kernel_module_version: str | None = None
    # NVML cannot start (as after a kernel upgrade): an ``NvmlDown`` value, from the
    # simulated boot until ``nvml_back_after_s`` seconds after it (None: never back).
    nvml_unavailable: NvmlDown | None = None
    nvml_back_after_s: float | None = None
    # The CUDA probe's answer per card index ("ok", "failed", "timed_out", "unavailable"):
    # the "nvidia-smi looks fine but cuInit fails" wedge. Cards not named answer ok; a
    # simulated reboot clears every wedge, as a real one does.
    cuda_probe: tuple[tuple[int, str], ...] = ()
    # Host truth: boot chain, nvidia module, bus, P2P, PCIe errors, memory test
    # (``scenario_hostfacts``).
    facts: HostFactsScenario = field(default_factory=HostFactsScenario)
    # The simulated host's room (``host_resources``): free share of every filesystem the
    # daemon asks about (the state dir's, the model's), and the RAM.
    disk_free_pct: float = SIM_DISK_FREE_PCT
    memory_total_mib: int = SIM_MEMORY_MIB
    # ``(card, memory_total_mib)``: from every simulated reboot on, that card reports this
    # much memory (a card that comes up smaller at a boot: the KV pool shrinks, ``kv-drift``).
    less_memory_after_reboot: tuple[int, int] | None = None


def build_host(table: dict[str, object], count: int) -> HostScenario:
    """The ``[host]`` table of a scenario with ``count`` cards."""
    reject_unknown(
        "host",
        table,
        frozenset(
            {
                "foreign_processes",
                "extra_pci_devices",
                "boot_log",
                "nvml_delay_s",
                "kernel_module_version",
                "nvml_unavailable",
                "nvml_back_after_s",
                "cuda_probe",
                "disk_free_pct",
                "memory_total_mib",
                "less_memory_after_reboot",
                *HOST_FACT_KEYS,
            }
        ),
    )
    holders: list[DeviceHolder] = []
    stubborn: set[str] = set()
    for i, entry in enumerate(
        expect_list("host.foreign_processes", table.get("foreign_processes", []))
    ):
        path = f"host.foreign_processes[{i}]"
        item = expect_table(path, entry)
        reject_unknown(
            path,
            item,
            frozenset(
                {"pid", "name", "device", "cmdline", "container", "image", "ignores_signals"}
            ),
        )
        for required in ("pid", "name", "device"):
            if required not in item:
                raise FieldError(f"{path}.{required}", "missing")
        if expect_bool(f"{path}.ignores_signals", item.get("ignores_signals", False)):
            if "container" not in item:
                raise FieldError(f"{path}.ignores_signals", "only a container's process can")
            stubborn.add(expect_str(f"{path}.container", item["container"]))
        holders.append(
            DeviceHolder(
                pid=expect_int(f"{path}.pid", item["pid"]),
                name=expect_str(f"{path}.name", item["name"]),
                device=expect_str(f"{path}.device", item["device"]),
                cmdline=expect_str(f"{path}.cmdline", item.get("cmdline", "")),
                container=(
                    expect_str(f"{path}.container", item["container"])
                    if "container" in item
                    else None
                ),
                image=expect_str(f"{path}.image", item["image"]) if "image" in item else None,
            )
        )
    devices: list[PciDevice] = []
    for i, entry in enumerate(
        expect_list("host.extra_pci_devices", table.get("extra_pci_devices", []))
    ):
        path = f"host.extra_pci_devices[{i}]"
        item = expect_table(path, entry)
        reject_unknown(path, item, frozenset({"pci_bus_id", "device_id", "vendor_id"}))
        if "pci_bus_id" not in item:
            raise FieldError(f"{path}.pci_bus_id", "missing")
        address = check_card_field(path, "pci_bus_id", item["pci_bus_id"])
        devices.append(
            PciDevice(
                pci_bus_id=str(address),
                vendor_id=expect_int(f"{path}.vendor_id", item.get("vendor_id", NVIDIA_VENDOR_ID)),
                device_id=expect_int(f"{path}.device_id", item.get("device_id", 0x20C2)),
            )
        )
    lines = tuple(
        expect_str(f"host.boot_log[{i}]", line)
        for i, line in enumerate(expect_list("host.boot_log", table.get("boot_log", [])))
    )
    delay_s = optional_seconds("host.nvml_delay_s", table.get("nvml_delay_s")) or 0.0
    return HostScenario(
        foreign_processes=tuple(holders),
        containers_ignoring_signals=frozenset(stubborn),
        extra_pci_devices=tuple(devices),
        boot_log=lines,
        nvml_delay_s=delay_s,
        kernel_module_version=(
            None
            if "kernel_module_version" not in table
            else expect_str("host.kernel_module_version", table["kernel_module_version"])
        ),
        nvml_unavailable=_nvml_down(table.get("nvml_unavailable")),
        nvml_back_after_s=optional_seconds(
            "host.nvml_back_after_s", table.get("nvml_back_after_s")
        ),
        cuda_probe=_cuda_probe(expect_table("host.cuda_probe", table.get("cuda_probe", {})), count),
        facts=build_host_facts(table, count),
        disk_free_pct=_disk_free_pct(table.get("disk_free_pct", SIM_DISK_FREE_PCT)),
        memory_total_mib=_memory_mib(table.get("memory_total_mib", SIM_MEMORY_MIB)),
        less_memory_after_reboot=_less_memory(table.get("less_memory_after_reboot"), count),
    )


def _less_memory(raw: object, count: int) -> tuple[int, int] | None:
    """``{card = N, memory_total_mib = M}``: card N reports M MiB after each reboot."""
    if raw is None:
        return None
    path = "host.less_memory_after_reboot"
    item = expect_table(path, raw)
    reject_unknown(path, item, frozenset({"card", "memory_total_mib"}))
    for required in ("card", "memory_total_mib"):
        if required not in item:
            raise FieldError(f"{path}.{required}", "missing")
    card = expect_int(f"{path}.card", item["card"])
    if not 0 <= card < count:
        raise FieldError(f"{path}.card", f"no card {card} (the rig has {count})")
    mib = expect_int(f"{path}.memory_total_mib", item["memory_total_mib"])
    if mib < 1:
        raise FieldError(f"{path}.memory_total_mib", f"must be positive, got {mib}")
    return card, mib


def _disk_free_pct(value: object) -> float:
    """``[host] disk_free_pct``: 0 to 100."""
    pct = expect_number("host.disk_free_pct", value)
    if not 0 <= pct <= 100:
        raise FieldError("host.disk_free_pct", f"must be 0 to 100, got {pct:g}")
    return pct


def _memory_mib(value: object) -> int:
    """``[host] memory_total_mib``: above 0."""
    mib = expect_int("host.memory_total_mib", value)
    if mib <= 0:
        raise FieldError("host.memory_total_mib", f"must be above 0, got {mib}")
    return mib


PROBE_OUTCOMES = ("ok", "failed", "timed_out", "unavailable")


def _cuda_probe(table: dict[str, object], count: int) -> tuple[tuple[int, str], ...]:
    """``{"1" = "failed"}``: card index (a TOML key) to the probe's outcome."""
    answers: list[tuple[int, str]] = []
    for key, value in table.items():
        path = f"host.cuda_probe.{key}"
        if not key.isdecimal():
            raise FieldError(path, 'the key must be a card index, e.g. 1 = "failed"')
        card_index(path, int(key), count)
        outcome = expect_str(path, value)
        if outcome not in PROBE_OUTCOMES:
            raise FieldError(path, f"one of {', '.join(PROBE_OUTCOMES)}, got {outcome!r}")
        answers.append((int(key), outcome))
    return tuple(sorted(answers))


def _nvml_down(value: object | None) -> NvmlDown | None:
    if value is None:
        return None
    text = expect_str("host.nvml_unavailable", value)
    try:
        return NvmlDown(text)
    except ValueError:
        choices = ", ".join(kind.value for kind in NvmlDown)
        raise FieldError("host.nvml_unavailable", f"one of {choices}, got {text!r}") from None


def optional_seconds(path: str, value: object | None) -> float | None:
    """A non-negative number of seconds, or None when the key is absent."""
    if value is None:
        return None
    return expect_seconds(path, value)
