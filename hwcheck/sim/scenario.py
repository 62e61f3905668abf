"""Scenario files: a whole simulated rig described in TOML, loaded into frozen dataclasses.

A scenario says what every card reads (``[rig]`` defaults, ``[[cards]]`` overrides by
position), what happens when (``[[timeline]]``), what else the host shows (``[host]``)
and how the simulated engine behaves (``[engine]``, kept as the raw table: hwcheck never
reads it; ``serving.sim.scenario`` parses it). Built-ins ship as package data in
``hwcheck/sim/scenarios/``. Any mistake in a file is a ``ScenarioError`` whose message is
one line naming the file, the key path and the problem, so ``fleetd --simulate`` can
print it and exit instead of showing a traceback.
"""

from __future__ import annotations

import hashlib
import tomllib
import types
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import ClassVar, Final

from hwcheck.model import NVIDIA_VENDOR_ID, DeviceHolder, GpuSnapshot, PciDevice
from hwcheck.nvml_errors import NvmlDown
from hwcheck.sim.fields import (
    CardValue,
    FieldError,
    check_card_field,
    check_card_fields,
    describe_value,
    expect_bool,
    expect_int,
    expect_number,
    expect_str,
)

# What one unlocked, capped CMP 170HX reads when idle (DOMAIN.md's recorded card).
# ``[rig]`` and ``[[cards]]`` override any of it.
CMP170HX_DEFAULTS: Final[Mapping[str, CardValue]] = types.MappingProxyType(
    {
        "name": "NVIDIA CMP 170HX",
        "pci_device_id": 0x20C2,
        "vbios_version": "92.00.6D.00.0A",
        "driver_version": "580.95.05",
        "memory_total_mib": 65536,
        "memory_used_mib": 0,
        "power_draw_w": 58.0,
        "power_limit_w": 180.0,
        "power_enforced_limit_w": 180.0,
        "power_default_limit_w": 250.0,
        "power_min_limit_w": 100.0,
        "power_max_limit_w": 300.0,
        "clock_event_reasons": 0x1,  # GPU idle: no slowdown of any kind
        "sm_clock_mhz": 1410,
        "memory_clock_mhz": 1215,
        "temperature_c": 50.0,
        "memory_temperature_c": 55.0,
        "pcie_gen_current": 2,
        "pcie_width_current": 4,
        "pcie_gen_max": 2,
        "pcie_width_max": 4,
        "persistence_mode": True,
        "fan_speed_pct": None,  # passive card: the chassis fans cool it
        "recovery_action": 0,
    }
)

# Namespace of the deterministic UUIDs given to cards that do not set one.
_UUID_NAMESPACE: Final = uuid.UUID("5b0f3c1e-7a43-4b8e-9d2c-cf1f0e2a9a17")

_TOP_LEVEL_KEYS = frozenset(
    {"description", "card_count", "rig", "cards", "timeline", "host", "engine"}
)
_ACTIONS = ("xid", "lose_card", "set", "brake")


class ScenarioError(ValueError):
    """A scenario that cannot be loaded; the message is one line naming file and key."""


@dataclass(frozen=True, slots=True)
class HostScenario:
    """What the simulated host shows besides NVML.

    ``extra_pci_devices`` are cards on the PCI bus that NVML does not list (a card the
    driver failed to bring up); ``boot_log`` lines are written to the simulated kernel
    log at every simulated boot.
    """

    foreign_processes: tuple[DeviceHolder, ...] = ()
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


@dataclass(frozen=True, slots=True)
class XidStep:
    """Write an NVRM Xid line for ``card`` into the kernel log."""

    at_s: float
    card: int
    xid: int
    message: str | None = None
    pid: int | None = None
    process: str | None = None
    action: ClassVar[str] = "xid"


@dataclass(frozen=True, slots=True)
class LoseCardStep:
    """The card stops answering NVML (it stays on the PCI bus)."""

    at_s: float
    card: int
    reason: str | None = None
    action: ClassVar[str] = "lose_card"


@dataclass(frozen=True, slots=True)
class SetCardStep:
    """Change some of a card's readings; ``fields`` are checked ``GpuSnapshot`` fields."""

    at_s: float
    card: int
    fields: tuple[tuple[str, CardValue], ...]
    action: ClassVar[str] = "set"


@dataclass(frozen=True, slots=True)
class BrakeStep:
    """Assert or release the hardware power brake on one card (``None``: every card)."""

    at_s: float
    on: bool
    card: int | None = None
    action: ClassVar[str] = "brake"


TimelineStep = XidStep | LoseCardStep | SetCardStep | BrakeStep


def step_key(position: int, step: TimelineStep) -> str:
    """A stable id of a step, stored once it fired so it never fires again.

    It is the step's position, action and time: editing a scenario's timeline (or
    switching scenarios on the same state dir) makes changed steps new steps.
    """
    return f"{position}:{step.action}@{step.at_s:g}"


@dataclass(frozen=True, slots=True)
class Scenario:
    """A whole simulated rig.

    ``cards`` are fully resolved snapshots of each card at boot (index = position);
    ``source`` is the file it came from (for messages).
    """

    name: str
    source: str
    description: str
    cards: tuple[GpuSnapshot, ...]
    timeline: tuple[TimelineStep, ...] = ()
    host: HostScenario = field(default_factory=HostScenario)
    engine: Mapping[str, object] = field(default_factory=lambda: types.MappingProxyType({}))


def builtin_scenario_names() -> list[str]:
    """The names ``--simulate`` accepts without a path, sorted."""
    folder = resources.files("hwcheck.sim") / "scenarios"
    return sorted(
        entry.name.removesuffix(".toml")
        for entry in folder.iterdir()
        if entry.name.endswith(".toml") and entry.is_file()
    )


def load_scenario(name_or_path: str) -> Scenario:
    """Load a built-in scenario by name, or a scenario TOML file by path."""
    if name_or_path in builtin_scenario_names():
        resource = resources.files("hwcheck.sim") / "scenarios" / f"{name_or_path}.toml"
        label = f"{name_or_path}.toml"
        return parse_scenario(resource.read_text(encoding="utf-8"), label, name_or_path)
    path = Path(name_or_path)
    if not path.is_file():
        known = ", ".join(builtin_scenario_names())
        what = "no such file" if not path.exists() else "not a regular file"
        raise ScenarioError(
            f"scenario {name_or_path}: {what}, and not a built-in scenario ({known})"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"scenario {name_or_path}: cannot read it: {exc}") from None
    return parse_scenario(text, name_or_path, path.stem)


def parse_scenario(text: str, label: str, name: str) -> Scenario:
    """Parse scenario TOML ``text``; ``label`` names the file in error messages."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        detail = " ".join(str(exc).split())  # one line, whatever the parser says
        raise ScenarioError(f"scenario {label}: not valid TOML: {detail}") from None
    try:
        return _build(document, label, name)
    except FieldError as exc:
        raise ScenarioError(f"scenario {label}: {exc}") from None


def _table(path: str, value: object) -> dict[str, object]:
    if not isinstance(value, dict):
        raise FieldError(path, f"expected a table, got {describe_value(value)}")
    return value


def _list(path: str, value: object) -> list[object]:
    if not isinstance(value, list):
        raise FieldError(path, f"expected a list, got {describe_value(value)}")
    return value


def _reject_unknown(path: str, table: Mapping[str, object], known: frozenset[str]) -> None:
    for key in table:
        if key not in known:
            where = f"{path}.{key}" if path else key
            raise FieldError(where, f"unknown key (known: {', '.join(sorted(known))})")


def _build(document: dict[str, object], label: str, name: str) -> Scenario:
    _reject_unknown("", document, _TOP_LEVEL_KEYS)
    description = expect_str("description", document.get("description", ""))
    rig = check_card_fields("rig", _table("rig", document.get("rig", {})))
    card_tables = [
        _table(f"cards[{i}]", entry)
        for i, entry in enumerate(_list("cards", document.get("cards", [])))
    ]
    count = len(card_tables)
    if "card_count" in document:
        count = expect_int("card_count", document["card_count"])
        if count < 1:
            raise FieldError("card_count", f"must be at least 1, got {count}")
        if count < len(card_tables):
            raise FieldError(
                "card_count", f"{count} is less than the {len(card_tables)} [[cards]] given"
            )
    if count == 0:
        raise FieldError("cards", "the scenario has no cards: give card_count or [[cards]]")
    cards = _build_cards(rig, card_tables, count)
    timeline = tuple(
        _build_step(f"timeline[{i}]", _table(f"timeline[{i}]", entry), count)
        for i, entry in enumerate(_list("timeline", document.get("timeline", [])))
    )
    return Scenario(
        name=name,
        source=label,
        description=description,
        cards=cards,
        timeline=timeline,
        host=_build_host(_table("host", document.get("host", {}))),
        engine=types.MappingProxyType(_table("engine", document.get("engine", {}))),
    )


def default_pci_bus_id(index: int) -> str:
    """Addresses spread the way risers on a workstation board are: 01, 21, 41, ...

    Past eight cards the pattern shifts by one bus (02, 22, ...), so it never repeats.
    """
    bus = ((index % 8) * 0x20 + 1 + index // 8) & 0xFF
    return f"0000:{bus:02x}:00.0"


def default_uuid(pci_bus_id: str) -> str:
    """A deterministic ``GPU-...`` UUID derived from the card's address."""
    return f"GPU-{uuid.uuid5(_UUID_NAMESPACE, pci_bus_id)}"


def default_serial(pci_bus_id: str) -> str:
    """A deterministic 13-digit board serial derived from the card's address."""
    digest = hashlib.sha256(f"cmpfleet-sim-serial:{pci_bus_id}".encode()).hexdigest()
    return f"{int(digest, 16) % 10**13:013d}"


def _build_cards(
    rig: Mapping[str, CardValue], tables: list[dict[str, object]], count: int
) -> tuple[GpuSnapshot, ...]:
    for unique in ("pci_bus_id", "uuid"):
        if unique in rig and count > 1:
            raise FieldError(f"rig.{unique}", "must differ per card: set it in [[cards]]")
    cards: list[GpuSnapshot] = []
    owners: dict[str, int] = {}
    for index in range(count):
        path = f"cards[{index}]"
        values: dict[str, CardValue] = {**CMP170HX_DEFAULTS, **rig}
        if index < len(tables):
            values.update(check_card_fields(path, tables[index]))
        address = values.get("pci_bus_id") or default_pci_bus_id(index)
        values["pci_bus_id"] = address
        values.setdefault("uuid", default_uuid(str(address)))
        values.setdefault("serial", default_serial(str(address)))
        for unique in ("pci_bus_id", "uuid"):
            value = values[unique]
            seen = owners.get(f"{unique}={value}")
            if seen is not None:
                raise FieldError(
                    f"{path}.{unique}", f"{describe_value(value)} is already card {seen}'s"
                )
            owners[f"{unique}={value}"] = index
        cards.append(GpuSnapshot(index=index, **values))  # type: ignore[arg-type]
    return tuple(cards)


def _card_index(path: str, value: object, count: int) -> int:
    index = expect_int(path, value)
    if not 0 <= index < count:
        raise FieldError(
            path, f"card {index} does not exist (the scenario has {count} cards: 0 to {count - 1})"
        )
    return index


def _build_step(path: str, table: dict[str, object], count: int) -> TimelineStep:
    action = expect_str(f"{path}.action", table.get("action", ""))
    if action not in _ACTIONS:
        raise FieldError(
            f"{path}.action",
            f"unknown action {describe_value(action)} (known: {', '.join(_ACTIONS)})",
        )
    if "at_s" not in table:
        raise FieldError(f"{path}.at_s", "missing (seconds after the simulated boot)")
    at_s = expect_number(f"{path}.at_s", table["at_s"])
    if at_s < 0:
        raise FieldError(f"{path}.at_s", f"must not be negative, got {at_s:g}")

    def card() -> int:
        if "card" not in table:
            raise FieldError(f"{path}.card", f"missing (action {action} needs a card)")
        return _card_index(f"{path}.card", table["card"], count)

    if action == "xid":
        _reject_unknown(
            path, table, frozenset({"at_s", "action", "card", "xid", "message", "pid", "process"})
        )
        if "xid" not in table:
            raise FieldError(f"{path}.xid", "missing (the Xid number)")
        xid = expect_int(f"{path}.xid", table["xid"])
        if xid <= 0:
            raise FieldError(f"{path}.xid", f"must be positive, got {xid}")
        message = table.get("message")
        pid = table.get("pid")
        process = table.get("process")
        return XidStep(
            at_s=at_s,
            card=card(),
            xid=xid,
            message=None if message is None else expect_str(f"{path}.message", message),
            pid=None if pid is None else expect_int(f"{path}.pid", pid),
            process=None if process is None else expect_str(f"{path}.process", process),
        )
    if action == "lose_card":
        _reject_unknown(path, table, frozenset({"at_s", "action", "card", "reason"}))
        reason = table.get("reason")
        return LoseCardStep(
            at_s=at_s,
            card=card(),
            reason=None if reason is None else expect_str(f"{path}.reason", reason),
        )
    if action == "set":
        _reject_unknown(path, table, frozenset({"at_s", "action", "card", "fields"}))
        if "fields" not in table:
            raise FieldError(f"{path}.fields", "missing (a table of card fields to change)")
        fields = check_card_fields(f"{path}.fields", _table(f"{path}.fields", table["fields"]))
        if "pci_bus_id" in fields or "uuid" in fields:
            raise FieldError(f"{path}.fields", "a card's pci_bus_id and uuid cannot change")
        return SetCardStep(at_s=at_s, card=card(), fields=tuple(fields.items()))
    _reject_unknown(path, table, frozenset({"at_s", "action", "card", "on"}))
    if "on" not in table:
        raise FieldError(f"{path}.on", "missing (true to assert the brake, false to release it)")
    brake_card = None if "card" not in table else card()
    return BrakeStep(at_s=at_s, on=expect_bool(f"{path}.on", table["on"]), card=brake_card)


def _build_host(table: dict[str, object]) -> HostScenario:
    _reject_unknown(
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
            }
        ),
    )
    holders: list[DeviceHolder] = []
    for i, entry in enumerate(_list("host.foreign_processes", table.get("foreign_processes", []))):
        path = f"host.foreign_processes[{i}]"
        item = _table(path, entry)
        _reject_unknown(path, item, frozenset({"pid", "name", "device", "cmdline"}))
        for required in ("pid", "name", "device"):
            if required not in item:
                raise FieldError(f"{path}.{required}", "missing")
        holders.append(
            DeviceHolder(
                pid=expect_int(f"{path}.pid", item["pid"]),
                name=expect_str(f"{path}.name", item["name"]),
                device=expect_str(f"{path}.device", item["device"]),
                cmdline=expect_str(f"{path}.cmdline", item.get("cmdline", "")),
            )
        )
    devices: list[PciDevice] = []
    for i, entry in enumerate(_list("host.extra_pci_devices", table.get("extra_pci_devices", []))):
        path = f"host.extra_pci_devices[{i}]"
        item = _table(path, entry)
        _reject_unknown(path, item, frozenset({"pci_bus_id", "device_id", "vendor_id"}))
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
        for i, line in enumerate(_list("host.boot_log", table.get("boot_log", [])))
    )
    delay_s = _optional_seconds("host.nvml_delay_s", table.get("nvml_delay_s")) or 0.0
    return HostScenario(
        foreign_processes=tuple(holders),
        extra_pci_devices=tuple(devices),
        boot_log=lines,
        nvml_delay_s=delay_s,
        kernel_module_version=(
            None
            if "kernel_module_version" not in table
            else expect_str("host.kernel_module_version", table["kernel_module_version"])
        ),
        nvml_unavailable=_nvml_down(table.get("nvml_unavailable")),
        nvml_back_after_s=_optional_seconds(
            "host.nvml_back_after_s", table.get("nvml_back_after_s")
        ),
        cuda_probe=_cuda_probe(_table("host.cuda_probe", table.get("cuda_probe", {}))),
    )


PROBE_OUTCOMES = ("ok", "failed", "timed_out", "unavailable")


def _cuda_probe(table: dict[str, object]) -> tuple[tuple[int, str], ...]:
    """``{"1" = "failed"}``: card index (a TOML key) to the probe's outcome."""
    answers: list[tuple[int, str]] = []
    for key, value in table.items():
        path = f"host.cuda_probe.{key}"
        if not key.isdigit():
            raise FieldError(path, 'the key must be a card index, e.g. 1 = "failed"')
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


def _optional_seconds(path: str, value: object | None) -> float | None:
    if value is None:
        return None
    seconds = expect_number(path, value)
    if seconds < 0:
        raise FieldError(path, f"must not be negative, got {seconds:g}")
    return seconds
