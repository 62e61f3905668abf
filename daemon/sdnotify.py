"""systemd's notify protocol (``Type=notify``) in a dozen lines of stdlib.

Datagrams go to ``$NOTIFY_SOCKET`` (a leading ``@`` means the abstract namespace). Sends
never block: a peer that does not read makes ``send`` fail with ``EAGAIN`` and the daemon
carries on; each distinct failure is logged once, not per message.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping

log = logging.getLogger(__name__)


class Notifier:
    """Sends ``READY=1``, ``WATCHDOG=1``, ``STATUS=...`` and ``STOPPING=1``."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        raw = env.get("NOTIFY_SOCKET", "")
        self._address: str | bytes | None = None
        if raw.startswith("@"):
            self._address = b"\0" + raw[1:].encode()
        elif raw.startswith("/"):
            self._address = raw
        self._sock: socket.socket | None = None
        self._failed_with: str | None = None
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        own = not pid or pid == str(os.getpid())
        self.watchdog_interval_s: float | None = (
            int(usec) / 2_000_000 if usec.isdecimal() and int(usec) > 0 and own else None
        )

    @property
    def enabled(self) -> bool:
        """True when systemd (or a test peer) listens."""
        return self._address is not None

    def send(self, *lines: str) -> bool:
        """Send one datagram of ``KEY=value`` lines; False when it could not be sent."""
        if self._address is None:
            return False
        if self._sock is None:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._sock.setblocking(False)
        payload = "\n".join(lines).encode()
        try:
            self._sock.sendto(payload, self._address)
        except OSError as exc:
            reason = exc.__class__.__name__
            if reason != self._failed_with:
                log.warning("sd_notify: cannot send to NOTIFY_SOCKET (%s); continuing", exc)
                self._failed_with = reason
            return False
        self._failed_with = None
        return True

    def ready(self, status: str) -> bool:
        """``READY=1`` with a first status line."""
        return self.send("READY=1", f"STATUS={status}")

    def watchdog(self) -> bool:
        """One watchdog keep-alive."""
        return self.send("WATCHDOG=1")

    def status(self, text: str) -> bool:
        """A one-line ``STATUS=``."""
        return self.send(f"STATUS={text.splitlines()[0] if text else ''}")

    def stopping(self) -> bool:
        """``STOPPING=1`` at the start of shutdown."""
        return self.send("STOPPING=1", "STATUS=shutting down")

    def close(self) -> None:
        """Close the socket."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
