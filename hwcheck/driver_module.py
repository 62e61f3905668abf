"""The loaded nvidia kernel module's version, read from ``/proc`` or ``/sys``.

Why: every card reports the one system driver, so comparing cards never finds a
half-done upgrade. What can really differ is the user-space NVML library against the
kernel module that is loaded (an upgrade installs the new library at once, the new
module only at the next boot). ``proc_root``/``sys_root`` are parameters so tests
point the reader at recorded trees.
"""

from __future__ import annotations

import re
from pathlib import Path

from hwcheck.textfile import read_text

# "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build ..."
# "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 ..."
_NVRM_VERSION = re.compile(r"Kernel Module\b.*?\s(\d+\.\d+(?:\.\d+)?)(?:\s|$)")
_PLAIN_VERSION = re.compile(r"^\d+\.\d+(?:\.\d+)?$")


def parse_proc_version(text: str) -> str | None:
    """The version on the ``NVRM version:`` line of ``/proc/driver/nvidia/version``."""
    for line in text.splitlines():
        if line.startswith("NVRM version:"):
            found = _NVRM_VERSION.search(line)
            return found.group(1) if found else None
    return None


def read_kernel_module_version(
    proc_root: Path = Path("/proc"), sys_root: Path = Path("/sys")
) -> str | None:
    """The loaded module's version; None when no nvidia module is loaded (or unreadable)."""
    text = read_text(proc_root / "driver" / "nvidia" / "version")
    if text is not None:
        version = parse_proc_version(text)
        if version is not None:
            return version
    plain = read_text(sys_root / "module" / "nvidia" / "version")
    if plain is not None and _PLAIN_VERSION.match(plain.strip()):
        return plain.strip()
    return None


def library_driver_version(nvml_version: str | None) -> str | None:
    """The driver version of the NVML library: ``13.580.95.05`` -> ``580.95.05``.

    NVML's own version is the CUDA major in front of the driver version it was built with.
    """
    if not nvml_version:
        return None
    _, _, rest = nvml_version.partition(".")
    return rest if rest.count(".") >= 1 else None
