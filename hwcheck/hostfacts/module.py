"""The nvidia kernel module: which file modprobe loads, which build is loaded, its options.

A rig runs a patched driver module installed under a depmod override; a stock build of
the same version can win module resolution after an unrelated install, and "reports
success" on P2P while moving zero bytes. Three readers, each over ``root``:

- ``module_path``: the file ``modules.dep`` of the running kernel resolves ``nvidia`` to
  (the one the next ``modprobe nvidia`` or boot loads: depmod's overrides are applied
  when ``modules.dep`` is written);
- ``module_srcversion``: ``/sys/module/nvidia/srcversion``, the loaded build's checksum
  (same version string, different source: a different ``srcversion``);
- ``registry_dwords``: ``NVreg_RegistryDwords`` from ``/proc/driver/nvidia/params``.
"""

from __future__ import annotations

import re
from pathlib import Path

from hwcheck.textfile import read_text

MODULE_NAME = "nvidia"
_MODULE_FILE = re.compile(rf"^{MODULE_NAME}\.ko(\.(xz|zst|gz))?$")
_RELEASE_DIR = re.compile(r"^(/usr)?/lib/modules/[^/]+/")


def same_module_file(first: str, second: str) -> bool:
    """True when two module paths name the same file of their kernels' module trees.

    ``/lib/modules/6.8.12-a/updates/dkms/nvidia.ko`` and ``.../6.8.12-b/updates/dkms/...``
    are the same choice (dkms rebuilds the patched module for each kernel: that kernel
    change is ``host_kernel``'s to judge); ``kernel/drivers/video/nvidia.ko`` is the stock
    build winning resolution.
    """
    return _RELEASE_DIR.sub("", first) == _RELEASE_DIR.sub("", second)


def parse_modules_dep(text: str) -> str | None:
    """The path (relative to the kernel's module dir) that ``modules.dep`` gives ``nvidia``."""
    for line in text.splitlines():
        path, sep, _ = line.partition(":")
        if sep and _MODULE_FILE.match(path.rsplit("/", 1)[-1]):
            return path.strip()
    return None


def module_path(root: Path, kernel_release: str | None) -> str | None:
    """The absolute path of the nvidia module file for ``kernel_release`` (None: not found)."""
    if not kernel_release:
        return None
    for base in ("lib/modules", "usr/lib/modules"):
        modules_dir = root / base / kernel_release
        text = read_text(modules_dir / "modules.dep")
        if text is None:
            continue
        relative = parse_modules_dep(text)
        if relative is None:
            return None
        return relative if relative.startswith("/") else f"/{base}/{kernel_release}/{relative}"
    return None


def module_srcversion(root: Path) -> str | None:
    """The loaded nvidia module's ``srcversion`` (None: not loaded or not readable)."""
    text = read_text(root / "sys" / "module" / MODULE_NAME / "srcversion")
    if text is None:
        return None
    return text.strip() or None


def parse_registry_dwords(params_text: str) -> str | None:
    """``RegistryDwords`` from ``/proc/driver/nvidia/params`` (``""`` when set to nothing)."""
    for line in params_text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "RegistryDwords":
            return value.strip().strip('"')
    return None


def registry_dwords(root: Path) -> str | None:
    """The loaded driver's ``NVreg_RegistryDwords`` (None: no driver, or not listed)."""
    text = read_text(root / "proc" / "driver" / MODULE_NAME / "params")
    return None if text is None else parse_registry_dwords(text)
