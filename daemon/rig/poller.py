"""One poll of the rig: read the cards, keep the caps, run the checks, queue the writes.

The live picture goes to the monitor first (it never waits on the store); the store
writes go to the store writer's thread. A failing poll is logged once per new error,
not once per poll: a broken host at a short interval must not flood the journal.
Snapshot listeners (recovery's card-fault watch) see every snapshot after the checks;
polled listeners (the rig's verdict, the ``STATUS=`` line) run after each poll or rejudge.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial

from daemon.config import Settings
from daemon.rig.caps import CapKeeper, reading_is_stale
from daemon.rig.host_watch import HostInputs, HostWatch
from daemon.rig.monitor import RigMonitor
from daemon.rig.passport import bench_results
from daemon.rig.readings import ReadingSources
from daemon.rig.xidpath import FollowerThread
from daemon.store import Store, StoreError
from daemon.store.writer import StoreWriter
from hwcheck.advice import RigNow
from hwcheck.backend import BackendUnavailable
from hwcheck.checks import CheckInput, run_checks
from hwcheck.checks import nvml as nvml_check
from hwcheck.checks import store as store_check
from hwcheck.cuda_results import ProbeRound
from hwcheck.host import HostSources
from hwcheck.model import (
    CheckResult,
    DeviceHolder,
    EventKind,
    LatchWaiver,
    PciDevice,
    RigSnapshot,
    Severity,
)
from hwcheck.resources import HostResources

log = logging.getLogger("fleetd")

HOLDER_SCAN_EVERY_S = 30.0

SnapshotListener = Callable[[RigSnapshot], None]
# The engine's and the latch's state now: each fault's step is worded for it.
RigNowSource = Callable[[], RigNow]
# Recovery's part of the checks' input: the last CUDA probe round and a person's waiver.
RecoveryInputs = Callable[[], tuple[ProbeRound | None, LatchWaiver | None]]


class Rejudge:
    """A request to judge the checks again now: what they read changed between polls.

    Asked by parts built before the poll (recovery's rig view after a clear or a probe,
    the passports, the memory test); the poller subscribes its ``rejudge`` where it is
    built, and the API its re-render after it.
    """

    def __init__(self) -> None:
        self._listeners: list[Callable[[], None]] = []

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` on each request, in the order added (on the asker's thread)."""
        self._listeners.append(listener)

    def __call__(self) -> None:
        """Judge again now: every listener, in order."""
        for listener in self._listeners:
            listener()


class RigPoller:
    """The poll job and what it remembers between polls (holders scan, store health)."""

    def __init__(
        self,
        settings: Settings,
        host: HostSources,
        monitor: RigMonitor,
        store: Store,
        writer: StoreWriter,
        caps: CapKeeper,
        follower: FollowerThread,
        *,
        own_gpu_pids: Callable[[], set[int]],
        on_new_boot: Callable[[str], None],
        record_metrics: Callable[[], None] | None = None,
        readings: ReadingSources | None = None,
        host_watch: HostWatch | None = None,
        recovery_inputs: RecoveryInputs | None = None,
        rig_now: RigNowSource = RigNow,
        resources: Callable[[], HostResources | None] | None = None,
        out_of_service: Callable[[], Mapping[str, str]] | None = None,
    ) -> None:
        self._settings = settings
        self._host = host
        self._out_of_service = out_of_service or dict
        self._monitor = monitor
        self._store = store
        self._writer = writer
        self._caps = caps
        self._follower = follower
        self._own_gpu_pids = own_gpu_pids
        self._on_new_boot = on_new_boot
        self._polled_listeners: list[Callable[[], None]] = []
        self._record_metrics = record_metrics
        # fleetd's own readings (kernel log, store, canaries, memtest) for its own checks.
        self._readings = readings or ReadingSources(
            kernel_log=follower.health.reading, store=writer.reading
        )
        self._host_watch = host_watch
        self._host_inputs: HostInputs | None = None  # the last poll's, for a rejudge
        self._recovery_inputs = recovery_inputs or (lambda: (None, None))
        self._rig_now = rig_now
        self._resources = resources or (lambda: None)
        self._listeners: list[SnapshotListener] = []
        self._store_severity = Severity.OK
        self._error_logged: str | None = None
        self._pci_devices: list[PciDevice] = []
        self._holders: list[DeviceHolder] = []
        self._holders_at_s = float("-inf")
        self._kernel_module_version: str | None = None
        # Held for a whole poll; a simulated reboot takes it so no poll sees half a boot.
        self.lock = threading.Lock()

    def add_snapshot_listener(self, listener: SnapshotListener) -> None:
        """Call ``listener(snapshot)`` after every successful poll (on the poll's thread)."""
        self._listeners.append(listener)

    def add_polled_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after each poll that judged (or found NVML down) and rejudge."""
        self._polled_listeners.append(listener)

    def _on_polled(self) -> None:
        for listener in self._polled_listeners:
            listener()

    def poll(self) -> None:
        """One poll; errors are reported in the status and logged once per new error."""
        with self.lock:
            try:
                self._poll_once()
            except Exception as exc:
                error = f"{exc.__class__.__name__}: {exc}"
                self._monitor.poll_failed(error)
                if error != self._error_logged:
                    log.error("poll failed: %s (fleetd keeps polling)", error, exc_info=True)
                    self._error_logged = error
                return
            if self._error_logged is not None:
                log.warning("polls succeed again after: %s", self._error_logged)
                self._error_logged = None

    def _poll_once(self) -> None:
        boot_id = self._host.boot_id()
        if boot_id != self._monitor.view().boot_id:
            self._on_new_boot(boot_id)
        try:
            snapshot = self._host.gpu.snapshot()
        except BackendUnavailable as exc:
            self._on_nvml_down(exc)
            return
        self._on_nvml_answered()
        if self._settings.rig.apply_power_caps and any(map(self._caps.off_target, snapshot.cards)):
            try:
                applied = self._caps.apply(snapshot, actor="fleetd")
            except StoreError as exc:  # the cap may be set; its audit record is not
                self._writer.record_failure(exc)
                applied = []
            if reading_is_stale(applied):
                snapshot = self._host.gpu.snapshot()
        window = self._monitor.add_sample(snapshot)
        now_s = time.monotonic()
        if now_s - self._holders_at_s >= HOLDER_SCAN_EVERY_S:
            self._pci_devices = self._host.pci_devices()
            self._kernel_module_version = self._host.kernel_module_version()
            self._holders = self._host.device_holders(frozenset(self._own_gpu_pids()))
            self._holders_at_s = now_s
        if self._host_watch is not None:
            self._host_inputs = self._host_watch.on_poll(snapshot)
        results = self._judge(window)
        self._monitor.set_results(results)  # the live picture first: it never waits on the store
        self._writer.submit(partial(self._store_poll, snapshot, results), writes=True)
        for listener in self._listeners:
            try:
                listener(snapshot)
            except Exception:
                log.exception("a snapshot listener failed")
        self._on_polled()

    def _judge(self, window: Sequence[RigSnapshot]) -> list[CheckResult]:
        """Every check on ``window`` (the last polls), with the daemon's own beside them."""
        probes, waiver = self._recovery_inputs()
        host = self._host_inputs
        results = run_checks(
            CheckInput(
                samples=window,
                profile=self._settings.rig,
                pci_devices=self._pci_devices,
                xids=self._monitor.xids(),
                holders=self._holders,
                kernel_module_version=self._kernel_module_version,
                probes=probes,
                waiver=waiver,
                rig_now=self._rig_now(),
                readings=self._readings.read(),
                resources=self._resources(),
                **({} if host is None else host.check_fields()),
            )
        )
        for result in results:
            if result.id == store_check.CHECK_ID:
                self._store_changed(result)
        # A card out of service is shown, never paged nor gating (daemon.rig.passport).
        return bench_results(results, window[-1].cards, self._out_of_service())

    def rejudge(self) -> None:
        """The checks again on the readings already taken (no NVML call), now.

        Recovery asks for it when what the checks read changed between polls: a person's
        clear of the latch (what it waives), a probe round.
        """
        with self.lock:
            view = self._monitor.view()
            if not view.samples or view.nvml_down is not None:
                return
            results = self._judge(view.samples)
            self._monitor.replace_results(results)
            self._writer.submit(partial(self._store.record_check_transitions, results), writes=True)
        self._on_polled()

    def _store_poll(self, snapshot: RigSnapshot, results: list[CheckResult]) -> None:
        """One poll's writes, on the store writer's thread."""
        self._store.record_samples(snapshot)  # also keeps the cards table current
        for changed in self._store.record_check_transitions(results):
            log.info(
                "check %s%s is now %s: %s",
                changed.id,
                "" if changed.card is None else f" card {changed.card}",
                changed.severity.value,
                changed.message,
            )
        if self._record_metrics is not None:
            self._record_metrics()
        self._follower.persist_cursor()
        self._follower.flush_events()  # the store answers again: the blind spell's events

    def _store_changed(self, result: CheckResult) -> None:
        """One log line (and, once writable, one event) per change of the ``store`` check."""
        if result.severity is self._store_severity:
            return
        self._store_severity = result.severity
        if result.severity is Severity.CRITICAL:
            log.error("store: %s. Remedy: %s", result.message, result.remedy)
            return
        dropped = self._writer.recovered()
        log.warning("store: writes work again (%d poll(s) were not stored)", dropped)
        message = f"the store could not write for a while: {dropped} poll(s) were not stored"
        self._writer.submit(
            partial(self._store.record_event, EventKind.DAEMON, Severity.WARNING, message),
            writes=True,
        )

    def _on_nvml_down(self, exc: BackendUnavailable) -> None:
        """One log line when NVML goes away (not one traceback per poll); the ``nvml`` check."""
        result = nvml_check.unavailable(exc)
        if self._monitor.nvml_failed(result):
            log.error(
                "NVML unavailable: %s. Remedy: %s. fleetd keeps running and retries every poll",
                result.message,
                result.remedy,
            )
            self._writer.submit(
                partial(self._store.record_check_transitions, [result]), writes=True
            )
        self._on_polled()

    def _on_nvml_answered(self) -> None:
        down_s = self._monitor.nvml_answered()
        if down_s is not None:
            log.warning("NVML answers again after %.0f s unavailable", down_s)
