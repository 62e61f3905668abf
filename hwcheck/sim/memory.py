"""A simulated card memory with fault models, swept word by word in the order a card would.

The memory test's procedure (:mod:`hwcheck.memtest.runner`) runs on it exactly as on a
card: the same sweeps, values (:func:`hwcheck.memtest.patterns.sweep_values`), planted
faults and idle gaps. Each fault model is one the field knows, and each needs its own
pattern to be seen:

- ``stuck-bit``: one bit of one word stuck at 0 (the solid ones find it; so does nearly
  every pattern).
- ``address-alias``: an address line stuck, so word B (address bit 12 set) reaches word
  A's cells; the later write wins for both. Data that is the same at A and B (solid,
  checkerboard, walking) cannot see it; the address pattern can (random data and the
  march do too).
- ``coupling``: writing a 1 into bit 3 of an aggressor word (a 0 to 1 transition) flips
  bit 7 of a victim word 1,000 words above it. Every fill-then-check pattern writes the
  victim after the flip and reads it back fine; only the march's read-verify-invert
  order reads the victim after the aggressor's transition.
- ``load-transient``: after the third jump from idle to full-bandwidth traffic, the first
  128-byte burst each full-bandwidth fill writes reads back as zeros (the public CMP
  170HX suite's card: errors after each jump, whole bursts, following timing, not
  location). The fixed patterns run back to back (one jump) and miss it; the stress
  mode's idle gaps find it.

Sweeps run in order (ascending or descending), in bulk between the few words a fault
involves, which are read and written one at a time through the fault, so the order of
events matches a sequential sweep exactly. Nothing here touches the host. The clock is
the real monotonic clock, except that each idle gap skips :data:`GAP_SKIP_S` ahead (no
sleep): a minute of stress mode is about fifteen cycles of Python.
"""

from __future__ import annotations

import threading
import time
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from hwcheck.memtest.patterns import BURST_WORDS, MASK32, RANDOM, Sweep, complement, sweep_values
from hwcheck.memtest.runner import Counts

FAULT_MODELS = ("stuck-bit", "address-alias", "coupling", "load-transient")
GAP_SKIP_S = 4.0  # the simulated clock's jump at each idle gap
TRANSIENT_AFTER_JUMPS = 3
PIECE_WORDS = 1024  # the unit a mismatching range is searched in
RECORDS_SEEN = 64  # bad words remembered; the first by index are reported


@dataclass(frozen=True, slots=True)
class StuckBit:
    """Bit ``bit`` of word ``word`` always holds ``value``."""

    word: int
    bit: int
    value: int = 0


@dataclass(frozen=True, slots=True)
class Alias:
    """Reads and writes of word ``word`` reach word ``target``'s cells."""

    word: int
    target: int


@dataclass(frozen=True, slots=True)
class Coupling:
    """A 0 to 1 write of ``bit`` in ``aggressor`` flips ``victim_bit`` of ``victim``."""

    aggressor: int
    bit: int
    victim: int
    victim_bit: int


@dataclass(frozen=True, slots=True)
class LoadTransient:
    """After ``after_jumps`` jumps from idle, each full-bandwidth fill's first burst reads 0."""

    after_jumps: int = TRANSIENT_AFTER_JUMPS


@dataclass(frozen=True, slots=True)
class SimFaults:
    """The faults of one simulated memory."""

    stuck: tuple[StuckBit, ...] = ()
    aliases: tuple[Alias, ...] = ()
    couplings: tuple[Coupling, ...] = ()
    transient: LoadTransient | None = None


def fault_models(names: Iterable[str], words: int, stuck_bits: int = 0) -> SimFaults:
    """The named models (:data:`FAULT_MODELS`) placed in a memory of ``words`` words.

    ``stuck_bits``: that many more stuck bits spread over the memory (the scenarios' older
    ``memtest_errors``).
    """
    sixteenth = words // 16
    stuck: list[StuckBit] = []
    aliases: list[Alias] = []
    couplings: list[Coupling] = []
    transient = None
    for name in names:
        if name == "stuck-bit":
            stuck.append(StuckBit(5 * sixteenth + 3, 13))
        elif name == "address-alias":
            base = (9 * sixteenth + 100) & ~(1 << 12)
            aliases.append(Alias(base | (1 << 12), base))
        elif name == "coupling":
            aggressor = 12 * sixteenth + 40
            couplings.append(Coupling(aggressor, 3, aggressor + 1000, 7))
        elif name == "load-transient":
            transient = LoadTransient()
        else:
            raise ValueError(f"unknown fault model {name!r} (known: {', '.join(FAULT_MODELS)})")
    for k in range(stuck_bits):
        stuck.append(StuckBit((k * 104_729 + 77) % words, k % 32))
    return SimFaults(tuple(stuck), tuple(aliases), tuple(couplings), transient)


def _count_bad(counts: Counts, word: int, expected: int, got: int, block_words: int) -> None:
    """What a check kernel adds for one bad word (it keeps the first few it sees)."""
    counts.bad_words += 1
    counts.bit_errors += (expected ^ got).bit_count()
    block = word // block_words
    counts.blocks[block] = counts.blocks.get(block, 0) + 1
    if len(counts.records) < RECORDS_SEEN:
        counts.records.append((word, expected, got))


class ValuesCache:
    """The last few sweeps' values, shared by the cards of a run (same seed, same words).

    Hashing the random pattern is most of a simulated card's cost; the cards of one rig
    sweep the same values, so a run pays it once rather than once per card (a card
    waits while another computes what it needs).
    """

    def __init__(self, capacity: int = 4) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[tuple[int, int, int, int], array[int]] = OrderedDict()
        self._lock = threading.Lock()

    def values(self, mode: int, arg: int, first: int, count: int) -> array[int]:
        """The words of ``(mode, arg)`` from ``first``, before any XOR (do not modify them).

        Only the random pattern's are kept: the others cost less to build than to hold.
        """
        if mode != RANDOM:
            return sweep_values(Sweep(True, mode, arg), first, count)
        key = (mode, arg, first, count)
        with self._lock:  # held while computing: the other cards wait for the same values
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                return found
            computed = sweep_values(Sweep(True, mode, arg), first, count)
            self._entries[key] = computed
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)
            return computed


class SimMemory:
    """``MemoryTarget`` over an array of 32-bit words with fault models."""

    def __init__(
        self,
        words: int,
        block_words: int,
        chunk_words: int,
        faults: SimFaults,
        cache: ValuesCache | None = None,
        gap_skip_s: float = GAP_SKIP_S,
    ) -> None:
        self._words = words
        self._block_words = block_words
        self._chunk_words = chunk_words
        self._faults = faults
        self._cells = array("I", [0]) * words
        self._stuck = {s.word: s for s in faults.stuck}
        self._aliases = {a.word: a for a in faults.aliases}
        self._couplings = {c.aggressor: c for c in faults.couplings}
        self._events = sorted(set(self._stuck) | set(self._aliases) | set(self._couplings))
        self._counts = Counts()
        self._idle = True  # the card was idle before the test
        self._jumps = 0
        self._skipped_s = 0.0
        self._gap_skip_s = gap_skip_s
        self._cache = cache or ValuesCache()

    @property
    def words(self) -> int:
        """32-bit words under test."""
        return self._words

    @property
    def block_words(self) -> int:
        """Words per block of the error map."""
        return self._block_words

    @property
    def chunk_words(self) -> int:
        """Words per chunk."""
        return self._chunk_words

    # -- the target --------------------------------------------------------------------

    def sweep(self, sweep: Sweep, first: int, count: int, light: bool = False) -> None:
        """Run ``sweep`` over ``first .. first+count-1`` in its order, through the faults."""
        jump = self._idle and not light
        self._idle = False
        if jump:
            self._jumps += 1
        values = self._values(sweep, first, count)
        for start, stop, event in self._pieces(first, first + count, sweep.descending):
            if event is not None:
                self._one_word(sweep, event, values[event - first])
            elif sweep.fill:
                self._cells[start:stop] = values[start - first : stop - first]
            else:
                self._check_range(sweep, start, stop, values[start - first : stop - first])
        transient = self._faults.transient
        if sweep.fill and not light and transient and self._jumps >= transient.after_jumps:
            burst = first - first % BURST_WORDS
            self._cells[burst : burst + BURST_WORDS] = array("I", [0]) * BURST_WORDS

    def plant(self, word: int, value: int) -> None:
        """Write ``value`` straight into ``word``."""
        self._write(word, value)

    def reset(self) -> None:
        """Zero the counters."""
        self._counts = Counts()

    def collect(self, max_records: int) -> Counts:
        """The counters (the first ``max_records`` bad words by index)."""
        counts = self._counts
        records = sorted(counts.records)[:max_records]
        return Counts(
            counts.bad_words, counts.bit_errors, counts.zero_bursts, records, dict(counts.blocks)
        )

    def settle(self) -> None:
        """Nothing is queued: every sweep ran when called."""

    def idle(self, seconds: float) -> None:
        """An idle gap: no traffic; the clock skips ahead (``gap_skip_s``) instead of sleeping."""
        self._idle = True
        self._skipped_s += self._gap_skip_s

    def clock(self) -> float:
        """The monotonic clock plus the skipped idle gaps."""
        return time.monotonic() + self._skipped_s

    # -- inside ------------------------------------------------------------------------

    def _values(self, sweep: Sweep, first: int, count: int) -> array[int]:
        """The sweep's words; a check after its fill reuses them (the random hash is slow)."""
        base = self._cache.values(sweep.mode, sweep.arg, first, count)
        if not sweep.xor:
            return base
        return sweep_values(sweep, first, count) if count < 64 else _xor_all(base, sweep.xor)

    def _pieces(
        self, start: int, stop: int, descending: bool
    ) -> Iterator[tuple[int, int, int | None]]:
        """``(start, stop, None)`` bulk ranges and ``(w, w+1, w)`` fault words, in sweep order."""
        pieces: list[tuple[int, int, int | None]] = []
        cursor = start
        for event in self._events:
            if event < start or event >= stop:
                continue
            if cursor < event:
                pieces.append((cursor, event, None))
            pieces.append((event, event + 1, event))
            cursor = event + 1
        if cursor < stop:
            pieces.append((cursor, stop, None))
        return reversed(pieces) if descending else iter(pieces)

    def _check_range(self, sweep: Sweep, start: int, stop: int, want: array[int]) -> None:
        got = self._cells[start:stop]
        if got != want:
            pieces = range(0, stop - start, PIECE_WORDS)
            for offset in reversed(pieces) if sweep.descending else pieces:
                end = min(offset + PIECE_WORDS, stop - start)
                if got[offset:end] == want[offset:end]:
                    continue
                for k in range(offset, end):
                    if got[k] != want[k]:
                        _count_bad(self._counts, start + k, want[k], got[k], self._block_words)
                self._zero_bursts(start, got, want, offset, end)
        if sweep.rewrite:
            self._cells[start:stop] = _xor_all(want, MASK32)

    def _zero_bursts(
        self, start: int, got: array[int], want: array[int], offset: int, end: int
    ) -> None:
        """Count the bursts of ``got[offset:end]`` that read all zeros where data was due."""
        first_burst = (start + offset) // BURST_WORDS
        last_burst = (start + end - 1) // BURST_WORDS
        for burst in range(first_burst, last_burst + 1):
            lo = max(burst * BURST_WORDS - start, 0)
            hi = min((burst + 1) * BURST_WORDS - start, len(got))
            if hi - lo < BURST_WORDS:
                continue
            if not any(got[lo:hi]) and got[lo:hi] != want[lo:hi]:
                self._counts.zero_bursts += 1

    def _one_word(self, sweep: Sweep, word: int, value: int) -> None:
        if sweep.fill:
            self._write(word, value)
            return
        got = self._read(word)
        if got != value:
            _count_bad(self._counts, word, value, got, self._block_words)
        if sweep.rewrite:
            self._write(word, value ^ MASK32)

    def _read(self, word: int) -> int:
        alias = self._aliases.get(word)
        return self._cells[alias.target if alias else word]

    def _write(self, word: int, value: int) -> None:
        alias = self._aliases.get(word)
        cell = alias.target if alias else word
        stuck = self._stuck.get(cell)
        if stuck is not None:
            mask = 1 << stuck.bit
            value = (value & ~mask & MASK32) | (mask if stuck.value else 0)
        coupling = self._couplings.get(cell)
        if coupling is not None:
            mask = 1 << coupling.bit
            if not self._cells[cell] & mask and value & mask:
                self._cells[coupling.victim] ^= 1 << coupling.victim_bit
        self._cells[cell] = value


def _xor_all(values: array[int], xor: int) -> array[int]:
    """Every word XORed with ``xor`` (the complement: one byte translation, not a loop)."""
    if xor == MASK32:
        return complement(values)
    raw = values.tobytes()
    mask = int.from_bytes(xor.to_bytes(4, "little") * len(values), "little")
    out = array("I")
    out.frombytes((int.from_bytes(raw, "little") ^ mask).to_bytes(len(raw), "little"))
    return out
