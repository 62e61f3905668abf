"""The compute units checked bit for bit: what each kernel must return, and the verdict.

The kernels (``compute.ptx``) run an operation many times per thread on inputs whose exact
result is known here, on every SM at once; the host compares every output bit for bit and
groups the wrong ones by the SM that produced them (``%smid``). A used mining card with a
marginal SM returns a wrong FMA silently (dev-boz/cmp170hx-testsuite compares SM output
with a golden GA100 for this reason; docs/domain.md): no error, no Xid, just a wrong token
now and then. The inputs keep every result exact (integers in f32, constant tensor-core
fragments), so the expected value does not depend on rounding modes or fragment layouts.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from hwcheck.carddiag.model import CardDiag, DiagKind, DiagOutcome, DiagPlan
from hwcheck.thermal_stop import StopAsked

MASK32 = 0xFFFFFFFF
LCG_MUL, LCG_ADD = 1664525, 1013904223
FMA_ITERS = 4096  # per launch: exact while x0 + iters * 48 < 2**24
MMA_ITERS = 4096  # -54 (f16) or -672 (s8) per round: exact in f32 / int32
MAD_ITERS = 4096


@dataclass(frozen=True)
class Kernel:
    """One kernel: its PTX name, words written per thread, and what it checks."""

    name: str
    label: str
    words_per_thread: int
    iters: int


KERNELS = (
    Kernel("diag_mad_u32", "integer multiply-add", 1, MAD_ITERS),
    Kernel("diag_fma_f32", "FP32 FMA", 1, FMA_ITERS),
    Kernel("diag_mma_f16", "FP16 tensor-core MMA", 4, MMA_ITERS),
    Kernel("diag_mma_s8", "INT8 tensor-core MMA", 4, MMA_ITERS),
)


def _f32_bits(value: float) -> int:
    return int(struct.unpack("<I", struct.pack("<f", value))[0])


def expected_word(kernel: Kernel, thread: int, seed: int) -> int:
    """The exact 32-bit word thread ``thread`` must write (the same for each of its words)."""
    if kernel.name == "diag_mad_u32":
        x = (seed ^ thread) & MASK32
        for _ in range(kernel.iters):
            x = (x * LCG_MUL + LCG_ADD) & MASK32
        return x
    if kernel.name == "diag_fma_f32":
        a = (thread & 15) + 1
        return _f32_bits(float((thread & 255) + kernel.iters * a * 3))
    if kernel.name == "diag_mma_f16":
        return _f32_bits(-54.0 * kernel.iters)
    if kernel.name == "diag_mma_s8":
        return (-672 * kernel.iters) & MASK32
    raise ValueError(f"unknown kernel {kernel.name}")


def lcg_power(iters: int) -> tuple[int, int]:
    """(multiplier, increment) of ``iters`` LCG steps at once: x -> m * x + c (mod 2**32)."""
    m, c = 1, 0
    step_m, step_c = LCG_MUL, LCG_ADD
    while iters:
        if iters & 1:
            m, c = (m * step_m) & MASK32, (c * step_m + step_c) & MASK32
        step_m, step_c = (step_m * step_m) & MASK32, (step_c * step_m + step_c) & MASK32
        iters >>= 1
    return m, c


def expected_words(kernel: Kernel, threads: int, seed: int) -> list[int]:
    """Every thread's expected word (fast: the LCG's steps composed once)."""
    if kernel.name == "diag_mad_u32":
        m, c = lcg_power(kernel.iters)
        return [((((seed ^ t) & MASK32) * m) + c) & MASK32 for t in range(threads)]
    if kernel.name == "diag_fma_f32":
        return [
            _f32_bits(float((t & 255) + kernel.iters * ((t & 15) + 1) * 3)) for t in range(threads)
        ]
    word = expected_word(kernel, 0, seed)
    return [word] * threads


@dataclass(frozen=True)
class Launch:
    """What one launch returned: each block's SM, each thread's words (flat)."""

    block_sms: Sequence[int]
    words: Sequence[int]
    threads_per_block: int


class ComputeTarget(Protocol):
    """A card that runs the kernels (libcuda through ctypes, or the simulated card)."""

    sm_count: int

    def launch(self, kernel: Kernel, seed: int) -> Launch:
        """Run ``kernel`` over every SM once; what it wrote."""
        ...

    def temperatures(self) -> tuple[float | None, float | None]:
        """(core, HBM) now, for the result's figures (None: not read here)."""
        ...


@dataclass
class KernelTally:
    """Wrong results of one kernel, per SM."""

    launches: int = 0
    words: int = 0
    wrong: int = 0
    per_sm: dict[int, int] | None = None
    first: tuple[int, int, int] | None = None  # (sm, expected, got)


def judge_launch(kernel: Kernel, launch: Launch, seed: int, tally: KernelTally) -> None:
    """Compare every word of ``launch`` with its exact value; count the wrong ones per SM."""
    per_thread = kernel.words_per_thread
    threads = len(launch.words) // per_thread
    expected = expected_words(kernel, threads, seed)
    tally.launches += 1
    tally.words += len(launch.words)
    per_sm = tally.per_sm if tally.per_sm is not None else {}
    for index, got in enumerate(launch.words):
        thread = index // per_thread
        want = expected[thread]
        if got == want:
            continue
        sm = launch.block_sms[thread // launch.threads_per_block]
        per_sm[sm] = per_sm.get(sm, 0) + 1
        tally.wrong += 1
        if tally.first is None:
            tally.first = (sm, want, got)
    tally.per_sm = per_sm


def run_compute(
    target: ComputeTarget,
    card: int,
    plan: DiagPlan,
    stop: StopAsked,
    seed: int = 0x5EED,
    clock: Callable[[], float] = time.monotonic,
) -> CardDiag:
    """Every kernel once, then again until ``plan.seconds`` pass; the verdict per SM.

    ``stop`` is asked before each launch: a card too hot to go on ends ``stopped_hot``
    (never ``passed``), with what was found until then. ``clock``: the simulated card's
    skips ahead per launch, so a simulated ``--minutes`` is a few launches of Python.
    """
    tallies = {kernel.name: KernelTally() for kernel in KERNELS}
    started_s = clock()
    round_number = 0
    sms_seen: set[int] = set()
    while True:
        for kernel in KERNELS:
            why = stop()
            if why is not None:
                return _result(card, tallies, sms_seen, target, stopped=why)
            launch = target.launch(kernel, seed + round_number)
            sms_seen.update(launch.block_sms)
            judge_launch(kernel, launch, seed + round_number, tallies[kernel.name])
        round_number += 1
        if clock() - started_s >= plan.seconds:
            break
    figures_sms = target.sm_count
    result = _result(card, tallies, sms_seen, target)
    if len(sms_seen) < figures_sms:
        result.findings.append(f"only {len(sms_seen)} of {figures_sms} SMs ran a block")
    return result


def _result(
    card: int,
    tallies: dict[str, KernelTally],
    sms_seen: set[int],
    target: ComputeTarget,
    stopped: str | None = None,
) -> CardDiag:
    findings: list[str] = []
    bad_sms: set[int] = set()
    for kernel in KERNELS:
        tally = tallies[kernel.name]
        if not tally.wrong or tally.per_sm is None or tally.first is None:
            continue
        bad_sms.update(tally.per_sm)
        sms = ", ".join(f"SM {sm} ({n:,})" for sm, n in sorted(tally.per_sm.items())[:6])
        sm, want, got = tally.first
        findings.append(
            f"{kernel.label}: {tally.wrong:,} of {tally.words:,} results wrong on {sms}; "
            f"first on SM {sm}: expected 0x{want:08x}, got 0x{got:08x}"
        )
    core_c, hbm_c = target.temperatures()
    figures = {
        "sms_seen": len(sms_seen),
        "sm_count": target.sm_count,
        "results_checked": sum(t.words for t in tallies.values()),
        "results_wrong": sum(t.wrong for t in tallies.values()),
        "bad_sms": sorted(bad_sms),
        "core_c": core_c,
        "hbm_c": hbm_c,
    }
    if stopped is not None:
        verdict = f"stopped hot ({stopped}) before the test finished: cool the card, rerun"
        if findings:
            verdict += f"; already found: {findings[0]}"
        return CardDiag(card, DiagKind.COMPUTE, DiagOutcome.STOPPED_HOT, verdict, figures, findings)
    if findings:
        names = ", ".join(f"SM {sm}" for sm in sorted(bad_sms)[:6])
        verdict = (
            f"wrong results on {names}: the card computes silently wrong; do not serve on it "
            "(return or replace it)"
        )
        return CardDiag(card, DiagKind.COMPUTE, DiagOutcome.FAILED, verdict, figures, findings)
    checked = figures["results_checked"]
    verdict = (
        f"{checked:,} results bit-exact on {len(sms_seen)} SMs (FMA, integer, FP16 and INT8 MMA)"
    )
    return CardDiag(card, DiagKind.COMPUTE, DiagOutcome.PASSED, verdict, figures, findings)
