"""Is a TCP port free on an address, and which one is: asked by really binding.

The linter warns when a recipe's port is taken; the daemon resolves a recipe's
``port = 0`` to a free loopback port. Both bind a socket rather than guess from
``/proc/net/tcp``, so the answer is the kernel's.
"""

from __future__ import annotations

import errno
import socket


def _family(host: str) -> socket.AddressFamily:
    info = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return info[0][0]


def port_in_use(host: str, port: int) -> bool:
    """True when something already listens on ``host:port``.

    ``SO_REUSEADDR`` is set so a port held only by connections in TIME_WAIT counts as
    free, as it will for the engine. Errors other than "address in use" (an address that
    is not on this host, a name that does not resolve) are raised as ``OSError``.
    """
    family = _family(host)
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
            raise
    return False


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free on ``host`` a moment ago (the kernel's pick for port 0)."""
    with socket.socket(_family(host), socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
    return port
