"""The CUDA probe's child process: per card, init, context, a small allocation, teardown.

Run as ``python -m hwcheck.cuda_probe_child INDEX...`` by :mod:`hwcheck.cuda_probe`, never
imported by the daemon: a wedged card can hang the driver call forever, and only a separate
process can be abandoned. It loads ``libcuda.so.1`` through ctypes (no torch, no CUDA
toolkit: a second or two on a healthy rig, against the ~40 s torch container peers use),
and prints one JSON object per card: ``{"card": N, "outcome": "ok"|"failed", "error": ...}``,
or a single ``{"unavailable": why}`` when there is no driver library. ``CUDA_DEVICE_ORDER``
is set to ``PCI_BUS_ID`` by the parent so CUDA's ordinals are NVML's indices.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

_PROBE_BYTES = 1 << 20
_LIBRARY_ENV = "CMPFLEET_LIBCUDA"


def _error_name(lib: ctypes.CDLL, code: int) -> str:
    name = ctypes.c_char_p()
    if lib.cuGetErrorName(code, ctypes.byref(name)) == 0 and name.value:
        return name.value.decode("ascii", "replace")
    return f"CUDA error {code}"


def _probe_card(lib: ctypes.CDLL, ordinal: int) -> str | None:
    """None when the card works, else the CUDA error name of the first failing step."""
    device = ctypes.c_int()
    context = ctypes.c_void_p()
    pointer = ctypes.c_uint64()
    code = lib.cuDeviceGet(ctypes.byref(device), ordinal)
    if code:
        return _error_name(lib, code)
    code = lib.cuCtxCreate_v2(ctypes.byref(context), 0, device)
    if code:
        return _error_name(lib, code)
    try:
        code = lib.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(_PROBE_BYTES))
        if code:
            return _error_name(lib, code)
        code = lib.cuMemFree_v2(pointer)
        return _error_name(lib, code) if code else None
    finally:
        lib.cuCtxDestroy_v2(context)


def main(argv: list[str]) -> int:
    """Probe the cards named in ``argv`` (NVML indices) and print one JSON line each."""
    cards = [int(arg) for arg in argv]
    try:
        lib = ctypes.CDLL(os.environ.get(_LIBRARY_ENV, "libcuda.so.1"))
    except OSError as exc:
        print(json.dumps({"unavailable": f"no CUDA driver library: {exc}"}), flush=True)
        return 0
    code = lib.cuInit(0)
    init_error = _error_name(lib, code) if code else None
    for card in cards:
        error = init_error if init_error else _probe_card(lib, card)
        outcome = "failed" if error else "ok"
        print(json.dumps({"card": card, "outcome": outcome, "error": error}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
