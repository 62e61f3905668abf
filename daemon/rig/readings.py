"""Where fleetd's own readings come from: its parts hand them in, the checks judge them.

The ``kernel_log``, ``store``, ``engine_output``, ``memtest`` and ``reboot_command`` checks are pure checks
of the registry (``hwcheck.checks``) like the hardware ones; what fleetd adds is only
their readings (``hwcheck.checks.readings``), taken at each judgement from the part that
keeps each one. A part that fails to give its reading costs only its own check (logged
once per new error): the hardware picture still comes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from hwcheck.checks.readings import (
    CanaryReading,
    HostCommandsReading,
    KernelLogReading,
    MemtestReading,
    Readings,
    StoreReading,
)

log = logging.getLogger("fleetd")

R = TypeVar("R")


class ReadingSources:
    """fleetd's parts that keep a reading (``None`` where this fleetd has no such part)."""

    def __init__(
        self,
        *,
        kernel_log: Callable[[], KernelLogReading] | None = None,
        store: Callable[[], StoreReading] | None = None,
        canaries: Callable[[], CanaryReading] | None = None,
        memtest: Callable[[], MemtestReading] | None = None,
        host_commands: Callable[[], HostCommandsReading | None] | None = None,
    ) -> None:
        self.kernel_log = kernel_log
        self.store = store
        self.canaries = canaries
        self.memtest = memtest
        self.host_commands = host_commands
        self._logged: dict[str, str] = {}  # the last error logged, per reading

    def read(self) -> Readings:
        """Every reading now; one a part fails to give is left out (its check says nothing)."""
        return Readings(
            kernel_log=self._take("kernel_log", self.kernel_log),
            store=self._take("store", self.store),
            canaries=self._take("canaries", self.canaries),
            memtest=self._take("memtest", self.memtest),
            host_commands=self._take("host_commands", self.host_commands),
        )

    def _take(self, name: str, source: Callable[[], R] | None) -> R | None:
        if source is None:
            return None
        try:
            reading = source()
        except Exception as exc:
            error = f"{exc.__class__.__name__}: {exc}"
            if self._logged.get(name) != error:
                log.exception("the %s reading failed; its check is left out until it works", name)
                self._logged[name] = error
            return None
        if self._logged.pop(name, None) is not None:
            log.warning("the %s reading works again", name)
        return reading
