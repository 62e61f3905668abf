"""The test suite's launcher: one process that has imported fleetd and fleetctl, forked per run.

Run as ``python -m tests.support.prefork_server SOCKET`` by ``tests.support.prefork`` (one
per test process, started on its first fleetd). It imports what a running fleetd imports,
then, for each request on the ``SOCK_SEQPACKET`` socket, forks a child that becomes
``fleetd ARGS`` (or ``fleetctl ARGS``) exactly as ``python -m daemon.fleetd ARGS`` would from there on: the
request's stdin, stdout and stderr on 0-2 and every other descriptor closed (``Popen``'s
``close_fds``), the request's environment, directory and umask, default signal handlers,
fresh ``sys.std*`` streams, ``sys.argv``; then ``main()`` runs and the child leaves through
the interpreter's own exit (its threads joined, ``atexit`` run, ``SystemExit``'s code), so a
traceback, an exit code and a signal's death read as a fresh interpreter's would.

Why: a fresh interpreter pays about 0.8 s of CPU importing fleetd before it does anything,
and the suite starts fleetd some two hundred times on a 2-core machine (issue 38). What this
does not reproduce: ``/proc/PID/cmdline`` (this module's), the parent (this process, which
reaps the child and reports its exit), and interpreter flags that act at start-up
(``PYTHON*`` variables, ``-X``): ``tests.support.prefork`` runs those starts the real way.

Replies, one packet each: ``{"pid": N}`` once forked, ``{"exit": CODE}`` when it ended
(``-SIGNUM`` for a signal, as ``Popen.returncode``). EOF on this process's stdin (its
test process gone) ends it.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import io
import json
import os
import select
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

_MAX_REQUEST = 1 << 20


# What a request may run (the probe: tests/test_prefork.py, what a child sees of itself).
PROGRAMS = ("daemon.fleetd", "daemon.fleetctl", "tests.support.prefork_probe")


def _preload() -> None:
    """Import what a started fleetd or fleetctl has imported (the costly part of a start)."""
    import daemon.fleetctl
    import daemon.fleetd
    import daemon.startup
    from daemon.alerts import sinks  # noqa: F401
    from daemon.config_secrets import exposed_secrets  # noqa: F401
    from daemon.ports import reboot  # noqa: F401

    daemon.fleetctl.click_command()  # typer's command tree, built once for every fork
    # What a running fleetd imports later (uvicorn picks its loop and protocols when it
    # starts, httpx its transport on a first request): seen with ``-X importtime``.
    for name in _IMPORTED_LATER:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    _warm_the_store()


def _warm_the_store() -> None:
    """Open and close a throwaway store: what every start's migrations would compute again.

    SQLAlchemy adapts each column type to the dialect and caches it on the type the first
    time a statement is compiled (py-spy: 50 of a start's 220 samples in
    ``TypeEngine.adapt``), so a fork of a launcher that has compiled them once skips it:
    about 0.08 s of CPU off each of the suite's 200-odd fleetd starts. The store is closed
    before any fork, so no child inherits its connections.
    """
    import tempfile

    from daemon.store.store import Store

    with tempfile.TemporaryDirectory(prefix="cmpfleet-prefork-") as folder:
        Store.open(f"sqlite:///{folder}/warm.db").close()


_IMPORTED_LATER = (
    "httpcore._backends.anyio",
    "httpcore._backends.sync",
    "httpcore._async",
    "httpcore._sync",
    "uvloop",
    "uvicorn.loops.uvloop",
    "uvicorn.protocols.http.httptools_impl",
    "uvicorn.protocols.websockets.websockets_impl",
    "uvicorn.protocols.websockets.wsproto_impl",
    "anyio.streams.memory",
    "anyio.streams.stapled",
    "anyio.streams.tls",
    "pydantic.v1",
    "encodings.idna",
)


def _listen(path: str) -> socket.socket:
    """The request socket, bound before the imports: a request made meanwhile waits in line."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(128)
    return listener


def _serve(listener: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """Answer requests until this process is told to go; returns only in a forked child."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, socket.socket] = {}
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        readable, _, _ = select.select([listener, wake_r, 0], [], [], 5.0)
        if 0 in readable and not os.read(0, 1):
            os._exit(0)  # the test process is gone; its fleetds are its teardown's
        if wake_r in readable:
            os.read(wake_r, 4096)
        _reap(children)
        if listener not in readable:
            continue
        conn, _ = listener.accept()
        try:
            message, fds, _flags, _addr = socket.recv_fds(conn, _MAX_REQUEST, 3)
            request = json.loads(message)
        except (OSError, ValueError) as exc:
            conn.close()
            sys.stderr.write(f"prefork: a bad request: {exc}\n")
            continue
        if threading.active_count() != 1:  # a fork beside a thread copies its locks held
            raise SystemExit("prefork: a thread started in the launcher; it cannot fork")
        pid = os.fork()
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for sock in (listener, conn, *children.values()):
                sock.close()
            return request, fds
        for fd in fds:
            os.close(fd)
        test = str((request.get("env") or {}).get("PYTEST_CURRENT_TEST", "-")).split(" ")[0]
        _programs[pid] = f"{request.get('program')} {test}"
        children[pid] = conn
        conn.send(json.dumps({"pid": pid}).encode())


def _reap(children: dict[int, socket.socket]) -> None:
    """Report every child that ended to its requester."""
    while children:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is None:
            continue
        _account(pid, usage)
        with contextlib.suppress(OSError):  # the requester went away first
            conn.send(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode())
        conn.close()


ACCOUNT_VARIABLE = "CMPFLEET_TEST_PREFORK_ACCOUNT"  # a file: a line of CPU seconds per child
_programs: dict[int, str] = {}


def _account(pid: int, usage: Any) -> None:
    """Where the suite's CPU goes: a line per ended child (its own and its reaped children's)."""
    path = os.environ.get(ACCOUNT_VARIABLE)
    program = _programs.pop(pid, "?")
    if path:
        with open(path, "a") as out:
            out.write(f"{program} {usage.ru_utime + usage.ru_stime:.3f}\n")


def _only_std_descriptors() -> None:
    """Close every descriptor above 2, as ``Popen(close_fds=True)`` leaves an exec'd child."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            with contextlib.suppress(OSError):  # the listing's own, closed already
                os.close(fd)


def _stream(fd: int, mode: str, **options: Any) -> io.TextIOWrapper:
    """A text stream on ``fd`` that never closes it (the interpreter's own are so)."""
    binary = open(fd, mode, closefd=False)  # noqa: SIM115 (it lives as long as the process)
    return io.TextIOWrapper(binary, encoding="utf-8", **options)


def _std_streams() -> None:
    """``sys.stdin``/``stdout``/``stderr`` made again for 0-2 as the interpreter makes them."""
    sys.stdin = _stream(0, "rb")
    sys.stdout = _stream(1, "wb", line_buffering=os.isatty(1))
    sys.stderr = _stream(2, "wb", errors="backslashreplace", line_buffering=True)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr


def _become(request: dict[str, Any], fds: list[int]) -> Callable[[], None]:
    """This forked child set up as the requested fleetd; returns its ``main``."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    _only_std_descriptors()
    os.chdir(request["cwd"])
    if request["umask"] != -1:
        os.umask(request["umask"])
    os.environ.clear()
    os.environ.update(request["env"])
    _std_streams()
    program = request["program"]
    if program not in PROGRAMS:
        raise SystemExit(f"prefork: {program!r} is not one of {PROGRAMS}")
    module = importlib.import_module(program)
    sys.argv = [module.__file__, *request["args"]]
    main: Callable[[], None] = module.main
    return main


def _exit_code(code: object) -> int:
    """The status the interpreter exits with for ``SystemExit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    sys.stderr.write(f"{code}\n")
    return 1


def _run_then_exit(entry: Callable[[], None]) -> NoReturn:
    """Run ``entry``, then leave as the interpreter does, less its teardown of every module.

    The interpreter's exit joins the threads left running, runs ``atexit`` (logging's
    flush among them) and flushes the standard streams; those are kept. What it does after
    (freeing the launcher's thousand modules, object by object, copying each page it writes
    to) cost a forked fleetctl more CPU than the command itself: skipped with ``os._exit``.
    """
    code = 0
    try:
        entry()
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        code = -signal.SIGINT  # the interpreter dies by SIGINT then (below)
    except BaseException:  # printed as the interpreter prints it
        traceback.print_exc()
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # the non-daemon threads, joined
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = 120  # what the interpreter exits with when it cannot flush stdout
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


if __name__ == "__main__":
    requests = _listen(sys.argv[1])
    _preload()
    gc.freeze()  # out of the collector's sight: a child's collections never touch (copy) them
    request, fds = _serve(requests)
    entry = _become(request, fds)
    del request, fds
    _run_then_exit(entry)
