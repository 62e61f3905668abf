"""The host baseline: the rig's known-good host facts, recorded once and judged against.

``fleetctl init`` records it into the config it writes (a ``[host]`` table), and fleetd
records it on its first start into ``<state-dir>/host-baseline.toml`` when none exists;
any key of the config's ``[host]`` table wins over the recorded file, key by key (a card's
keys too), so a person can pin a value by hand. It is drift from this rig's own good
state that the host checks judge, not a vendor's datacenter norms.

The model is the config's ``[host]`` table (unknown keys are errors, like every section),
plus one judging knob: ``pcie_errors_warn_per_min``.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from hwcheck.hostfacts.cmdline import required_args
from hwcheck.hostfacts.model import HostFacts, P2pStatus
from hwcheck.model import RigSnapshot, normalize_pci_bus_id

BASELINE_FILE = "host-baseline.toml"
DEFAULT_PCIE_ERRORS_WARN_PER_MIN = 1.0


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CardBaseline(_Table):
    """One card's known-good facts, keyed by its PCI address in ``[host.cards]``."""

    bar1_mib: Annotated[int, Field(ge=1)] | None = None
    vbios: str | None = None
    sm_clock_max_mhz: Annotated[int, Field(ge=1)] | None = None
    memory_clock_max_mhz: Annotated[int, Field(ge=1)] | None = None
    driver: str | None = None  # the driver bound to it ("nvidia")
    bridge: str | None = None  # the parent bridge (a PLX switch port, or the root port)
    uplink_gen: Annotated[int, Field(ge=1, le=6)] | None = None
    uplink_width: Annotated[int, Field(ge=1, le=32)] | None = None
    p2p_ok: tuple[str, ...] | None = None  # peers whose P2P read status was OK

    @field_validator("bridge")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        return None if value is None else normalize_pci_bus_id(value)

    @field_validator("p2p_ok")
    @classmethod
    def _addresses(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return None if value is None else tuple(normalize_pci_bus_id(v) for v in value)


class HostBaseline(_Table):
    """The ``[host]`` table: recorded host facts (any may be pinned by hand) and one knob."""

    recorded_at: str | None = None
    kernel_release: str | None = None
    # The default boot entry when recorded (shown; host_kernel judges the entry against the
    # running kernel, and kernel_cmdline its arguments against required_cmdline).
    default_boot_kernel: str | None = None
    boot_args: tuple[str, ...] | None = None
    required_cmdline: tuple[str, ...] | None = None
    module_path: str | None = None
    module_srcversion: str | None = None
    registry_dwords: str | None = None
    cards: dict[str, CardBaseline] = Field(default_factory=dict)
    # Judging knob (never recorded): PCIe errors per minute on a card or the switch port
    # above it beyond which ``pcie_errors`` warns.
    pcie_errors_warn_per_min: Annotated[float, Field(gt=0, le=1e6)] = (
        DEFAULT_PCIE_ERRORS_WARN_PER_MIN
    )

    @field_validator("cards")
    @classmethod
    def _card_addresses(cls, value: dict[str, CardBaseline]) -> dict[str, CardBaseline]:
        return {normalize_pci_bus_id(address): card for address, card in value.items()}

    @property
    def recorded(self) -> bool:
        """True when any host fact is known (recorded or pinned), not only the knob."""
        facts = self.model_dump(exclude={"pcie_errors_warn_per_min", "recorded_at"})
        return any(value not in (None, {}) for value in facts.values())

    def card(self, pci_bus_id: str) -> CardBaseline:
        """The card's baseline (empty when nothing is known about that card)."""
        return self.cards.get(pci_bus_id) or CardBaseline()


# -- recording --------------------------------------------------------------------------


def record_baseline(snapshot: RigSnapshot, facts: HostFacts, now: datetime) -> HostBaseline:
    """Today's facts as the baseline: what ``fleetctl init`` and fleetd's first start write."""
    cards: dict[str, CardBaseline] = {}
    for card in snapshot.cards:
        if card.lost:
            continue
        bus = facts.card(card.pci_bus_id)
        peers = tuple(
            pair.b if pair.a == card.pci_bus_id else pair.a
            for pair in facts.p2p
            if card.pci_bus_id in (pair.a, pair.b) and pair.status is P2pStatus.OK
        )
        cards[card.pci_bus_id] = CardBaseline(
            bar1_mib=card.bar1_total_mib,
            vbios=card.vbios_version,
            sm_clock_max_mhz=card.sm_clock_max_mhz,
            memory_clock_max_mhz=card.memory_clock_max_mhz,
            driver=None if bus is None else bus.driver,
            bridge=None if bus is None else bus.bridge,
            uplink_gen=None if bus is None or bus.uplink is None else bus.uplink.gen,
            uplink_width=None if bus is None or bus.uplink is None else bus.uplink.width,
            p2p_ok=tuple(sorted(peers)) if facts.p2p else None,
        )
    boot = facts.default_boot
    return HostBaseline(
        recorded_at=now.isoformat(timespec="seconds"),
        kernel_release=facts.running_kernel,
        default_boot_kernel=None if boot is None else boot.kernel,
        boot_args=None if boot is None else boot.args,
        required_cmdline=None if facts.cmdline is None else required_args(facts.cmdline),
        module_path=facts.module_path,
        module_srcversion=facts.module_srcversion,
        registry_dwords=facts.registry_dwords,
        cards=cards,
    )


def merge_baseline(recorded: HostBaseline | None, pins: HostBaseline) -> HostBaseline:
    """The baseline in force: ``recorded``, with every key the config sets winning."""
    if recorded is None:
        return pins
    values: dict[str, Any] = dict(recorded)
    for name in pins.model_fields_set - {"cards"}:
        values[name] = getattr(pins, name)
    cards = dict(recorded.cards)
    for address, pinned in pins.cards.items():
        base = cards.get(address) or CardBaseline()
        cards[address] = base.model_copy(
            update={name: getattr(pinned, name) for name in pinned.model_fields_set}
        )
    values["cards"] = cards
    return HostBaseline.model_validate(values)


# -- the TOML form (the config's [host] table and the state dir's file) -----------------


def baseline_table(baseline: HostBaseline) -> dict[str, Any]:
    """The ``[host]`` table to write: known facts only, no knob (a config keeps its own)."""
    table = baseline.model_dump(exclude_none=True, exclude={"pcie_errors_warn_per_min"})
    table["cards"] = {address: card for address, card in table.get("cards", {}).items() if card}
    if not table["cards"]:
        del table["cards"]
    return table


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    return json.dumps(str(value))  # a JSON string is a TOML basic string


def baseline_toml(baseline: HostBaseline) -> str:
    """``baseline`` as a ``[host]`` table with one ``[host.cards."<address>"]`` per card."""
    table = baseline_table(baseline)
    cards: Mapping[str, Mapping[str, Any]] = table.pop("cards", {})
    lines = ["[host]"]
    lines += [f"{key} = {_value(value)}" for key, value in table.items()]
    for address, card in cards.items():
        lines += ["", f'[host.cards."{address}"]']
        lines += [f"{key} = {_value(value)}" for key, value in card.items()]
    return "\n".join(lines) + "\n"


class BaselineFileError(ValueError):
    """A baseline file that cannot be used; the message is one line naming the file."""


def load_baseline_file(path: Path) -> HostBaseline | None:
    """The baseline recorded in ``path`` (None when there is no such file)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BaselineFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        table = tomllib.loads(text).get("host", {})
        return HostBaseline.model_validate(table)
    except (tomllib.TOMLDecodeError, ValidationError) as exc:
        first = str(exc).splitlines()[0]
        raise BaselineFileError(f"{path}: not a host baseline: {first}") from None
