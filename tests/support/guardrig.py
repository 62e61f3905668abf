"""A guard in front of a simulated engine, both in this process, on loopback ports.

The engine is the real simulated engine's HTTP server (a thread); the guard is the real
``GuardApp`` under uvicorn (a thread with its own event loop). Tests drive them over HTTP
as an agent would and read what the engine received (``/sim/last-request``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from serving.guard.app import GuardApp
from serving.guard.settings import GuardSettings
from serving.sim.core import EngineLog, SimEngine
from serving.sim.handler import EngineServer
from serving.sim.options import parse_options
from tests.support.fleetd import free_port

MODEL = "sim"


class GuardRig:
    """Where the guard and the engine answer."""

    def __init__(self, engine: SimEngine, engine_url: str, app: GuardApp, guard_url: str) -> None:
        self.engine = engine
        self.engine_url = engine_url
        self.app = app
        self.guard_url = guard_url


def _free_port() -> int:
    return free_port()


@contextmanager
def guard_rig(guard: dict[str, Any], *engine_flags: str) -> Iterator[GuardRig]:
    """A running engine (``--sim-*`` flags) and a guard (``[guard]`` as a dict) before it."""
    options = parse_options(
        ["serve", MODEL, "--port", "8000", "--sim-tokens-per-s", "2000", *engine_flags]
    )
    engine = SimEngine(options, EngineLog())
    engine.ready.set()
    server = EngineServer(("127.0.0.1", 0), engine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    engine_url = f"http://127.0.0.1:{server.server_address[1]}"
    settings = GuardSettings.model_validate({"listen": "127.0.0.1:1", **guard})
    app = GuardApp(settings, None, "", engine_url)
    port = _free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, lifespan="on", log_level="warning", access_log=False
    )
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(uv.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not uv.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the guard did not start")
        time.sleep(0.02)
    try:
        yield GuardRig(engine, engine_url, app, f"http://127.0.0.1:{port}")
    finally:
        uv.should_exit = True
        thread.join(timeout=10)
        server.shutdown()
        server.server_close()
