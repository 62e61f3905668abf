"""Background threads: one place owns a thread's start, wake, stop and crash reporting.

fleetd runs a dozen long-lived threads (the kernel-log follower, the store writer, the
recovery worker, the alert engine and senders, the engine's supervisor and log reader, the
canary schedule, the API server). Each used to start its own ``threading.Thread`` with its
own stop flag, and a loop that raised died without a word: the rig went unsupervised with
nothing in the journal. Here:

- a thread's body gets a ``Wake`` and waits on it (Events, so monotonic timeouts, never a
  sleep): ``wake()`` cuts a wait short, ``stop()`` ends the loop;
- a body that raises is logged once with its traceback and handed to the owner's
  ``on_crash`` (fleetd's ``CrashBoard``: the watchdog then asks systemd for a restart);
- every thread is a daemon thread: one stuck in a driver call never holds the process at
  exit (stopping waits a bounded time).

It lives in ``hwcheck``, the lowest package, so every layer above can use the one helper
(``ruff``'s banned-api keeps ``threading.Thread`` out of the rest of the product).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

# ``on_crash(thread name, exception)``: told once when a thread's body raised.
CrashReport = Callable[[str, BaseException], None]

_LOG = logging.getLogger(__name__)


class Wake:
    """What a loop waits on: ``wake()`` cuts one wait short, ``stop()`` ends every wait.

    ``stop_event`` is the plain ``threading.Event`` behind ``stop()``, for code below the
    loop that takes one (the kernel-log follower's reader).
    """

    def __init__(self) -> None:
        self.stop_event = threading.Event()
        self._woken = threading.Event()

    @property
    def stopping(self) -> bool:
        """True once a stop was asked for."""
        return self.stop_event.is_set()

    def wake(self) -> None:
        """Cut the current (or the next) ``wait`` short."""
        self._woken.set()

    def stop(self) -> None:
        """End the loop: every wait returns False from now on."""
        self.stop_event.set()
        self._woken.set()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait until woken, stopped or ``timeout_s`` passed (None: no limit); False once stopping.

        A wake that came while the loop was working is kept: the next wait returns at once,
        so no wake is lost between two waits.
        """
        if self.stop_event.is_set():
            return False
        if self._woken.wait(timeout_s):
            self._woken.clear()
        return not self.stop_event.is_set()

    def rest(self, timeout_s: float) -> bool:
        """Wait ``timeout_s`` unless stopped; False once stopping.

        A wake does not cut it short: a backoff after a failure runs its course.
        """
        return not self.stop_event.wait(timeout_s)


class ServiceThread:
    """One background thread: ``body(wake)`` runs on it from ``start()`` until it returns.

    A wake or a stop asked for before the first ``start()`` is kept for it. Restartable:
    ``start()`` after a stop starts a fresh thread with a fresh ``Wake`` (the kernel-log
    follower restarts at each new boot).
    """

    def __init__(
        self,
        name: str,
        body: Callable[[Wake], None],
        *,
        on_crash: CrashReport | None = None,
        log: logging.Logger | None = None,
    ) -> None:
        self.name = name
        self._body = body
        self._on_crash = on_crash
        self._log = log or _LOG
        self._wake = Wake()
        self._thread: threading.Thread | None = None
        self.crash: BaseException | None = None

    @classmethod
    def every(
        cls,
        name: str,
        interval_s: float,
        tick: Callable[[], None],
        *,
        on_crash: CrashReport | None = None,
        log: logging.Logger | None = None,
    ) -> ServiceThread:
        """A thread that runs ``tick()`` every ``interval_s`` (first after one interval).

        A wake runs it early. ``tick`` handles the errors it can live with; one it lets
        out ends the thread as a crash.
        """

        def loop(wake: Wake) -> None:
            while wake.wait(interval_s):
                tick()

        return cls(name, loop, on_crash=on_crash, log=log)

    # -- lifecycle ---------------------------------------------------------------------
    def start(self, wake: Wake | None = None) -> Wake:
        """Start the thread; the ``Wake`` its body waits on.

        ``wake``: one made beforehand, for work done before the thread starts that must
        already obey its stop (the follower's first read). RuntimeError while a run goes on
        that no stop was asked of; one asked to stop that still lingers (stuck in a call)
        is left to end on its own.
        """
        if self.alive() and not self._wake.stopping:
            raise RuntimeError(f"thread {self.name} is already running")
        if wake is not None:
            self._wake = wake
        elif self._thread is not None:  # a restart: the last run's stop must not end this one
            self._wake = Wake()
        wake = self._wake
        self.crash = None
        thread = self._thread = threading.Thread(
            target=self._run, args=(wake,), name=self.name, daemon=True
        )
        thread.start()
        return wake

    def wake(self) -> None:
        """Cut the body's current (or next) wait short."""
        self._wake.wake()

    def request_stop(self) -> None:
        """Ask the body to end (its waits return False); does not wait for it."""
        self._wake.stop()

    def join(self, timeout_s: float | None) -> bool:
        """Wait up to ``timeout_s`` for the thread to end; True when it has (or never ran)."""
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return thread is None
        thread.join(timeout_s)
        return not thread.is_alive()

    def stop(self, timeout_s: float | None) -> bool:
        """``request_stop`` then ``join``: True when the thread has ended in time."""
        self.request_stop()
        return self.join(timeout_s)

    # -- readers -----------------------------------------------------------------------
    @property
    def started(self) -> bool:
        """True once ``start`` ran (the thread may have ended since)."""
        return self._thread is not None

    @property
    def stopping(self) -> bool:
        """True once a stop was asked for the current run."""
        return self._wake.stopping

    def alive(self) -> bool:
        """True while the thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def is_current(self) -> bool:
        """True when called on this thread (a body calling its own owner)."""
        return self._thread is not None and self._thread is threading.current_thread()

    # -- the thread --------------------------------------------------------------------
    def _run(self, wake: Wake) -> None:
        try:
            self._body(wake)
        except BaseException as exc:  # never silent: logged once, told to the owner
            self.crash = exc
            self._log.error(
                "thread %s crashed (it is not restarted): %s",
                self.name,
                _one_line(exc),
                exc_info=exc,
            )
            if self._on_crash is not None:
                try:
                    self._on_crash(self.name, exc)
                except Exception:
                    self._log.exception("reporting the crash of thread %s failed", self.name)


def run_in_thread(
    name: str,
    work: Callable[[], None],
    *,
    on_crash: CrashReport | None = None,
    log: logging.Logger | None = None,
) -> ServiceThread:
    """Run ``work()`` once on a started background thread (a switch, a watcher, a pump)."""
    thread = ServiceThread(name, lambda _wake: work(), on_crash=on_crash, log=log)
    thread.start()
    return thread


@dataclass(frozen=True, slots=True)
class ThreadCrash:
    """One thread that crashed: its name, the error in one line, when (monotonic)."""

    name: str
    error: str
    at_s: float


class CrashBoard:
    """The crashes of a process's threads, for its health: an ``on_crash`` to hand out.

    fleetd hands ``report`` to the threads it starts; its watchdog reads ``first()`` and
    withholds the ping, so systemd restarts a fleetd whose recovery worker or store
    writer died instead of letting it run half blind.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._crashes: list[ThreadCrash] = []

    def report(self, name: str, exc: BaseException) -> None:
        """``CrashReport``: keep the crash (the thread logged it already)."""
        with self._lock:
            self._crashes.append(ThreadCrash(name, _one_line(exc), self._clock()))

    def first(self) -> ThreadCrash | None:
        """The first crash (what went wrong first), None while every thread is whole."""
        with self._lock:
            return self._crashes[0] if self._crashes else None

    def all(self) -> list[ThreadCrash]:
        """Every crash, oldest first."""
        with self._lock:
            return list(self._crashes)


def _one_line(exc: BaseException) -> str:
    """``KeyError: 'x'``: the class and the first line of the message."""
    text = str(exc).strip().splitlines()
    return f"{exc.__class__.__name__}: {text[0]}" if text else exc.__class__.__name__
