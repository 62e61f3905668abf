"""Run blocking calls one at a time on a worker thread, each with a time limit.

NVML calls can block for tens of seconds on a sick GPU (a GSP RPC timeout is 45 s), and a
call into C cannot be cancelled from Python. So the caller waits on a ``Future`` with a
deadline; when the deadline passes, the worker that is stuck in the call is *abandoned*
(it finishes, or not, on its own) and the next call gets a fresh worker, so it is not
queued behind the stuck one.

Why not ``concurrent.futures.ThreadPoolExecutor``: its threads are joined at interpreter
exit, so one thread stuck in the driver would hang the daemon's shutdown forever. The
worker here is a daemon thread instead (``hwcheck.threads``), and the number of abandoned workers still stuck is
capped so a wedged driver cannot make the process leak a thread per poll.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hwcheck.threads import ServiceThread, Wake

T = TypeVar("T")


class CallTimedOut(TimeoutError):
    """The call did not return in time; ``pending`` completes if it ever returns."""

    def __init__(self, timeout_s: float, pending: Future[Any]) -> None:
        super().__init__(f"call did not return within {timeout_s:g} s")
        self.timeout_s = timeout_s
        self.pending = pending


class TooManyStuckCalls(RuntimeError):
    """So many abandoned calls are still stuck that starting another worker is refused."""


@dataclass(slots=True)
class _Job:
    future: Future[Any]
    fn: Callable[[], Any]


@dataclass(slots=True)
class _Worker:
    """One daemon thread draining its own queue; ``None`` in the queue tells it to stop."""

    name: str
    jobs: queue.SimpleQueue[_Job | None] = field(default_factory=queue.SimpleQueue)
    thread: ServiceThread | None = None

    def start(self) -> None:
        self.thread = ServiceThread(self.name, self._run)
        self.thread.start()

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        self.jobs.put(_Job(future, fn))
        return future

    def stop(self) -> None:
        """Ask the thread to exit after the job it is running (if any)."""
        self.jobs.put(None)

    def alive(self) -> bool:
        return self.thread is not None and self.thread.alive()

    def _run(self, _wake: Wake) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            if not job.future.set_running_or_notify_cancel():
                continue
            try:
                result = job.fn()
            except BaseException as exc:  # handed to the caller through the future
                job.future.set_exception(exc)
            else:
                job.future.set_result(result)


class TimedCaller:
    """Serialises calls onto one worker thread and bounds how long each may take.

    Calls are serialised (one in flight at a time) so a call's time limit counts only
    its own run, never time spent queued behind another caller's call.
    """

    def __init__(self, name: str = "timed-call", max_stuck: int = 16) -> None:
        if max_stuck < 1:
            raise ValueError(f"max_stuck must be at least 1, got {max_stuck}")
        self._name = name
        self._max_stuck = max_stuck
        self._lock = threading.Lock()
        self._worker: _Worker | None = None
        self._abandoned: list[_Worker] = []
        self._started = 0

    def call(self, fn: Callable[[], T], timeout_s: float) -> T:
        """Run ``fn()`` on the worker; its result, its exception, or ``CallTimedOut``."""
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s!r}")
        with self._lock:
            worker = self._current_worker()
            future = worker.submit(fn)
            done, _ = wait_futures([future], timeout=timeout_s)
            if not done:
                worker.stop()  # it exits if the stuck call ever returns
                self._abandoned.append(worker)
                self._worker = None
                raise CallTimedOut(timeout_s, future)
        return future.result()

    def stuck_count(self) -> int:
        """How many abandoned workers are still inside a call."""
        with self._lock:
            return self._prune_abandoned()

    def close(self) -> None:
        """Stop the current worker; abandoned ones exit when their call returns."""
        with self._lock:
            if self._worker is not None:
                self._worker.stop()
                self._worker = None

    def _current_worker(self) -> _Worker:
        if self._worker is not None:
            return self._worker
        stuck = self._prune_abandoned()
        if stuck >= self._max_stuck:
            raise TooManyStuckCalls(
                f"{stuck} earlier calls are still stuck; refusing to start another worker"
            )
        self._started += 1
        worker = _Worker(name=f"{self._name}-{self._started}")
        worker.start()
        self._worker = worker
        return worker

    def _prune_abandoned(self) -> int:
        self._abandoned = [worker for worker in self._abandoned if worker.alive()]
        return len(self._abandoned)
