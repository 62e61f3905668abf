"""The simulated engine ends with the test session that started it (``serving.sim.lifetime``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import httpx

from serving.sim.lifetime import WATCH_VARIABLE, end_with_watched_process
from tests.support import loopback
from tests.support.fleetd import free_port
from tests.support.waiting import wait_until


def answers(url: str) -> bool:
    try:
        return loopback.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_nothing_is_watched_without_the_variable() -> None:
    assert end_with_watched_process({}) is None
    assert end_with_watched_process({WATCH_VARIABLE: "not a pid"}) is None


def test_the_engine_exits_when_the_watched_process_ends() -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    ended: list[int] = []
    done = threading.Event()
    stop = threading.Event()
    try:
        thread = end_with_watched_process(
            {WATCH_VARIABLE: str(sleeper.pid)},
            exit_now=lambda code: (ended.append(code), done.set()),  # type: ignore[func-returns-value]
            stop=stop,
        )
        assert thread is not None
        assert not done.wait(0.05)  # alive: it waits
        sleeper.kill()
        sleeper.wait()
        wait_until(done.is_set, 10, "the watch to see the session end")
        assert ended == [0]
    finally:
        stop.set()
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()


def test_an_engine_ignoring_signals_still_ends_with_its_session() -> None:
    """A real simulated engine under a session process that is killed: no engine is left."""
    session = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    env = {**os.environ, WATCH_VARIABLE: str(session.pid)}
    port = free_port()
    argv = [sys.executable, "-m", "serving.sim.engine", "serve", "m", "--port", str(port),
            "--sim-ready-after-s", "0", "--sim-ignore-signals"]  # fmt: skip
    engine = subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        wait_until(lambda: answers(f"http://127.0.0.1:{port}/health"), 30, "the engine up")
        engine.send_signal(signal.SIGTERM)  # ignored, as the scenario asks
        session.kill()
        session.wait()
        assert engine.wait(15) == 0
    finally:
        for proc in (engine, session):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
