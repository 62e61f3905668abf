"""The card diagnostics on a card: libcuda through ctypes, the kernels of ``compute.ptx``.

Standard library only, like the memory test (``hwcheck.memtest.cuda``, whose driver
loading and error names this reuses): the child process runs with a bare ``python3`` and
the driver's ``libcuda.so.1``, no toolkit. :class:`CardDevice` is both targets: the link
(pinned host buffers, ``cuMemcpyHtoD``/``DtoH`` timed around a synchronise, a known
pattern compared after the round trip) and the compute units (every kernel launched with
``BLOCKS_PER_SM`` blocks per SM, the words and SM ids read back).
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.resources
import time

from hwcheck.carddiag.compute import Kernel, Launch
from hwcheck.memtest.cuda import (
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
    CudaFailed,
    check,
    error_name,
    open_context,
)

THREADS = 256
BLOCKS_PER_SM = 2
CU_MEMHOSTALLOC_PORTABLE = 1
PATTERN_BYTES = 64 * 1024

_u64, _size, _void_p = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p


def ptx_text() -> bytes:
    """The shipped diagnostic kernels (package data next to this module)."""
    return importlib.resources.files("hwcheck.carddiag").joinpath("compute.ptx").read_bytes()


def add_signatures(lib: ctypes.CDLL) -> ctypes.CDLL:
    """The calls the diagnostics use beyond the memory test's (pinned memory, HtoD)."""
    lib.cuMemHostAlloc.argtypes = [ctypes.POINTER(_void_p), _size, ctypes.c_uint]
    lib.cuMemFreeHost.argtypes = [_void_p]
    lib.cuMemcpyHtoD_v2.argtypes = [_u64, _void_p, _size]
    return lib


class CardDevice:
    """One card under diagnosis: a context, the module, and buffers freed by ``close()``."""

    def __init__(self, lib: ctypes.CDLL, ordinal: int) -> None:
        self._lib = lib
        self._module = _void_p()
        self._device_buffers: list[int] = []
        self._host_buffers: list[int] = []
        self._device, self._context = open_context(lib, ordinal)
        try:
            value = ctypes.c_int()
            attribute = CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
            check(lib, lib.cuDeviceGetAttribute(ctypes.byref(value), attribute, self._device))
            self.sm_count = max(value.value, 1)
            self._load_module()
        except BaseException:
            self.close()
            raise

    def _load_module(self) -> None:
        code = self._lib.cuModuleLoadDataEx(
            ctypes.byref(self._module), ctypes.c_char_p(ptx_text()), 0, None, None
        )
        if code:
            raise CudaFailed(error_name(self._lib, code), code)

    def _device_alloc(self, nbytes: int) -> int:
        pointer = _u64()
        check(self._lib, self._lib.cuMemAlloc_v2(ctypes.byref(pointer), nbytes))
        self._device_buffers.append(pointer.value)
        return pointer.value

    def _host_alloc(self, nbytes: int) -> int:
        pointer = _void_p()
        flags = CU_MEMHOSTALLOC_PORTABLE
        check(self._lib, self._lib.cuMemHostAlloc(ctypes.byref(pointer), nbytes, flags))
        if pointer.value is None:
            raise CudaFailed("cuMemHostAlloc returned no buffer", 1)
        self._host_buffers.append(pointer.value)
        return pointer.value

    # -- the link ----------------------------------------------------------------------

    def _pair(self, nbytes: int) -> tuple[int, int]:
        """A pinned host buffer and a device buffer of ``nbytes`` (made once per size)."""
        key = f"_pair_{nbytes}"
        found: tuple[int, int] | None = getattr(self, key, None)
        if found is None:
            found = (self._host_alloc(nbytes), self._device_alloc(nbytes))
            setattr(self, key, found)
        return found

    def copy_s(self, nbytes: int, to_device: bool) -> float:
        """Seconds one pinned copy takes (synchronised before and after)."""
        host, device = self._pair(nbytes)
        check(self._lib, self._lib.cuCtxSynchronize())
        started = time.perf_counter()
        if to_device:
            check(self._lib, self._lib.cuMemcpyHtoD_v2(device, _void_p(host), nbytes))
        else:
            check(self._lib, self._lib.cuMemcpyDtoH_v2(_void_p(host), device, nbytes))
        check(self._lib, self._lib.cuCtxSynchronize())
        return time.perf_counter() - started

    def round_trip_mismatches(self, nbytes: int, seed: int) -> int:
        """Bytes that differ after a known pattern goes to the card and back.

        The pattern is a 64 KiB block of SHA-256 output repeated: cheap to make at any size,
        and every byte value and bit position crosses the link.
        """
        host, device = self._pair(nbytes)
        block = b"".join(
            hashlib.sha256(f"{seed}:{i}".encode()).digest() for i in range(PATTERN_BYTES // 32)
        )
        sent = (block * (nbytes // len(block) + 1))[:nbytes]
        ctypes.memmove(host, sent, nbytes)
        check(self._lib, self._lib.cuMemcpyHtoD_v2(device, _void_p(host), nbytes))
        ctypes.memset(host, 0, nbytes)
        check(self._lib, self._lib.cuMemcpyDtoH_v2(_void_p(host), device, nbytes))
        back = ctypes.string_at(host, nbytes)
        if back == sent:
            return 0
        wrong = 0
        for start in range(0, nbytes, PATTERN_BYTES):  # only the blocks that differ, byte by byte
            got, want = back[start : start + PATTERN_BYTES], sent[start : start + PATTERN_BYTES]
            if got != want:
                wrong += sum(1 for x, y in zip(got, want, strict=True) if x != y)
        return wrong

    # -- the compute units -------------------------------------------------------------

    def launch(self, kernel: Kernel, seed: int) -> Launch:
        """``kernel`` over ``BLOCKS_PER_SM`` blocks per SM; the words and each block's SM."""
        blocks = self.sm_count * BLOCKS_PER_SM
        words = blocks * THREADS * kernel.words_per_thread
        out = self._device_alloc(words * 4)
        smids = self._device_alloc(blocks * 4)
        function = _void_p()
        check(
            self._lib,
            self._lib.cuModuleGetFunction(
                ctypes.byref(function), self._module, kernel.name.encode()
            ),
        )
        params = (_u64(out), _u64(smids), ctypes.c_uint32(kernel.iters), ctypes.c_uint32(seed))
        pointers = (_void_p * len(params))(*(ctypes.cast(ctypes.byref(p), _void_p) for p in params))
        check(
            self._lib,
            self._lib.cuLaunchKernel(
                function, blocks, 1, 1, THREADS, 1, 1, 0, None, pointers, None
            ),
        )
        check(self._lib, self._lib.cuCtxSynchronize())
        got_words = (ctypes.c_uint32 * words)()
        got_sms = (ctypes.c_uint32 * blocks)()
        check(self._lib, self._lib.cuMemcpyDtoH_v2(got_words, out, words * 4))
        check(self._lib, self._lib.cuMemcpyDtoH_v2(got_sms, smids, blocks * 4))
        for pointer in (out, smids):
            self._lib.cuMemFree_v2(pointer)
            self._device_buffers.remove(pointer)
        return Launch(list(got_sms), list(got_words), THREADS)

    def temperatures(self) -> tuple[float | None, float | None]:
        """Not read in the child: the parent watches them through NVML."""
        return None, None

    def close(self) -> None:
        """Free everything and drop the context (idempotent)."""
        for pointer in self._device_buffers:
            self._lib.cuMemFree_v2(pointer)
        self._device_buffers.clear()
        for host in self._host_buffers:
            self._lib.cuMemFreeHost(_void_p(host))
        self._host_buffers.clear()
        if self._module:
            self._lib.cuModuleUnload(self._module)
            self._module = _void_p()
        if self._context:
            self._lib.cuCtxDestroy_v2(self._context)
            self._context = _void_p()
