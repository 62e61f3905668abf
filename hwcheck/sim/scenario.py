"""Scenario files: a whole simulated rig described in TOML, loaded into frozen dataclasses.

A scenario says what every card reads (``[rig]`` defaults, ``[[cards]]`` overrides by
position), what happens when (``[[timeline]]``), what else the host shows (``[host]``, parsed
by ``scenario_host``) and how the simulated engine behaves (``[engine]``, kept as the raw
table: hwcheck never reads it; ``serving.sim.scenario`` parses it). Built-ins ship as package data in
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

from hwcheck.model import GpuSnapshot
from hwcheck.regular_file import read_regular
from hwcheck.sim.fields import (
    CardValue,
    FieldError,
    card_index,
    check_card_fields,
    describe_value,
    expect_bool,
    expect_int,
    expect_list,
    expect_seconds,
    expect_str,
    expect_table,
    reject_unknown,
)
from hwcheck.sim.scenario_host import HostScenario, build_host

# What one unlocked, capped CMP 170HX reads when idle (docs/domain.md "One recorded card").
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
        # Host truth: the 64 GB BAR1 of the patched kernel, a current VBIOS's top clocks.
        "bar1_total_mib": 65536,
        "sm_clock_max_mhz": 1410,
        "memory_clock_max_mhz": 1728,
        "pcie_replay_count": 0,
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
        text = read_regular(path).decode("utf-8")  # a FIFO or a device: one line, no hang
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


def _build(document: dict[str, object], label: str, name: str) -> Scenario:
    reject_unknown("", document, _TOP_LEVEL_KEYS)
    description = expect_str("description", document.get("description", ""))
    rig = check_card_fields("rig", expect_table("rig", document.get("rig", {})))
    card_tables = [
        expect_table(f"cards[{i}]", entry)
        for i, entry in enumerate(expect_list("cards", document.get("cards", [])))
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
        _build_step(f"timeline[{i}]", expect_table(f"timeline[{i}]", entry), count)
        for i, entry in enumerate(expect_list("timeline", document.get("timeline", [])))
    )
    return Scenario(
        name=name,
        source=label,
        description=description,
        cards=cards,
        timeline=timeline,
        host=build_host(expect_table("host", document.get("host", {})), count),
        engine=types.MappingProxyType(expect_table("engine", document.get("engine", {}))),
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


def _build_step(path: str, table: dict[str, object], count: int) -> TimelineStep:
    action = expect_str(f"{path}.action", table.get("action", ""))
    if action not in _ACTIONS:
        raise FieldError(
            f"{path}.action",
            f"unknown action {describe_value(action)} (known: {', '.join(_ACTIONS)})",
        )
    if "at_s" not in table:
        raise FieldError(f"{path}.at_s", "missing (seconds after the simulated boot)")
    at_s = expect_seconds(f"{path}.at_s", table["at_s"])

    def card() -> int:
        if "card" not in table:
            raise FieldError(f"{path}.card", f"missing (action {action} needs a card)")
        return card_index(f"{path}.card", table["card"], count)

    if action == "xid":
        reject_unknown(
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
        reject_unknown(path, table, frozenset({"at_s", "action", "card", "reason"}))
        reason = table.get("reason")
        return LoseCardStep(
            at_s=at_s,
            card=card(),
            reason=None if reason is None else expect_str(f"{path}.reason", reason),
        )
    if action == "set":
        reject_unknown(path, table, frozenset({"at_s", "action", "card", "fields"}))
        if "fields" not in table:
            raise FieldError(f"{path}.fields", "missing (a table of card fields to change)")
        fields = check_card_fields(
            f"{path}.fields", expect_table(f"{path}.fields", table["fields"])
        )
        if "pci_bus_id" in fields or "uuid" in fields:
            raise FieldError(f"{path}.fields", "a card's pci_bus_id and uuid cannot change")
        return SetCardStep(at_s=at_s, card=card(), fields=tuple(fields.items()))
    reject_unknown(path, table, frozenset({"at_s", "action", "card", "on"}))
    if "on" not in table:
        raise FieldError(f"{path}.on", "missing (true to assert the brake, false to release it)")
    brake_card = None if "card" not in table else card()
    return BrakeStep(at_s=at_s, on=expect_bool(f"{path}.on", table["on"]), card=brake_card)
