"""A guard process run by hand (``python -m serving.guard``), as fleetd would start it.

Real sockets, the real uvicorn listener and app; the engine is whatever URL the test
gives (the simulated engine, or a small fake at the HTTP boundary). The control token is
the test's, so it can read the guard's counters the way fleetd does.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from serving.guard.control import SYNC_PATH
from serving.guard.settings import SETTINGS_ENV, TOKEN_ENV
from tests.support import loopback
from tests.support.fleetd import free_port
from tests.support.waiting import wait_until

CONTROL_TOKEN = "test-control-token"


@dataclass
class GuardProc:
    """A running guard: its public URL, its address, its process."""

    proc: subprocess.Popen[bytes]
    port: int
    control_port: int

    @property
    def url(self) -> str:
        """The public base URL."""
        return f"http://127.0.0.1:{self.port}"

    def connect(self) -> socket.socket:
        """A raw connection to the public port."""
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)

    def sync(
        self, engine_url: str | None, state: str = "ready", draining: str | None = None
    ) -> dict[str, Any]:
        """What fleetd's keeper reads each tick (the counters), telling the engine's place.

        ``draining``: why fleetd drains the rig (None: it serves).
        """
        document = {
            "engine_url": engine_url,
            "serving_state": state,
            "profile": None,
            "since_seq": 0,
            "draining": draining,
        }
        answer = loopback.post(
            f"http://127.0.0.1:{self.control_port}{SYNC_PATH}",
            content=json.dumps(document),
            headers={"Authorization": f"Bearer {CONTROL_TOKEN}"},
        )
        answer.raise_for_status()
        report: dict[str, Any] = answer.json()
        return report

    def counters(self) -> dict[str, int]:
        """The guard's counters now."""
        return dict(self.sync(None, "ready").get("counters") or {})


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@contextmanager
def running_guard(settings: dict[str, Any], engine_url: str | None) -> Iterator[GuardProc]:
    """Start a guard with ``settings`` (``[guard]``'s keys) in front of ``engine_url``."""
    port, control_port = free_port(), free_port()
    env = {**os.environ, SETTINGS_ENV: json.dumps(settings), TOKEN_ENV: CONTROL_TOKEN}
    argv = [sys.executable, "-m", "serving.guard", "--listen", f"127.0.0.1:{port}"]
    argv += ["--control", f"127.0.0.1:{control_port}"]
    if engine_url:
        argv += ["--engine-url", engine_url]
    log = tempfile.TemporaryFile()  # noqa: SIM115 (closed below; a pipe could fill and stall it)
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=log)
    guard = GuardProc(proc, port, control_port)
    try:
        wait_until(
            lambda: proc.poll() is not None or (_listening(port) and _listening(control_port)),
            30,
            "the guard listening",
        )
        if proc.poll() is not None:
            log.seek(0)
            raise AssertionError(f"the guard exited: {log.read().decode(errors='replace')}")
        if engine_url:
            guard.sync(engine_url)
        yield guard
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def openai_error(response: httpx.Response) -> dict[str, Any]:
    """The ``error`` object of an OpenAI-shaped error answer (asserting the shape)."""
    body = response.json()
    error: dict[str, Any] = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, body
    return error
