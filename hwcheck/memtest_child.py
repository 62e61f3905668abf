"""The memory test's child process: pattern write/read over one card's memory, via libcuda.

Run as ``python -m hwcheck.memtest_child ORDINAL MIB`` by :mod:`hwcheck.memtest`, never
imported by the daemon: a card with bad HBM can hang the driver, and only a separate
process can be abandoned. These cards have no ECC, so nothing else ever says a bit flipped.

Through the CUDA driver API (ctypes, as the CUDA probe: no torch, no toolkit) it takes a
context on the card, allocates up to MIB MiB in 64 MiB blocks (less when the card has less
free), then for each pattern fills every block on the card (``cuMemsetD32``) and only then
reads every block back (``cuMemcpyDtoH``), so a bit that does not hold between the write
and the read is caught too. Patterns: alternating bits both ways (``0xaaaaaaaa``,
``0x55555555``) and a value unique to each block (a block that aliases another reads the
other's value). A mismatch is counted in flipped bits, with the byte offset of the first
bad word and the pattern that found it. It prints one JSON line, ``CardMemtest.as_dict()``
form, or ``{"unavailable": why}`` when there is no driver library. ``CUDA_DEVICE_ORDER`` is
set to ``PCI_BUS_ID`` by the parent so CUDA's ordinal is NVML's index.
"""

from __future__ import annotations

import ctypes
import json
import os
import struct
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

_LIBRARY_ENV = "CMPFLEET_LIBCUDA"
MIB = 1 << 20
BLOCK_BYTES = 64 * MIB
COMPARE_BYTES = 64 * 1024  # the unit a mismatching block is searched in
RESERVE_BYTES = 256 * MIB  # left free for the driver's own use
CUDA_ERROR_OUT_OF_MEMORY = 2
UNIQUE = "unique per block"
PATTERNS = ("0xaaaaaaaa", "0x55555555", UNIQUE)

_u64 = ctypes.c_uint64
_size = ctypes.c_size_t


class CudaFailed(Exception):
    """A driver call failed; ``name`` is CUDA's error name."""

    def __init__(self, name: str, code: int) -> None:
        super().__init__(name)
        self.name = name
        self.code = code


def _load(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)
    lib.cuInit.argtypes = [ctypes.c_uint]
    lib.cuDeviceGet.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    lib.cuCtxCreate_v2.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint, ctypes.c_int]
    lib.cuCtxDestroy_v2.argtypes = [ctypes.c_void_p]
    lib.cuCtxSynchronize.argtypes = []
    lib.cuMemGetInfo_v2.argtypes = [ctypes.POINTER(_size), ctypes.POINTER(_size)]
    lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(_u64), _size]
    lib.cuMemFree_v2.argtypes = [_u64]
    lib.cuMemsetD32_v2.argtypes = [_u64, ctypes.c_uint, _size]
    lib.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, _u64, _size]
    lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    return lib


def _error_name(lib: ctypes.CDLL, code: int) -> str:
    name = ctypes.c_char_p()
    if lib.cuGetErrorName(code, ctypes.byref(name)) == 0 and name.value:
        return name.value.decode("ascii", "replace")
    return f"CUDA error {code}"


def _call(lib: ctypes.CDLL, code: int) -> None:
    if code:
        raise CudaFailed(_error_name(lib, code), code)


@dataclass
class Found:
    """What the read-backs found so far."""

    bit_errors: int = 0
    first_offset: int | None = None
    pattern: str | None = None


def pattern_value(pattern: str, block: int) -> int:
    """The 32-bit word ``pattern`` writes into block number ``block``."""
    if pattern == UNIQUE:
        return (0x9E3779B9 * (block + 1)) & 0xFFFFFFFF
    return int(pattern, 16)


def compare(
    data: bytes | bytearray, expected: bytes, base: int, pattern: str, found: Found
) -> None:
    """Count the flipped bits of ``data`` against ``expected`` (fast when they match)."""
    if data == expected:
        return
    for start in range(0, len(data), COMPARE_BYTES):
        got, want = data[start : start + COMPARE_BYTES], expected[start : start + COMPARE_BYTES]
        if got == want:
            continue
        flipped = int.from_bytes(got, "little") ^ int.from_bytes(want, "little")
        found.bit_errors += flipped.bit_count()
        if found.first_offset is None:
            low_bit = (flipped & -flipped).bit_length() - 1
            found.first_offset = base + start + (low_bit // 32) * 4
            found.pattern = pattern


def _blocks(lib: ctypes.CDLL, want_bytes: int) -> Iterator[tuple[int, int]]:
    """Allocate ``(pointer, size)`` blocks until ``want_bytes`` or the card's free memory."""
    free, total = _size(), _size()
    _call(lib, lib.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)))
    budget = min(want_bytes, max(free.value - RESERVE_BYTES, 0))
    while budget > 0:
        size = min(BLOCK_BYTES, budget)
        size -= size % 4
        pointer = _u64()
        code = lib.cuMemAlloc_v2(ctypes.byref(pointer), size)
        if code == CUDA_ERROR_OUT_OF_MEMORY:
            return  # test what could be had: tested_mib says how much
        _call(lib, code)
        yield pointer.value, size
        budget -= size


def run_test(lib: ctypes.CDLL, ordinal: int, mib: int) -> dict[str, object]:
    """Test ``mib`` MiB of card ``ordinal``; the result as ``CardMemtest.as_dict()``."""
    started_s = time.monotonic()
    result: dict[str, object] = {"card": ordinal, "outcome": "error", "tested_mib": 0}
    device, context = ctypes.c_int(), ctypes.c_void_p()
    blocks: list[tuple[int, int]] = []
    try:
        _call(lib, lib.cuInit(0))
        _call(lib, lib.cuDeviceGet(ctypes.byref(device), ordinal))
        _call(lib, lib.cuCtxCreate_v2(ctypes.byref(context), 0, device))
        try:
            blocks.extend(_blocks(lib, mib * MIB))
            if not blocks:
                result["error"] = "no device memory could be allocated"
                return result
            found = _patterns(lib, blocks)
        finally:
            for pointer, _ in blocks:
                lib.cuMemFree_v2(pointer)
            lib.cuCtxDestroy_v2(context)
    except CudaFailed as exc:
        result["error"] = exc.name
        result["duration_s"] = round(time.monotonic() - started_s, 3)
        return result
    result.update(
        outcome="failed" if found.bit_errors else "passed",
        tested_mib=sum(size for _, size in blocks) // MIB,
        bit_errors=found.bit_errors,
        first_error_offset=found.first_offset,
        pattern=found.pattern,
        duration_s=round(time.monotonic() - started_s, 3),
    )
    return result


def _patterns(lib: ctypes.CDLL, blocks: list[tuple[int, int]]) -> Found:
    """Every pattern: fill all blocks, then read all back and compare."""
    found = Found()
    host = bytearray(BLOCK_BYTES)
    view = (ctypes.c_char * BLOCK_BYTES).from_buffer(host)
    for pattern in PATTERNS:
        for number, (pointer, size) in enumerate(blocks):
            _call(lib, lib.cuMemsetD32_v2(pointer, pattern_value(pattern, number), size // 4))
        _call(lib, lib.cuCtxSynchronize())
        base = 0
        expected = b""
        for number, (pointer, size) in enumerate(blocks):
            _call(lib, lib.cuMemcpyDtoH_v2(view, pointer, size))
            word = struct.pack("<I", pattern_value(pattern, number))
            if len(expected) != size or expected[:4] != word:  # built once per value and size
                expected = word * (size // 4)
            compare(host if size == BLOCK_BYTES else host[:size], expected, base, pattern, found)
            base += size
    del view  # release the export before the bytearray goes
    return found


def main(argv: list[str]) -> int:
    """Test the card named in ``argv`` (``ORDINAL MIB``) and print one JSON line."""
    ordinal, mib = int(argv[0]), int(argv[1])
    try:
        lib = _load(os.environ.get(_LIBRARY_ENV, "libcuda.so.1"))
    except (OSError, AttributeError) as exc:
        print(json.dumps({"unavailable": f"no CUDA driver library: {exc}"}), flush=True)
        return 0
    print(json.dumps(run_test(lib, ordinal, mib)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
