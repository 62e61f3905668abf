"""fleetd's own readings, typed: what its checks judge beside the rig's samples.

Some checks read no hardware: whether the kernel log is followed, whether the store
writes, what the canaries found on the engine, what the memory test found on each card.
fleetd takes these readings from its own parts (the follower's health, the store
writer, the canary runner, the memory-test verdicts) and hands them in as
``CheckInput.readings``; the checks stay pure functions of what they are given, like the
hardware ones. A reading left out (``None``: ``fleetctl check`` has none, a rig without
an engine has no canaries) means its check reports nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hwcheck.memtest.results import CardMemtest
from hwcheck.memtest.retest import Retest, retest_of
from hwcheck.model import Severity


@dataclass(frozen=True, slots=True)
class BlindSpellReading:
    """A spell without the kernel log: since when, the error, and its length so far (or in all)."""

    since: datetime
    error: str
    length_s: float

    def clock(self) -> str:
        """``HH:MM:SS UTC`` of the start."""
        return f"{self.since.astimezone(UTC):%H:%M:%S} UTC"


@dataclass(frozen=True, slots=True)
class KernelLogReading:
    """The kernel-log follower: its source, a spell in progress, lost records, the last spell.

    ``down``: the follower is down now (``length_s`` so far). ``lost_records``: records
    overwritten in the ring buffer before they were read, this boot. ``last_spell``: the
    last spell that ended this boot (``length_s``: how long the rig was blind).
    """

    source: str
    down: BlindSpellReading | None = None
    lost_records: int = 0
    last_spell: BlindSpellReading | None = None


@dataclass(frozen=True, slots=True)
class StoreFailure:
    """Why the store's writes fail (one line), and for how long they have."""

    error: str
    for_s: float


@dataclass(frozen=True, slots=True)
class StoreReading:
    """The store writer: failing writes, the write in flight, jobs dropped meanwhile.

    ``waiting_s``: how long the write in flight has waited (None: none in flight);
    ``stuck_after_s``: longer than that is a stuck store. ``remedy`` names the file or
    the server (it depends on the configured URL).
    """

    remedy: str
    stuck_after_s: float
    failure: StoreFailure | None = None
    waiting_s: float | None = None
    dropped: int = 0


@dataclass(frozen=True, slots=True)
class CanaryVerdict:
    """One canary's last judged result (``pass|warn|fail``), with the severity it maps to."""

    name: str
    result: str
    severity: Severity
    figure: float | None
    unit: str
    message: str
    advice: str
    ts: datetime


@dataclass(frozen=True, slots=True)
class CanaryReading:
    """The canaries' last judged verdicts, and since when the engine serves (None: it does not)."""

    ready_since: datetime | None
    verdicts: tuple[CanaryVerdict, ...] = ()
    # Verdicts current by another rule: the deep canaries judge the build serving now, so
    # their verdicts from before this engine run still count (a deep round is daily).
    also_current: tuple[CanaryVerdict, ...] = ()
    # The rig's other engines (``[serving] run``), by profile: each judged like this one,
    # so a side engine whose output is wrong moves ``overall`` as the primary's would.
    others: tuple[tuple[str, CanaryReading], ...] = ()


@dataclass(frozen=True, slots=True)
class MemtestVerdict:
    """A card's last memory-test result and when it ran (ISO text, as stored).

    ``minutes``: that run's stress time (None: stored before it was kept).
    """

    result: CardMemtest
    tested_at: str
    minutes: float | None = None

    @property
    def retest(self) -> Retest:
        """What a run must cover to clear this result when it is a failure."""
        return retest_of(self.result, self.minutes)


@dataclass(frozen=True, slots=True)
class MemtestReading:
    """Each tested card's last verdict, by PCI address (kept across restarts and reboots)."""

    verdicts: Mapping[str, MemtestVerdict]

    @classmethod
    def from_stored(cls, stored: Mapping[str, Mapping[str, Any]]) -> MemtestReading:
        """From the store's documents (``CardMemtest`` fields plus ``ts``), by PCI address."""
        return cls(
            {
                address: MemtestVerdict(
                    CardMemtest.from_dict(dict(document)),
                    str(document.get("ts", "")),
                    _minutes(document.get("minutes")),
                )
                for address, document in stored.items()
            }
        )


def _minutes(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


@dataclass(frozen=True, slots=True)
class HostCommandsReading:
    """The host's reboot and power-cycle commands as configured, and why each cannot run.

    ``missing``: one line per configured command whose program this host lacks, naming
    the config key and the program (empty: every configured program is here).
    """

    reboot: str
    missing: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Readings:
    """fleetd's own readings for one judgement; each ``None`` where it has none."""

    kernel_log: KernelLogReading | None = None
    store: StoreReading | None = None
    canaries: CanaryReading | None = None
    memtest: MemtestReading | None = None
    host_commands: HostCommandsReading | None = None
