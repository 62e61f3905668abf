"""The host-truth keys of a scenario's ``[host]`` table: boot chain, module, bus, P2P, memtest.

Every key has the value a healthy patched CMP rig has (``SIM_*`` below), so a scenario
names only what differs; ``[host.cards.N]`` sets one card's bus facts and error rates, and
``[host.baseline]`` (the config's ``[host]`` keys) changes what the simulated rig was
initialised with. By default the simulated host's baseline is its healthy self: the
values below and the default card (``CMP170HX_DEFAULTS``), every pair P2P OK.

Split from ``scenario_host`` so each file holds one part of the format.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import ValidationError

from hwcheck.hostfacts.baseline import HostBaseline
from hwcheck.hostfacts.cmdline import split_cmdline
from hwcheck.hostfacts.model import P2pStatus
from hwcheck.model import normalize_pci_bus_id
from hwcheck.sim.fields import (
    NOT_AVAILABLE,
    FieldError,
    card_index,
    expect_int,
    expect_list,
    expect_number,
    expect_str,
    expect_table,
    reject_unknown,
)
from hwcheck.sim.memory import FAULT_MODELS

SIM_KERNEL = "6.8.12-cmp-bar1"
SIM_CMDLINE = (
    f"BOOT_IMAGE=/vmlinuz-{SIM_KERNEL} root=UUID=3f5e8a1c-5b7d-4e2a-9c1f-0a6b7d8e9f10 ro "
    "pci=realloc,hpmemsize=64G iommu=pt amd_iommu=on modprobe.blacklist=nouveau quiet"
)
SIM_MODULE_RELATIVE = "updates/dkms/nvidia.ko"
SIM_SRCVERSION = "5D1C0A3E9B7F42E6A1C8D2F"
SIM_REGISTRY_DWORDS = "RMForceP2PType=1;RMPcieP2PType=2;ForceP2P=17"

HOST_FACT_KEYS = frozenset(
    {
        "kernel_release",
        "default_boot_kernel",
        "cmdline",
        "boot_args",
        "module_path",
        "module_srcversion",
        "registry_dwords",
        "p2p",
        "cards",
        "baseline",
    }
)
_CARD_KEYS = frozenset(
    {
        "driver",
        "bridges",
        "uplink_gen",
        "uplink_width",
        "replay_per_min",
        "aer_correctable_per_min",
        "aer_nonfatal_per_min",
        "aer_fatal",
        "port_correctable_per_min",
        "port_nonfatal_per_min",
        "port_fatal",
        "memtest_errors",
        "memtest_faults",
        "diag_faults",
        "bad_sm",
    }
)

# What only the right card diagnostic finds (``hwcheck.sim.carddiag``): a flipped bit in
# transfers (diag pcie), one SM's wrong FMA (``bad_sm``) and a tensor core one ulp off
# (diag compute), a card that heats past the stop under load (every diag's thermal stop).
DIAG_FAULTS = ("data-path-flip", "sm-fma", "tensor-ulp", "heats-under-load")


def sim_module_path(kernel_release: str) -> str:
    """Where the patched module sits for ``kernel_release`` (dkms rebuilds it per kernel)."""
    return f"/lib/modules/{kernel_release}/{SIM_MODULE_RELATIVE}"


@dataclass(frozen=True, slots=True)
class SimCardHost:
    """One simulated card's bus facts and error rates (errors climb with uptime)."""

    driver: str | None = "nvidia"  # None: no driver bound
    bridges: tuple[str, ...] | None = None  # None: its own root port
    uplink_gen: int | None = None  # None: the card's own link
    uplink_width: int | None = None
    replay_per_min: float = 0.0
    aer_correctable_per_min: float = 0.0
    aer_nonfatal_per_min: float = 0.0
    aer_fatal: int = 0
    port_correctable_per_min: float = 0.0  # on the parent bridge
    port_nonfatal_per_min: float = 0.0
    port_fatal: int = 0
    memtest_errors: int = 0  # stuck bits spread over the simulated memory
    memtest_faults: tuple[str, ...] = ()  # fault models (hwcheck.sim.memory.FAULT_MODELS)
    diag_faults: tuple[str, ...] = ()  # DIAG_FAULTS
    bad_sm: int = 17  # the SM of "sm-fma"


@dataclass(frozen=True, slots=True)
class HostFactsScenario:
    """The simulated host's boot chain, module, P2P and per-card bus facts."""

    kernel_release: str = SIM_KERNEL
    default_boot_kernel: str | None = SIM_KERNEL  # None: the bootloader is unknown here
    cmdline: tuple[str, ...] = split_cmdline(SIM_CMDLINE)
    boot_args: tuple[str, ...] | None = None  # None: the running line's
    module_path: str | None = None  # None: the patched module for the running kernel
    module_srcversion: str | None = SIM_SRCVERSION
    registry_dwords: str | None = SIM_REGISTRY_DWORDS
    p2p: P2pStatus = P2pStatus.OK  # every pair, unless named in p2p_pairs
    p2p_pairs: tuple[tuple[int, int, P2pStatus], ...] = ()
    cards: Mapping[int, SimCardHost] = field(default_factory=lambda: types.MappingProxyType({}))
    baseline: HostBaseline = field(default_factory=HostBaseline)

    def card(self, index: int) -> SimCardHost:
        """Card ``index``'s facts (the healthy defaults unless the scenario set some)."""
        return self.cards.get(index) or SimCardHost()

    def pair(self, first: int, second: int) -> P2pStatus:
        """The P2P read status between two cards."""
        for a, b, status in self.p2p_pairs:
            if {a, b} == {first, second}:
                return status
        return self.p2p


def _optional_str(path: str, value: object) -> str | None:
    text = expect_str(path, value)
    return None if text.lower() == NOT_AVAILABLE else text


def _status(path: str, value: object) -> P2pStatus:
    text = expect_str(path, value)
    try:
        return P2pStatus(text)
    except ValueError:
        known = ", ".join(status.value for status in P2pStatus)
        raise FieldError(path, f"one of {known}, got {text!r}") from None


def _pairs(table: dict[str, object], count: int) -> tuple[tuple[int, int, P2pStatus], ...]:
    """``{"0-1" = "not_supported"}``: a card pair (by index) and its status."""
    pairs: list[tuple[int, int, P2pStatus]] = []
    for key, value in table.items():
        path = f"host.p2p.{key}"
        first, sep, second = key.partition("-")
        if not (sep and first.isdecimal() and second.isdecimal()) or first == second:
            raise FieldError(path, 'the key must be a pair of card indexes, e.g. "0-1"')
        a = card_index(path, int(first), count)
        b = card_index(path, int(second), count)
        pairs.append((a, b, _status(path, value)))
    return tuple(pairs)


def _rate(path: str, value: object) -> float:
    rate = expect_number(path, value)
    if rate < 0:
        raise FieldError(path, f"must not be negative, got {rate:g}")
    return rate


def _faults(path: str, value: object) -> tuple[str, ...]:
    names = tuple(expect_str(path, item) for item in expect_list(path, value))
    for name in names:
        if name not in FAULT_MODELS:
            raise FieldError(
                path, f"unknown fault model {name!r} (known: {', '.join(FAULT_MODELS)})"
            )
    return names


def _card(path: str, table: dict[str, object]) -> SimCardHost:
    reject_unknown(path, table, _CARD_KEYS)
    values: dict[str, object] = {}
    for key, value in table.items():
        where = f"{path}.{key}"
        if key == "driver":
            driver = expect_str(where, value)
            values[key] = None if driver in ("none", "") else driver
        elif key == "bridges":
            try:
                values[key] = tuple(
                    normalize_pci_bus_id(expect_str(where, item))
                    for item in expect_list(where, value)
                )
            except ValueError as exc:
                raise FieldError(where, str(exc)) from None
        elif key == "memtest_faults":
            values[key] = _faults(where, value)
        elif key == "diag_faults":
            names = tuple(expect_str(where, item) for item in expect_list(where, value))
            unknown = [name for name in names if name not in DIAG_FAULTS]
            if unknown:
                known = ", ".join(DIAG_FAULTS)
                raise FieldError(where, f"unknown diag fault {unknown[0]!r} (known: {known})")
            values[key] = names
        elif key.endswith("_per_min"):
            values[key] = _rate(where, value)
        else:
            number = expect_int(where, value)
            if number < 0:
                raise FieldError(where, f"must not be negative, got {number}")
            values[key] = number
    return SimCardHost(**values)  # type: ignore[arg-type]


def _baseline(table: dict[str, object]) -> HostBaseline:
    try:
        return HostBaseline.model_validate(table)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(part) for part in err["loc"])
        raise FieldError(f"host.baseline.{where}".rstrip("."), err["msg"]) from None


def build_host_facts(table: Mapping[str, object], count: int) -> HostFactsScenario:
    """The host-truth keys of ``[host]`` (other keys are ``scenario_host``'s)."""
    values: dict[str, object] = {}
    for key in ("kernel_release", "module_srcversion", "registry_dwords", "module_path"):
        if key in table:
            values[key] = _optional_str(f"host.{key}", table[key])
    if values.get("kernel_release", SIM_KERNEL) is None:
        raise FieldError("host.kernel_release", "the running kernel is always known")
    running = str(values.get("kernel_release", SIM_KERNEL))
    values["default_boot_kernel"] = running
    if "default_boot_kernel" in table:
        values["default_boot_kernel"] = _optional_str(
            "host.default_boot_kernel", table["default_boot_kernel"]
        )
    if "cmdline" in table:
        values["cmdline"] = split_cmdline(expect_str("host.cmdline", table["cmdline"]))
    if "boot_args" in table:
        values["boot_args"] = split_cmdline(expect_str("host.boot_args", table["boot_args"]))
    p2p = table.get("p2p")
    if isinstance(p2p, dict):
        values["p2p_pairs"] = _pairs(p2p, count)
    elif p2p is not None:
        values["p2p"] = _status("host.p2p", p2p)
    cards: dict[int, SimCardHost] = {}
    for key, entry in expect_table("host.cards", table.get("cards", {})).items():
        path = f"host.cards.{key}"
        if not key.isdecimal():
            raise FieldError(path, "the key must be a card index, e.g. [host.cards.2]")
        cards[card_index(path, int(key), count)] = _card(path, expect_table(path, entry))
    values["cards"] = types.MappingProxyType(cards)
    values["baseline"] = _baseline(expect_table("host.baseline", table.get("baseline", {})))
    return HostFactsScenario(**values)  # type: ignore[arg-type]
