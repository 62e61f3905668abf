"""What callers ask of the supervisor's loop: one frozen dataclass per command.

Callers on any thread wrap a command in a ``Request`` and put it on the loop's queue; the
loop ``match``es on the command's type. The data each command needs travels with it as
typed fields, so nothing is looked up by name or parsed back out of a string.
"""

from __future__ import annotations

import enum
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from serving.runtime.launchers import EngineHandle
from serving.runtime.start_kind import StartFor


@dataclass(frozen=True)
class Start:
    """Launch the engine now (the decision to was made by whoever asked)."""

    reason: str = "started by request"
    kind: StartFor = StartFor.PERSON


@dataclass(frozen=True)
class Stop:
    """A stop with no restart; ``hold_reason`` is what the status shows afterwards."""

    reason: str
    hold_reason: str | None = None


@dataclass(frozen=True)
class Restart:
    """Stop, then start (a person's restart; ``RESTART``: recovery's, counted in the total)."""

    reason: str = "restart requested"
    kind: StartFor = StartFor.PERSON


@dataclass(frozen=True)
class RestartAfter:
    """The answer to an ended run: wait ``delay_s`` (``backoff``), then report it due."""

    delay_s: float
    reason: str


@dataclass(frozen=True)
class Hold:
    """The answer to an ended run: the breaker holds the engine (``held``)."""

    reason: str


@dataclass(frozen=True)
class StayStopped:
    """The answer to an ended run or a backoff's end: ``stopped``, with the reason shown."""

    reason: str


@dataclass(frozen=True)
class Adopt:
    """Adopt the engine a previous fleetd launched, if it still runs."""


@dataclass(frozen=True)
class ClearHold:
    """A person acknowledges the crash breaker: ``held`` becomes ``stopped``."""


@dataclass(frozen=True)
class Exited:
    """The watcher saw ``handle``'s engine end."""

    handle: EngineHandle


@dataclass(frozen=True)
class Close:
    """Stop supervising (the engine keeps running)."""


Command = (
    Start | Stop | Restart | RestartAfter | Hold | StayStopped | Adopt | ClearHold | Exited | Close
)


@dataclass(frozen=True)
class Request:
    """A command on its way to the loop, with the future its sender may wait on."""

    command: Command
    result: Future[Any] = field(default_factory=Future, compare=False)


class Later(enum.Enum):
    """A handler's answer meaning "the result comes later" (a stop in progress)."""

    PENDING = "pending"
