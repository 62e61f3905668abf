"""fleetd's view of the host truth: facts, PCIe error counters and the host baseline.

The cheap readings (BAR1, max clocks, the replay counter) come with every NVML snapshot;
the file reads, the bootloader (grubby) and NVML's P2P matrix cost more and change only
at a reboot or an install, so they are read once a minute, and at once after a new boot.
The PCIe error counters of each poll go into a window of a few minutes, from which
``pcie_errors`` judges how fast they climb. Everything runs on the poll thread.

The baseline in force is ``<state-dir>/host-baseline.toml`` (recorded by fleetd at its
first start, when the config holds no ``[host]`` facts of its own) with the config's
``[host]`` keys winning key by key.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from daemon.config import Settings
from daemon.statedir import StateDir
from daemon.store import Store
from daemon.store.writer import StoreWriter
from hwcheck.atomic import atomic_write
from hwcheck.host import HostSources
from hwcheck.hostfacts.baseline import (
    BaselineFileError,
    HostBaseline,
    baseline_toml,
    load_baseline_file,
    merge_baseline,
    record_baseline,
)
from hwcheck.hostfacts.counters import counter_sample
from hwcheck.hostfacts.document import host_document
from hwcheck.hostfacts.model import DeviceAer, HostFacts, PcieCounterSample
from hwcheck.hostfacts.next_boot import wrong_next_boot
from hwcheck.model import EventKind, RigSnapshot, Severity
from serving.recipe.parallel import tensor_parallel_size
from serving.recipe.recipe import Recipe

log = logging.getLogger("fleetd")

FACTS_EVERY_S = 60.0  # file reads, the bootloader, the P2P matrix
COUNTER_WINDOW_S = 300.0  # the span PCIe error rates are judged over

RecordEvent = Callable[[EventKind, Severity, str], None]


@dataclass(frozen=True)
class HostInputs:
    """What the host checks of one poll judge."""

    facts: HostFacts | None
    baseline: HostBaseline
    counters: tuple[PcieCounterSample, ...]
    tensor_parallel_size: int

    def check_fields(self) -> dict[str, Any]:
        """The ``CheckInput`` fields these fill."""
        return {
            "host": self.facts,
            "baseline": self.baseline,
            "pcie_counters": self.counters,
            "tensor_parallel_size": self.tensor_parallel_size,
        }


@dataclass(frozen=True)
class HostStatus:
    """What the status document shows of the host: the ``host`` section, and the facts read."""

    facts: HostFacts | None
    section: dict[str, Any]


@dataclass
class _State:
    facts: HostFacts | None = None
    facts_at_s: float = float("-inf")
    baseline: HostBaseline | None = None  # recorded with the pins (None: before loading)
    facts_document: dict[str, Any] | None = None  # the status form of ``facts``
    counters: deque[PcieCounterSample] = field(default_factory=deque)
    baseline_checked: bool = False
    snapshot: RigSnapshot | None = None  # the last poll's (a fresh read of the facts needs one)


class HostWatch:
    """Host facts, counter window and baseline for fleetd's polls and its status."""

    def __init__(
        self,
        host: HostSources,
        pins: HostBaseline,
        state_dir: Path,
        *,
        record_event: RecordEvent,
        tensor_parallel_size: Callable[[], int] = lambda: 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._host = host
        self._pins = pins
        self._path = StateDir(state_dir).host_baseline
        self._record_event = record_event
        self._tensor_parallel_size = tensor_parallel_size
        self._clock = clock
        self._lock = threading.Lock()
        self._state = _State()

    def new_boot(self) -> None:
        """A reboot: read the facts at the next poll, and count errors afresh."""
        with self._lock:
            self._state.facts_at_s = float("-inf")
            self._state.counters.clear()

    def on_poll(self, snapshot: RigSnapshot) -> HostInputs:
        """This poll's host inputs (re-reading the facts when a minute has passed)."""
        now_s = self._clock()
        with self._lock:
            state = self._state
            due = now_s - state.facts_at_s >= FACTS_EVERY_S
        facts = self._read_facts(snapshot) if due else None
        with self._lock:
            state.snapshot = snapshot
            if due:
                state.facts, state.facts_at_s = facts, now_s
                state.facts_document = None
            replay = [(c.pci_bus_id, c.pcie_replay_count) for c in snapshot.cards if not c.lost]
            aer = () if facts is None else facts.aer
            state.counters.append(counter_sample(snapshot.monotonic_s, replay, aer))
            while (
                state.counters
                and state.counters[0].monotonic_s < snapshot.monotonic_s - COUNTER_WINDOW_S
            ):
                state.counters.popleft()
            current = state.facts
            counters = tuple(state.counters)
        if current is not None:
            self._ensure_baseline(snapshot, current)
        return HostInputs(current, self.baseline(), counters, self._tensor_parallel_size())

    def baseline(self) -> HostBaseline:
        """The baseline in force: the recorded one with the config's pins winning."""
        with self._lock:
            return self._state.baseline or self._pins

    def wrong_next_boot(self) -> str | None:
        """The default boot entry when it is not the baseline kernel, read now (None: fine).

        Read afresh, not from the minute-old facts: a person who just fixed the entry and
        confirms the reboot must not be refused on what was true a minute ago.
        """
        with self._lock:
            snapshot, facts = self._state.snapshot, self._state.facts
        if snapshot is not None:
            facts = self._read_facts(snapshot) or facts
        return wrong_next_boot(facts, self.baseline())

    def wrong_next_boot_known(self) -> str | None:
        """The same judgement on the facts already read (each poll's words; no file read)."""
        with self._lock:
            facts = self._state.facts
        return wrong_next_boot(facts, self.baseline())

    def aer_counters(self) -> tuple[DeviceAer, ...]:
        """The AER counters last read (cards and the ports above them), for ``/metrics``."""
        with self._lock:
            return () if self._state.facts is None else self._state.facts.aer

    def status(self) -> HostStatus:
        """The status document's ``host`` section and the facts each card's bus fields read."""
        with self._lock:
            facts = self._state.facts
            host = self._state.facts_document
            if host is None:  # built once per read of the facts, not at every render
                host = host_document(facts, self._state.baseline or self._pins, 1)
                self._state.facts_document = host
        return HostStatus(facts, {**host, "tensor_parallel_size": self._tensor_parallel_size()})

    # -- reading and recording ----------------------------------------------------------

    def _read_facts(self, snapshot: RigSnapshot) -> HostFacts | None:
        if self._host.host_facts is None:
            return None
        try:
            return self._host.host_facts(snapshot)
        except Exception:  # a reader bug must not cost the hardware picture
            log.exception("reading the host facts failed; the host checks wait for the next try")
            return None

    def _ensure_baseline(self, snapshot: RigSnapshot, facts: HostFacts) -> None:
        """Load the recorded baseline once; record one when there is none anywhere."""
        with self._lock:
            if self._state.baseline_checked:
                return
            self._state.baseline_checked = True
        try:
            recorded = load_baseline_file(self._path)
        except BaselineFileError as exc:
            log.error("%s; the host checks judge only the config's [host] keys", exc)
            return
        if recorded is None and not self._pins.recorded and snapshot.cards:
            recorded = self._record(snapshot, facts)
        baseline = merge_baseline(recorded, self._pins)
        with self._lock:
            self._state.baseline = baseline
            self._state.facts_document = None

    def _record(self, snapshot: RigSnapshot, facts: HostFacts) -> HostBaseline | None:
        known_good = self._host.known_good_baseline
        now = datetime.now(UTC)
        baseline = known_good() if known_good is not None else record_baseline(snapshot, facts, now)
        try:
            atomic_write(
                self._path,
                "# Recorded by fleetd at its first start: this rig's "
                "known-good host.\n# Keys of the config's [host] table win over "
                "these.\n" + baseline_toml(baseline),
            )
        except OSError as exc:
            log.error("cannot write the host baseline %s: %s", self._path, exc.strerror or exc)
            return baseline
        message = (
            f"host baseline recorded ({self._path}): kernel {baseline.kernel_release or 'unknown'}, "
            f"{len(baseline.cards)} cards"
        )
        log.info("%s", message)
        self._record_event(EventKind.DAEMON, Severity.INFO, message)
        return baseline


def build_host_watch(
    host: HostSources,
    settings: Settings,
    state_dir: Path,
    writer: StoreWriter,
    store: Store,
    recipe: Callable[[], Recipe | None],
) -> HostWatch:
    """fleetd's host watch: events through the store writer, the TP size of ``recipe()``.

    ``recipe`` is asked each time: the profile in force changes with ``fleetctl serve``.
    """
    return HostWatch(
        host,
        settings.host,
        state_dir,
        record_event=lambda *event: writer.submit(partial(store.record_event, *event), writes=True),
        tensor_parallel_size=lambda: tensor_parallel_size(recipe()),
    )
