"""Fair queues in front of the engine: per-key parallel limits and priorities.

LiteLLM's users still ask for per-key parallel limits and priority (its issues #13930,
#17824, #13405); vLLM itself serves its ``max-num-seqs`` first come, first served, so one
agent that opens eight streams starves the rest. The guard admits a request when its key
is under ``max_parallel`` and the engine under its ``max-num-seqs`` (as fleetd reports it);
otherwise the request waits: higher ``priority`` first, first come first served within a
priority, each wait bounded by ``[guard] queue_timeout_s`` (then a 429 with
``Retry-After``). Single-threaded: the guard's event loop.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field


class QueueTimeout(Exception):
    """The request waited ``queue_timeout_s`` without a slot (the message is one line)."""


@dataclass(frozen=True, slots=True)
class KeyLimit:
    """One key's limit and priority."""

    max_parallel: int | None = None
    priority: int = 0


@dataclass(order=True)
class _Waiter:
    rank: tuple[int, int]  # (-priority, arrival)
    key: str = field(compare=False)
    ready: asyncio.Future[None] = field(compare=False)


@dataclass
class QueueFigures:
    """What ``/metrics`` and the traffic panel show of the queue."""

    depth: int = 0
    running: int = 0
    waited: int = 0  # requests that waited at all
    timed_out: int = 0
    wait_s_total: float = 0.0
    wait_s_max: float = 0.0

    def as_dict(self) -> dict[str, float | int]:
        """The control document's form."""
        return {
            "depth": self.depth,
            "running": self.running,
            "waited": self.waited,
            "timed_out": self.timed_out,
            "wait_s_total": round(self.wait_s_total, 6),
            "wait_s_max": round(self.wait_s_max, 6),
        }


class FairQueue:
    """Admission to the engine: ``async with queue.slot(key):`` around a request."""

    def __init__(
        self,
        limits: Mapping[str, KeyLimit],
        timeout_s: float,
        capacity: Callable[[], int | None],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._limits = dict(limits)
        self._timeout_s = timeout_s
        self._capacity = capacity  # the engine's max-num-seqs, when fleetd said it
        self._monotonic = monotonic
        self._running: Counter[str] = Counter()
        self._total = 0
        self._waiting: list[_Waiter] = []
        self._arrivals = itertools.count()
        self.figures = QueueFigures()

    @property
    def active(self) -> bool:
        """True when anything can make a request wait (a key limit or a known capacity)."""
        return any(limit.max_parallel for limit in self._limits.values()) or bool(self._capacity())

    def _fits(self, key: str) -> bool:
        capacity = self._capacity()
        if capacity is not None and self._total >= capacity:
            return False
        limit = self._limits.get(key, KeyLimit()).max_parallel
        return limit is None or self._running[key] < limit

    def _take(self, key: str) -> None:
        self._running[key] += 1
        self._total += 1
        self.figures.running = self._total

    def _wake(self) -> None:
        """Admit waiters in rank order while they fit.

        A waiter over its key's limit is passed over: one busy key never blocks another's turn.
        """
        for waiter in sorted(self._waiting):
            if waiter.ready.done():
                continue
            if self._fits(waiter.key):
                self._take(waiter.key)
                waiter.ready.set_result(None)
            elif self._capacity() is not None and self._total >= (self._capacity() or 0):
                break  # the engine is full: nobody else fits either
        self._waiting = [waiter for waiter in self._waiting if not waiter.ready.done()]
        self.figures.depth = len(self._waiting)

    def try_acquire(self, key: str) -> bool:
        """Take a slot at once when one is free and nobody waits (the common case)."""
        if not self._waiting and self._fits(key):
            self._take(key)
            return True
        return False

    async def acquire(self, key: str) -> float:
        """Wait for a slot; the seconds waited. ``QueueTimeout`` past ``queue_timeout_s``."""
        if self.try_acquire(key):
            return 0.0
        started = self._monotonic()
        limit = self._limits.get(key, KeyLimit())
        waiter = _Waiter(
            (-limit.priority, next(self._arrivals)),
            key,
            asyncio.get_running_loop().create_future(),
        )
        self._waiting.append(waiter)
        self.figures.depth = len(self._waiting)
        self._wake()
        try:
            await asyncio.wait_for(asyncio.shield(waiter.ready), self._timeout_s)
        except TimeoutError:
            if waiter.ready.done():  # admitted at the last moment: keep the slot
                return self._waited(started)
            waiter.ready.cancel()
            self._waiting = [w for w in self._waiting if w is not waiter]
            self.figures.depth = len(self._waiting)
            self.figures.timed_out += 1
            raise QueueTimeout(
                f"waited {self._timeout_s:g} s for a slot (key {key}: {self._running[key]} running)"
            ) from None
        except asyncio.CancelledError:
            if waiter.ready.done() and not waiter.ready.cancelled():
                self.release(key)
            else:
                waiter.ready.cancel()
                self._waiting = [w for w in self._waiting if w is not waiter]
                self.figures.depth = len(self._waiting)
            raise
        return self._waited(started)

    def _waited(self, started: float) -> float:
        waited = self._monotonic() - started
        self.figures.waited += 1
        self.figures.wait_s_total += waited
        self.figures.wait_s_max = max(self.figures.wait_s_max, waited)
        return waited

    def release(self, key: str) -> None:
        """A request of ``key`` left the engine."""
        if self._running[key] > 0:
            self._running[key] -= 1
            self._total -= 1
        self.figures.running = self._total
        if self._waiting:
            self._wake()


def max_num_seqs_of(argv: Sequence[str]) -> int | None:
    """``--max-num-seqs N`` (or ``=N``) of an engine's command line; None when absent."""
    for index, word in enumerate(argv):
        value = None
        if word == "--max-num-seqs" and index + 1 < len(argv):
            value = argv[index + 1]
        elif word.startswith("--max-num-seqs="):
            value = word.partition("=")[2]
        if value is not None and value.isdecimal() and int(value) > 0:
            return int(value)
    return None
