"""The memory test on a card: libcuda through ctypes, the kernels of ``hwcheck/memtest/memtest.ptx``.

Only the standard library (ctypes): the child process (:mod:`hwcheck.memtest.child`),
``bench/memtest_bandwidth.py`` and ``bench/gpu_memtest_check.py`` run it with a bare
``python3`` and the driver's ``libcuda.so.1``: no CUDA toolkit, no torch. The driver
compiles the PTX text when the module loads (``cuModuleLoadDataEx``, its error log kept
for the message when it refuses).

:class:`CardMemory` is the card's ``MemoryTarget`` (:mod:`hwcheck.memtest.runner`): it
takes a context, allocates the memory to test in chunks (all free memory less
:data:`RESERVE_BYTES` by default), launches ``memtest_fill``/``memtest_verify`` over
them, and reads back only the counters, the first bad words and the block map.
"""

from __future__ import annotations

import ctypes
import importlib.resources
import os
import time
from array import array
from collections.abc import Iterator
from dataclasses import dataclass

from hwcheck.memtest.patterns import MASK32, WORD_BYTES, Sweep
from hwcheck.memtest.runner import Counts

LIBRARY_ENV = "CMPFLEET_LIBCUDA"
MIB = 1 << 20
BLOCK_BYTES = 2 * MIB  # the block map's unit (and the chunks' granularity)
CHUNK_BYTES = (
    512 * MIB
)  # one launch each; a march's ascending/descending order is kept between them
RESERVE_BYTES = 256 * MIB  # left free for the driver's own use
THREADS = 256
BLOCKS_PER_SM = 8
LIGHT_BLOCKS = 2  # the stress mode's light pattern: two thread blocks
DEVICE_RECORDS = 64  # bad words the kernels may record per pattern pass
RESULT_WORDS = 4 + 2 * DEVICE_RECORDS
CUDA_ERROR_OUT_OF_MEMORY = 2
CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
CU_JIT_ERROR_LOG_BUFFER = 5
CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
JIT_LOG_BYTES = 4096
FLAG_DESCENDING, FLAG_REWRITE = 1, 2

_u64, _u32, _size, _void_p = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_size_t, ctypes.c_void_p


class CudaFailed(Exception):
    """A driver call failed; ``name`` is CUDA's error name (with the JIT log for a module)."""

    def __init__(self, name: str, code: int) -> None:
        super().__init__(name)
        self.name = name
        self.code = code


def load_driver(path: str | None = None) -> ctypes.CDLL:
    """``libcuda.so.1`` (or ``$CMPFLEET_LIBCUDA``) with the signatures the test uses.

    Raises ``OSError`` when there is no library, ``AttributeError`` when it lacks a call.
    """
    lib = ctypes.CDLL(path or os.environ.get(LIBRARY_ENV, "libcuda.so.1"))
    lib.cuInit.argtypes = [ctypes.c_uint]
    lib.cuDeviceGet.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    lib.cuDeviceGetCount.argtypes = [ctypes.POINTER(ctypes.c_int)]
    lib.cuDeviceGetName.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    lib.cuDeviceGetAttribute.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int]
    lib.cuCtxCreate_v2.argtypes = [ctypes.POINTER(_void_p), ctypes.c_uint, ctypes.c_int]
    lib.cuCtxDestroy_v2.argtypes = [_void_p]
    lib.cuCtxSynchronize.argtypes = []
    lib.cuMemGetInfo_v2.argtypes = [ctypes.POINTER(_size), ctypes.POINTER(_size)]
    lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(_u64), _size]
    lib.cuMemFree_v2.argtypes = [_u64]
    lib.cuMemsetD32_v2.argtypes = [_u64, ctypes.c_uint, _size]
    lib.cuMemcpyDtoH_v2.argtypes = [_void_p, _u64, _size]
    lib.cuMemcpyDtoD_v2.argtypes = [_u64, _u64, _size]
    lib.cuModuleLoadDataEx.argtypes = [
        ctypes.POINTER(_void_p),
        ctypes.c_char_p,
        ctypes.c_uint,
        ctypes.POINTER(ctypes.c_int),
        ctypes.POINTER(_void_p),
    ]
    lib.cuModuleUnload.argtypes = [_void_p]
    lib.cuModuleGetFunction.argtypes = [ctypes.POINTER(_void_p), _void_p, ctypes.c_char_p]
    lib.cuLaunchKernel.argtypes = [
        _void_p,
        ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
        ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
        ctypes.c_uint,
        _void_p,
        ctypes.POINTER(_void_p),
        ctypes.POINTER(_void_p),
    ]  # fmt: skip
    lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    return lib


def error_name(lib: ctypes.CDLL, code: int) -> str:
    """CUDA's name for ``code`` (``CUDA_ERROR_OUT_OF_MEMORY``), or its number."""
    name = ctypes.c_char_p()
    if lib.cuGetErrorName(code, ctypes.byref(name)) == 0 and name.value:
        return name.value.decode("ascii", "replace")
    return f"CUDA error {code}"


def check(lib: ctypes.CDLL, code: int) -> None:
    """Raise :class:`CudaFailed` for a failed call."""
    if code:
        raise CudaFailed(error_name(lib, code), code)


def device_count(lib: ctypes.CDLL) -> int:
    """How many cards CUDA sees (``cuInit`` first; raises :class:`CudaFailed`)."""
    check(lib, lib.cuInit(0))
    count = ctypes.c_int()
    check(lib, lib.cuDeviceGetCount(ctypes.byref(count)))
    return count.value


def open_context(lib: ctypes.CDLL, ordinal: int) -> tuple[int, ctypes.c_void_p]:
    """``cuInit``, the card at ``ordinal`` and a context on it: (the device, the context).

    The memory test and the card diagnostics (``hwcheck.carddiag.cuda``) open a card alike.
    """
    device = ctypes.c_int()
    context = ctypes.c_void_p()
    check(lib, lib.cuInit(0))
    check(lib, lib.cuDeviceGet(ctypes.byref(device), ordinal))
    check(lib, lib.cuCtxCreate_v2(ctypes.byref(context), 0, device))
    return device.value, context


def ptx_text() -> bytes:
    """The shipped kernels (package data next to this module)."""
    return importlib.resources.files("hwcheck.memtest").joinpath("memtest.ptx").read_bytes()


@dataclass(frozen=True, slots=True)
class Chunk:
    """One allocation: its device pointer and the words it covers in the tested memory."""

    pointer: int
    first: int
    words: int


class CardMemory:
    """A card's memory under test (``MemoryTarget``); ``close()`` frees it and the context."""

    def __init__(
        self,
        lib: ctypes.CDLL,
        ordinal: int,
        want_bytes: int | None,
        chunk_bytes: int = CHUNK_BYTES,
        reserve_bytes: int = RESERVE_BYTES,
    ) -> None:
        self._lib = lib
        self._module = _void_p()
        self._chunks: list[Chunk] = []
        self._buffers: list[int] = []
        self._device, self._context = open_context(lib, ordinal)
        try:
            self.module_load_s = self._load_module()
            self._fill = self._function(b"memtest_fill")
            self._verify = self._function(b"memtest_verify")
            self._grid_blocks = max(self._attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT), 1)
            self._grid_blocks *= BLOCKS_PER_SM
            self._results = self._alloc(RESULT_WORDS * 8)
            self._block_words = BLOCK_BYTES // WORD_BYTES
            self._chunk_words = chunk_bytes // WORD_BYTES
            budget = self._budget(want_bytes, reserve_bytes)
            self._block_count = max(budget // BLOCK_BYTES, 1)  # the map first: it is small
            self._blocks = self._alloc(self._block_count * 4)
            self._allocate(budget, chunk_bytes)
        except BaseException:
            self.close()
            raise

    # -- setting up --------------------------------------------------------------------

    def _load_module(self) -> float:
        lib = self._lib
        log = ctypes.create_string_buffer(JIT_LOG_BYTES)
        options = (ctypes.c_int * 2)(CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
        values = (_void_p * 2)(ctypes.cast(log, _void_p), _void_p(JIT_LOG_BYTES))
        started_s = time.monotonic()
        code = lib.cuModuleLoadDataEx(
            ctypes.byref(self._module), ctypes.c_char_p(ptx_text()), 2, options, values
        )
        if code:
            jit = log.value.decode("utf-8", "replace").strip().splitlines()
            detail = f" ({jit[0]})" if jit else ""
            raise CudaFailed(f"{error_name(lib, code)}{detail}", code)
        return time.monotonic() - started_s

    def _function(self, name: bytes) -> ctypes.c_void_p:
        function = _void_p()
        check(self._lib, self._lib.cuModuleGetFunction(ctypes.byref(function), self._module, name))
        return function

    def _attribute(self, attribute: int) -> int:
        value = ctypes.c_int()
        check(
            self._lib, self._lib.cuDeviceGetAttribute(ctypes.byref(value), attribute, self._device)
        )
        return value.value

    def _alloc(self, size: int) -> int:
        pointer = _u64()
        check(self._lib, self._lib.cuMemAlloc_v2(ctypes.byref(pointer), size))
        self._buffers.append(pointer.value)
        return pointer.value

    def _budget(self, want_bytes: int | None, reserve_bytes: int) -> int:
        """The bytes to test: what was asked, at most the free memory less the reserve."""
        free, total = _size(), _size()
        check(self._lib, self._lib.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)))
        budget = max(free.value - reserve_bytes, 0)
        if want_bytes is not None:
            budget = min(budget, want_bytes)
        return budget - budget % BLOCK_BYTES

    def _allocate(self, budget: int, chunk_bytes: int) -> None:
        """Chunks of ``chunk_bytes`` (whole 2 MiB blocks) until the budget or the card is full.

        When an allocation fails for memory, smaller ones are tried down to one block.
        """
        first = 0
        size = chunk_bytes
        while budget >= BLOCK_BYTES:
            size = min(size, budget)
            pointer = _u64()
            code = self._lib.cuMemAlloc_v2(ctypes.byref(pointer), size)
            if code == CUDA_ERROR_OUT_OF_MEMORY:
                if size <= BLOCK_BYTES:
                    break  # test what could be had: tested_mib says how much
                size = max(size // 2 - (size // 2) % BLOCK_BYTES, BLOCK_BYTES)
                continue
            check(self._lib, code)
            self._buffers.append(pointer.value)
            self._chunks.append(Chunk(pointer.value, first, size // WORD_BYTES))
            first += size // WORD_BYTES
            budget -= size
        if not self._chunks:
            raise CudaFailed("no device memory could be allocated", CUDA_ERROR_OUT_OF_MEMORY)

    def name(self) -> str:
        """The card's name as CUDA reports it."""
        buffer = ctypes.create_string_buffer(256)
        check(self._lib, self._lib.cuDeviceGetName(buffer, 256, self._device))
        return buffer.value.decode("utf-8", "replace")

    def close(self) -> None:
        """Free everything and drop the context (idempotent)."""
        for pointer in self._buffers:
            self._lib.cuMemFree_v2(pointer)
        self._buffers.clear()
        self._chunks.clear()
        if self._module:
            self._lib.cuModuleUnload(self._module)
            self._module = _void_p()
        if self._context:
            self._lib.cuCtxDestroy_v2(self._context)
            self._context = _void_p()

    # -- the target --------------------------------------------------------------------

    @property
    def words(self) -> int:
        """32-bit words under test."""
        return sum(chunk.words for chunk in self._chunks)

    @property
    def block_words(self) -> int:
        """Words per 2 MiB block."""
        return self._block_words

    @property
    def chunk_words(self) -> int:
        """Words per chunk."""
        return self._chunk_words

    @property
    def chunks(self) -> tuple[Chunk, ...]:
        """The allocations under test."""
        return tuple(self._chunks)

    def _spans(self, first: int, count: int, descending: bool) -> Iterator[tuple[Chunk, int, int]]:
        """``(chunk, first word, words)`` of each chunk's part of the range, in sweep order."""
        stop = first + count
        chunks = reversed(self._chunks) if descending else iter(self._chunks)
        for chunk in chunks:
            lo, hi = max(first, chunk.first), min(stop, chunk.first + chunk.words)
            if lo < hi:
                yield chunk, lo, hi - lo

    def sweep(self, sweep: Sweep, first: int, count: int, light: bool = False) -> None:
        """Launch the sweep's kernel over each chunk's part of the range (queued, not waited)."""
        flags = (FLAG_DESCENDING if sweep.descending else 0) | (
            FLAG_REWRITE if sweep.rewrite else 0
        )
        for chunk, lo, words in self._spans(first, count, sweep.descending):
            pointer = chunk.pointer + (lo - chunk.first) * WORD_BYTES
            vectors = words // 4
            common: list[ctypes._SimpleCData[int]] = [
                _u64(pointer), _u64(vectors), _u64(lo),
                _u32(sweep.mode), _u32(sweep.arg & MASK32), _u32(sweep.xor & MASK32),
            ]  # fmt: skip
            if sweep.fill:
                self._launch(self._fill, vectors, light, common)
            else:
                extra: list[ctypes._SimpleCData[int]] = [
                    _u32(flags), _u64(self._results), _u64(self._blocks),
                    _u32(self._block_words.bit_length() - 1), _u32(DEVICE_RECORDS),
                ]  # fmt: skip
                self._launch(self._verify, vectors, light, common + extra)

    def _launch(
        self,
        function: ctypes.c_void_p,
        vectors: int,
        light: bool,
        args: list[ctypes._SimpleCData[int]],
    ) -> None:
        blocks = LIGHT_BLOCKS if light else self._grid_blocks
        blocks = max(min(blocks, -(-vectors // THREADS)), 1)
        params = (_void_p * len(args))(*[ctypes.cast(ctypes.byref(a), _void_p) for a in args])
        code = self._lib.cuLaunchKernel(
            function, blocks, 1, 1, THREADS, 1, 1, 0, None, params, None
        )
        check(self._lib, code)

    def plant(self, word: int, value: int) -> None:
        """Write ``value`` into one word with ``cuMemsetD32`` (the self-test's fault)."""
        for chunk, lo, _ in self._spans(word, 1, False):
            pointer = chunk.pointer + (lo - chunk.first) * WORD_BYTES
            check(self._lib, self._lib.cuMemsetD32_v2(pointer, value & MASK32, 1))

    def reset(self) -> None:
        """Zero the counters and the block map."""
        check(self._lib, self._lib.cuMemsetD32_v2(self._results, 0, RESULT_WORDS * 2))
        check(self._lib, self._lib.cuMemsetD32_v2(self._blocks, 0, self._block_count))

    def collect(self, max_records: int) -> Counts:
        """Wait for the card, then read the counters, the records and the block map back."""
        self.settle()
        results = (_u64 * RESULT_WORDS)()
        check(
            self._lib,
            self._lib.cuMemcpyDtoH_v2(
                ctypes.cast(results, _void_p), self._results, RESULT_WORDS * 8
            ),
        )
        blocks = (_u32 * self._block_count)()
        check(
            self._lib,
            self._lib.cuMemcpyDtoH_v2(
                ctypes.cast(blocks, _void_p), self._blocks, self._block_count * 4
            ),
        )
        claimed = min(int(results[3]), DEVICE_RECORDS)
        records = sorted(
            (
                int(results[4 + 2 * k]),
                int(results[5 + 2 * k]) & MASK32,
                int(results[5 + 2 * k]) >> 32,
            )
            for k in range(claimed)
        )[:max_records]
        counts = array("I", bytes(blocks))
        return Counts(
            bad_words=int(results[0]),
            bit_errors=int(results[1]),
            zero_bursts=int(results[2]),
            records=records,
            blocks={block: count for block, count in enumerate(counts) if count},
        )

    def settle(self) -> None:
        """Wait until every queued kernel finished (``cuCtxSynchronize``)."""
        check(self._lib, self._lib.cuCtxSynchronize())

    def idle(self, seconds: float) -> None:
        """Let the card go idle: nothing queued, then ``seconds`` without traffic."""
        self.settle()
        time.sleep(seconds)

    def clock(self) -> float:
        """The monotonic clock."""
        return time.monotonic()

    # -- the bench ---------------------------------------------------------------------

    def read_words(self, word: int, count: int) -> array[int]:
        """``count`` words from ``word`` (inside one chunk) copied back to the host."""
        for chunk, lo, words in self._spans(word, count, False):
            if words != count:
                break
            out = (_u32 * count)()
            pointer = chunk.pointer + (lo - chunk.first) * WORD_BYTES
            check(
                self._lib, self._lib.cuMemcpyDtoH_v2(ctypes.cast(out, _void_p), pointer, count * 4)
            )
            return array("I", bytes(out))
        raise ValueError(f"words {word}..{word + count - 1} are not inside one chunk")

    def copy_gib_per_s(self, repeats: int = 3) -> float:
        """The card's own ``cuMemcpyDtoD`` rate over the tested memory, bytes read and written.

        Each pass copies the first half of the tested memory onto the second half and
        back: the whole tested size is copied, as each of the test's sweeps covers it.
        """
        half = self.words // 2 // self._block_words * self._block_words
        if half == 0:
            raise ValueError("the copy needs at least two blocks")
        pieces: list[tuple[int, int, int]] = []  # (first half's pointer, second's, bytes)
        done = 0
        while done < half:
            low, low_first, low_words = next(self._spans(done, half - done, False))
            high, high_first, high_words = next(self._spans(half + done, half - done, False))
            words = min(low_words, high_words)
            pieces.append(
                (
                    low.pointer + (low_first - low.first) * WORD_BYTES,
                    high.pointer + (high_first - high.first) * WORD_BYTES,
                    words * WORD_BYTES,
                )
            )
            done += words
        self.settle()
        moved = 0
        started_s = time.monotonic()
        for _ in range(repeats):
            for low_pointer, high_pointer, size in pieces:
                check(self._lib, self._lib.cuMemcpyDtoD_v2(high_pointer, low_pointer, size))
                check(self._lib, self._lib.cuMemcpyDtoD_v2(low_pointer, high_pointer, size))
                moved += 4 * size  # two copies, each reads and writes ``size``
        self.settle()
        elapsed_s = time.monotonic() - started_s
        return moved / (1 << 30) / elapsed_s if elapsed_s > 0 else 0.0
