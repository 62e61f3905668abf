"""The background-thread helper: start, wake, stop, restart and crash reporting."""

from __future__ import annotations

import logging
import queue
import threading

import pytest

from hwcheck.threads import CrashBoard, ServiceThread, Wake, run_in_thread

# Long enough that a wait ending before it proves a wake or a stop ended it.
FOREVER_S = 60.0


def test_a_body_runs_on_its_own_named_daemon_thread() -> None:
    seen: queue.Queue[tuple[str, bool]] = queue.Queue()

    def body(wake: Wake) -> None:
        current = threading.current_thread()
        seen.put((current.name, current.daemon))

    thread = ServiceThread("test-body", body)
    assert not thread.started and not thread.alive()
    thread.start()
    assert seen.get(timeout=10) == ("test-body", True)
    assert thread.join(10)
    assert thread.started and not thread.alive() and thread.crash is None


def test_a_wake_cuts_a_wait_short_and_is_not_lost_while_the_loop_works() -> None:
    rounds: queue.Queue[int] = queue.Queue()
    busy = threading.Event()
    release = threading.Event()

    def body(wake: Wake) -> None:
        count = 0
        while wake.wait(FOREVER_S):
            count += 1
            if count == 1:
                busy.set()
                release.wait(10)  # the loop is working while the second wake comes
            rounds.put(count)

    thread = ServiceThread("test-wake", body)
    thread.start()
    thread.wake()
    assert busy.wait(10)
    thread.wake()  # arrives while the loop works: the next wait returns at once
    release.set()
    assert rounds.get(timeout=10) == 1
    assert rounds.get(timeout=10) == 2
    assert thread.stop(10)


def test_stop_ends_a_wait_without_a_limit_and_every_later_wait() -> None:
    answers: queue.Queue[bool] = queue.Queue()

    def body(wake: Wake) -> None:
        answers.put(wake.wait())
        answers.put(wake.wait(FOREVER_S))
        answers.put(wake.rest(FOREVER_S))

    thread = ServiceThread("test-stop", body)
    wake = thread.start()
    assert not wake.stopping
    assert thread.stop(10)
    assert [answers.get(timeout=1) for _ in range(3)] == [False, False, False]
    assert wake.stopping and wake.stop_event.is_set() and thread.stopping


def test_rest_is_not_cut_short_by_a_wake_but_is_by_a_stop() -> None:
    resting = threading.Event()
    rested: queue.Queue[bool] = queue.Queue()

    def body(wake: Wake) -> None:
        resting.set()
        rested.put(wake.rest(FOREVER_S))

    thread = ServiceThread("test-rest", body)
    thread.start()
    assert resting.wait(10)
    thread.wake()
    with pytest.raises(queue.Empty):
        rested.get(timeout=0.2)  # still resting: a wake is no reason to end a backoff
    thread.request_stop()
    assert rested.get(timeout=10) is False
    assert thread.join(10)


def test_every_runs_its_tick_on_each_wake_until_stopped() -> None:
    ticks: queue.Queue[str] = queue.Queue()
    thread = ServiceThread.every("test-every", FOREVER_S, lambda: ticks.put("tick"))
    thread.start()
    with pytest.raises(queue.Empty):
        ticks.get(timeout=0.1)  # the first tick comes after one interval, not at start
    thread.wake()
    assert ticks.get(timeout=10) == "tick"
    thread.wake()
    assert ticks.get(timeout=10) == "tick"
    assert thread.stop(10)
    assert ticks.empty()


def test_a_crash_is_logged_once_with_its_traceback_and_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reports: queue.Queue[tuple[str, BaseException]] = queue.Queue()

    def body(wake: Wake) -> None:
        raise KeyError("card 3")

    thread = ServiceThread("test-crash", body, on_crash=lambda name, exc: reports.put((name, exc)))
    with caplog.at_level(logging.ERROR):
        thread.start()
        name, exc = reports.get(timeout=10)
    assert name == "test-crash" and isinstance(exc, KeyError)
    assert thread.join(10) and thread.crash is exc
    crashed = [r for r in caplog.records if "test-crash crashed" in r.getMessage()]
    assert len(crashed) == 1
    assert crashed[0].exc_info is not None and crashed[0].exc_info[1] is exc
    assert "KeyError: 'card 3'" in crashed[0].getMessage()


def test_a_crash_without_a_callback_is_still_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR):
        thread = run_in_thread("test-lonely", lambda: {}.pop("card"))
        assert thread.join(10)
    assert isinstance(thread.crash, KeyError)
    assert any("test-lonely crashed" in r.getMessage() for r in caplog.records)


def test_a_failing_crash_callback_is_logged_and_the_thread_still_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(name: str, exc: BaseException) -> None:
        raise RuntimeError("the board is gone")

    with caplog.at_level(logging.ERROR):
        thread = run_in_thread("test-broken-report", lambda: 1 / 0, on_crash=broken)
        assert thread.join(10)
    messages = [r.getMessage() for r in caplog.records]
    assert any("reporting the crash of thread test-broken-report failed" in m for m in messages)


def test_a_body_that_returns_is_no_crash() -> None:
    reports: list[str] = []
    thread = run_in_thread("test-done", lambda: None, on_crash=lambda n, e: reports.append(n))
    assert thread.join(10)
    assert thread.crash is None and reports == []


def test_a_thread_restarts_with_a_fresh_wake_after_a_stop() -> None:
    runs: queue.Queue[int] = queue.Queue()
    count = iter(range(1, 10))

    def body(wake: Wake) -> None:
        runs.put(next(count))
        wake.wait()

    thread = ServiceThread("test-restart", body)
    first = thread.start()
    assert runs.get(timeout=10) == 1
    with pytest.raises(RuntimeError, match="already running"):
        thread.start()
    assert thread.stop(10)
    second = thread.start()
    assert second is not first and not second.stopping
    assert runs.get(timeout=10) == 2
    assert thread.alive()
    assert thread.stop(10)


def test_is_current_tells_the_thread_itself() -> None:
    answers: queue.Queue[bool] = queue.Queue()

    def body(wake: Wake) -> None:
        answers.put(thread.is_current())
        answers.put(thread.join(0))  # joining itself would deadlock: it answers False

    thread = ServiceThread("test-current", body)
    thread.start()
    assert answers.get(timeout=10) is True
    assert answers.get(timeout=10) is False
    assert thread.join(10)
    assert not thread.is_current()


def test_join_of_a_thread_never_started_is_done() -> None:
    thread = ServiceThread("test-idle", lambda wake: None)
    assert thread.stop(0) and thread.join(0)


def test_the_crash_board_keeps_every_crash_and_names_the_first() -> None:
    clock = iter([1.0, 2.0])
    board = CrashBoard(clock=lambda: next(clock))
    assert board.first() is None
    board.report("recovery", ValueError("bad\nsecond line"))
    board.report("store-writer", OSError("disk full"))
    first = board.first()
    assert first is not None
    assert (first.name, first.error, first.at_s) == ("recovery", "ValueError: bad", 1.0)
    assert [c.name for c in board.all()] == ["recovery", "store-writer"]
