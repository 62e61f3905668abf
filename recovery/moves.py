"""Who may move the engine: recovery's executors, while they carry a decision out.

Every engine start and stop goes through recovery's controller (a person's start, stop
and restart, a profile switch, the end of a backoff, a fault's latch, the host's reboot,
fleetd's exit), so each is decided once, recorded in the audit trail, and never races the
reboot latch. ``EngineMoves`` makes that a rule the code cannot forget: the executors hold
it while they drive the engine port (``held``), and fleetd's supervisor asks it before
every move a caller requests (``check``), raising ``MoveOutsideRecovery`` for one made
anywhere else.

Why a guard at the mechanics rather than a scan of the source for calls: a scan misses a
call made through another name (an alias, a helper, a new module in another package) and
passes in silence; this guard sits where every move must pass, however it was reached, and
the one way around it is to take recovery's token by name, which a review sees. The moves
a supervisor makes on its own (a probe's verdict, a stop's escalation) are not requests
and are not checked.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class MoveOutsideRecovery(RuntimeError):
    """An engine move asked for outside recovery's executors: a bug, said plainly."""


class EngineMoves:
    """The token recovery's executors hold while they move the engine (per thread)."""

    def __init__(self) -> None:
        self._local = threading.local()

    @contextmanager
    def held(self) -> Iterator[None]:
        """Engine moves on this thread are recovery's until the block ends (re-entrant)."""
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        try:
            yield
        finally:
            self._local.depth = depth

    @property
    def holding(self) -> bool:
        """True on a thread that carries a decision out now."""
        return getattr(self._local, "depth", 0) > 0

    def check(self, move: str) -> None:
        """Raise ``MoveOutsideRecovery`` unless this thread carries a decision out."""
        if not self.holding:
            raise MoveOutsideRecovery(
                f"engine {move} asked for outside recovery: every engine start and stop goes "
                "through recovery's controller (request_start, request_stop)"
            )
