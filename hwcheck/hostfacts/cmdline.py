"""Kernel command lines: split them, and pick the arguments a CMP rig depends on.

The kernel splits ``/proc/cmdline`` on spaces outside double quotes (``foo="a b"`` is one
argument); a bootloader entry's arguments are written the same way. An argument is kept
as its exact text, so ``pci=realloc`` and ``pci=realloc,hpmemsize=64G`` are different
arguments: the second is what a 64 GB BAR1 behind a PLX switch needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

# Keys whose arguments the driver and the PCI setup depend on (the 64 GB BAR1 behind
# PLX switches, IOMMU passthrough for P2P, the nouveau blacklist, nvidia module options).
REQUIRED_KEYS = frozenset(
    {
        "pci",
        "iommu",
        "intel_iommu",
        "amd_iommu",
        "iomem",
        "rd.driver.blacklist",
        "modprobe.blacklist",
    }
)
REQUIRED_PREFIXES = ("nvidia.", "nvidia-", "nvidia_", "nouveau.")
# Written by the bootloader, never part of what a rig "needs".
_BOOTLOADER_KEYS = frozenset({"BOOT_IMAGE", "initrd"})


def split_cmdline(text: str) -> tuple[str, ...]:
    """The arguments of a kernel command line, split as the kernel splits them."""
    args: list[str] = []
    current: list[str] = []
    quoted = False
    for char in text.strip():
        if char == '"':
            quoted = not quoted
            current.append(char)
        elif char.isspace() and not quoted:
            if current:
                args.append("".join(current))
                current = []
        else:
            current.append(char)
    if current:
        args.append("".join(current))
    return tuple(args)


def arg_key(arg: str) -> str:
    """``pci`` for ``pci=realloc``; the whole argument for a flag such as ``quiet``."""
    return arg.split("=", 1)[0]


def is_required(arg: str) -> bool:
    """True for an argument the driver or PCI setup depends on (see ``REQUIRED_KEYS``)."""
    key = arg_key(arg)
    return key in REQUIRED_KEYS or key.startswith(REQUIRED_PREFIXES)


def required_args(cmdline: Iterable[str]) -> tuple[str, ...]:
    """The arguments of ``cmdline`` a rig depends on, in their order, each once."""
    seen: list[str] = []
    for arg in cmdline:
        if is_required(arg) and arg not in seen:
            seen.append(arg)
    return tuple(seen)


def without_bootloader_args(args: Iterable[str]) -> tuple[str, ...]:
    """``args`` without ``BOOT_IMAGE=...`` and ``initrd=...`` (set by the bootloader)."""
    return tuple(arg for arg in args if arg_key(arg) not in _BOOTLOADER_KEYS)


def missing_args(required: Sequence[str], present: Iterable[str]) -> list[tuple[str, str | None]]:
    """Each required argument absent from ``present``, with what stands there instead.

    ``("pci=realloc", "pci=nocrs")``: the key is set, to something else;
    ``("iommu=pt", None)``: not set at all.
    """
    present_args = list(present)
    missing: list[tuple[str, str | None]] = []
    for arg in required:
        if arg in present_args:
            continue
        key = arg_key(arg)
        instead = next((p for p in present_args if arg_key(p) == key and "=" in arg), None)
        missing.append((arg, instead))
    return missing
