"""The guard process: ``python -m serving.guard``, as fleetd starts it (or by hand).

fleetd binds both sockets itself (the public ``[guard] listen`` and a loopback control
socket), so a taken port refuses fleetd's start with one line, and a guard restart never
loses the port: connections wait in the kernel's backlog while a new guard comes up. The
settings and the control token come in the environment (never on the command line, which
every local user can read). The guard ends when fleetd does (its parent changes), on
SIGTERM after the streams in flight end (at most ``GRACE_S``), and never touches the engine.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import socket
import sys
import threading
from collections.abc import Sequence

import uvicorn

from hwcheck.threads import run_in_thread
from serving.guard.app import GuardApp
from serving.guard.settings import SETTINGS_ENV, TOKEN_ENV, GuardSettings

GRACE_S = 5
PARENT_CHECK_S = 1.0
BACKLOG = 2048

log = logging.getLogger("fleetd.guard")


def _bound(address: str) -> socket.socket:
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(port)))
    sock.listen(BACKLOG)
    return sock


def _socket(fd: int | None, address: str | None) -> socket.socket:
    if fd is not None:
        return socket.socket(fileno=fd)
    return _bound(address or "127.0.0.1:0")


def _watch_parent(server: uvicorn.Server, parent: int) -> None:
    """End the guard when fleetd is gone (a kill -9 of fleetd leaves no orphan listening)."""
    stop = threading.Event()
    while not stop.wait(PARENT_CHECK_S):
        if os.getppid() != parent:
            log.warning("guard: fleetd (pid %d) is gone: stopping", parent)
            server.should_exit = True
            return


def _loop() -> str:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until SIGTERM/SIGINT or until the parent (fleetd) ends."""
    parser = argparse.ArgumentParser(prog="python -m serving.guard", description=__doc__)
    parser.add_argument("--listen-fd", type=int, help="the public socket, bound by fleetd")
    parser.add_argument("--listen", help="HOST:PORT to bind when run by hand")
    parser.add_argument("--control-fd", type=int, help="the loopback control socket")
    parser.add_argument("--control", help="HOST:PORT of the control socket when run by hand")
    parser.add_argument("--engine-url", help="the engine's base URL until fleetd says otherwise")
    parser.add_argument("--watch-parent", action="store_true", help="end when the parent ends")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s", stream=sys.stderr)
    try:
        settings = GuardSettings.model_validate(json.loads(os.environ.get(SETTINGS_ENV) or "{}"))
    except ValueError as exc:
        print(f"guard: bad settings in {SETTINGS_ENV}: {exc}".splitlines()[0], file=sys.stderr)
        return 2
    token = os.environ.pop(TOKEN_ENV, "") or secrets.token_urlsafe(32)
    public = _socket(args.listen_fd, args.listen or settings.listen)
    control = _socket(args.control_fd, args.control)
    control_address = control.getsockname()[:2]
    app = GuardApp(settings, control_address, token, args.engine_url)
    config = uvicorn.Config(
        app,
        loop=_loop(),
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level="warning",
        server_header=False,
        timeout_graceful_shutdown=GRACE_S,
        timeout_keep_alive=60,  # agents send the next turn within a minute
    )
    server = uvicorn.Server(config)
    if args.watch_parent:
        parent_pid = os.getppid()
        run_in_thread("parent", lambda: _watch_parent(server, parent_pid), log=log)
    host, port = public.getsockname()[:2]
    log.info(
        "guard %d listening on %s:%s (control %s:%s)", os.getpid(), host, port, *control_address
    )
    server.run(sockets=[public, control])
    return 0
