"""TimedCaller: calls with a time limit on a worker that is replaced when it gets stuck."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from hwcheck.timed_calls import CallTimedOut, TimedCaller, TooManyStuckCalls

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def caller() -> TimedCaller:
    return TimedCaller("test-call", max_stuck=2)


def test_a_call_returns_its_result_on_the_worker_thread(caller: TimedCaller) -> None:
    assert caller.call(lambda: threading.current_thread().name, timeout_s=5) == "test-call-1"
    assert caller.call(lambda: 6 * 7, timeout_s=5) == 42
    caller.close()


def test_a_call_raises_its_own_exception(caller: TimedCaller) -> None:
    def fail() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        caller.call(fail, timeout_s=5)
    assert caller.call(lambda: "still works", timeout_s=5) == "still works"
    caller.close()


def test_a_stuck_call_times_out_and_the_next_runs_on_a_fresh_worker(caller: TimedCaller) -> None:
    gate = threading.Event()
    try:
        started_s = time.monotonic()
        with pytest.raises(CallTimedOut) as caught:
            caller.call(lambda: gate.wait(30), timeout_s=0.2)
        assert 0.2 <= time.monotonic() - started_s < 3.0
        assert str(caught.value) == "call did not return within 0.2 s"
        assert not caught.value.pending.done()
        assert caller.stuck_count() == 1
        assert caller.call(lambda: threading.current_thread().name, timeout_s=5) == "test-call-2"
    finally:
        gate.set()
    assert caught.value.pending.result(timeout=5) is True  # the abandoned call finished
    deadline = time.monotonic() + 5
    while caller.stuck_count() and time.monotonic() < deadline:
        threading.Event().wait(0.005)
    assert caller.stuck_count() == 0
    caller.close()


def test_too_many_stuck_workers_refuse_new_calls(caller: TimedCaller) -> None:
    gate = threading.Event()
    try:
        for _ in range(2):
            with pytest.raises(CallTimedOut):
                caller.call(lambda: gate.wait(30), timeout_s=0.1)
        with pytest.raises(TooManyStuckCalls, match="2 earlier calls are still stuck"):
            caller.call(lambda: 1, timeout_s=5)
    finally:
        gate.set()


def test_calls_from_several_threads_run_one_at_a_time(caller: TimedCaller) -> None:
    running = 0
    most = 0
    guard = threading.Lock()

    def work() -> None:
        nonlocal running, most
        with guard:
            running += 1
            most = max(most, running)
        threading.Event().wait(0.01)
        with guard:
            running -= 1

    threads = [threading.Thread(target=lambda: caller.call(work, timeout_s=5)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert most == 1
    caller.close()


@pytest.mark.parametrize("timeout_s", [0, -1, float("nan")])
def test_a_nonsense_timeout_is_refused(caller: TimedCaller, timeout_s: float) -> None:
    with pytest.raises(ValueError, match="timeout_s must be positive"):
        caller.call(lambda: 1, timeout_s=timeout_s)


def test_max_stuck_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_stuck must be at least 1"):
        TimedCaller(max_stuck=0)


def test_a_stuck_call_does_not_keep_the_process_from_exiting() -> None:
    """The reason the worker is a daemon thread: a stuck C call must not hang shutdown."""
    script = textwrap.dedent(
        """
        import threading
        from hwcheck.timed_calls import CallTimedOut, TimedCaller

        caller = TimedCaller()
        try:
            caller.call(threading.Event().wait, timeout_s=0.1)  # never returns
        except CallTimedOut:
            print("timed out", flush=True)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "timed out\n"
