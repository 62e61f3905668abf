"""Why NVML cannot start, and what a person does about it: one table for both backends.

The NVML backend maps ``nvmlInit`` failures onto these kinds; the simulated backend
raises the same ones when a scenario says NVML is unavailable, so simulation and a real
rig after a kernel upgrade read the same in the log, in ``fleetctl status`` and in the
``nvml`` check.
"""

from __future__ import annotations

import enum

from hwcheck.backend import BackendUnavailable


class NvmlDown(enum.StrEnum):
    """The ways NVML can be unavailable (scenario ``[host] nvml_unavailable`` values)."""

    DRIVER_NOT_LOADED = "driver_not_loaded"
    LIB_RM_VERSION_MISMATCH = "lib_rm_version_mismatch"
    LIBRARY_NOT_FOUND = "library_not_found"
    NO_PERMISSION = "no_permission"
    NOT_ANSWERING = "not_answering"
    OTHER = "other"


_REASONS: dict[NvmlDown, tuple[str, str]] = {
    NvmlDown.DRIVER_NOT_LOADED: (
        "NVIDIA driver not loaded: NVML cannot reach the nvidia kernel module",
        "load the module (sudo modprobe nvidia); after a kernel or driver upgrade, reboot "
        "so the module is built and loaded for the running kernel (lsmod | grep nvidia)",
    ),
    NvmlDown.LIB_RM_VERSION_MISMATCH: (
        "NVIDIA driver/library version mismatch: the driver was upgraded without a reboot",
        "reboot the host to load the new kernel module (fleetctl stop first, then reboot)",
    ),
    NvmlDown.LIBRARY_NOT_FOUND: (
        "NVML library not found: libnvidia-ml.so.1 is missing",
        "install the NVIDIA driver (it ships libnvidia-ml.so.1) and nvidia-ml-py",
    ),
    NvmlDown.NO_PERMISSION: (
        "NVML cannot open the GPUs: permission denied",
        "run fleetd as root, or check the permissions of /dev/nvidia*",
    ),
    NvmlDown.NOT_ANSWERING: (
        "NVML is not answering: a GPU or the driver is wedged",
        "stop the engine (fleetctl stop) and reboot the host; cold power cycle if it recurs",
    ),
    NvmlDown.OTHER: (
        "NVML could not start",
        "check the driver: nvidia-smi, lsmod | grep nvidia and the kernel log (dmesg)",
    ),
}


def nvml_unavailable(kind: NvmlDown, detail: str = "") -> BackendUnavailable:
    """The ``BackendUnavailable`` for ``kind``: one-line reason (plus NVML's words), remedy."""
    reason, remedy = _REASONS[kind]
    message = f"{reason} ({detail})" if detail else reason
    return BackendUnavailable(message, remedy=remedy)
