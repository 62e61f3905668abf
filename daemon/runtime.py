"""fleetd's wiring: host sources, store, jobs, follower, API server and systemd notify.

Lifecycle: ``start()`` opens everything and returns once the first poll is stored and
the API answers (then ``READY=1``); ``run()`` is the main loop (watchdog pings, status
lines) until ``request_stop()``; ``shutdown()`` stops jobs, the follower and the API and
flushes the store. The engine is not stopped unless ``[serving] stop_on_exit``.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import httpx
import uvicorn
from apscheduler.events import EVENT_JOB_ERROR, JobExecutionEvent
from apscheduler.schedulers.background import BackgroundScheduler

from daemon.api_services import DaemonServices
from daemon.boot import track_boot
from daemon.canaries import CanaryService, build_canaries
from daemon.caps import CapKeeper
from daemon.config import Settings, xid_catalogue
from daemon.engine_service import EngineService
from daemon.monitor import RigMonitor
from daemon.sdnotify import Notifier
from daemon.simcontrol import SimControl
from daemon.statedir import StateDir
from daemon.store import Store, StoreError
from daemon.storewriter import StoreWriter, store_remedy
from daemon.token import ensure_token
from daemon.xidpath import FollowerThread, XidPath
from hwcheck.backend import BackendUnavailable
from hwcheck.checks import CheckInput, run_checks
from hwcheck.checks import nvml as nvml_check
from hwcheck.host import HostSources
from hwcheck.model import (
    CheckResult,
    DeviceHolder,
    EventKind,
    PciDevice,
    RigSnapshot,
    Severity,
    worst_severity,
)
from hwcheck.sim.rig import SimulatedRig
from serving.recipe.recipe import Recipe
from web.app import create_app

log = logging.getLogger("fleetd")

HOLDER_SCAN_EVERY_S = 30.0
# A reading older than this many poll intervals (plus the NVML call timeout, the longest
# a healthy poll may take) is stale: status says UNKNOWN instead of the old verdict.
STALE_AFTER_POLLS = 3
# A store write waiting longer than this (or this many intervals) makes ``store`` critical.
STORE_STUCK_MIN_S = 5.0
STORE_DRAIN_S = 10.0
READY_TIMEOUT_S = 60.0
STARTUP_SAMPLE_GAP_S = 0.5


def split_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (IPv6 in brackets allowed) -> (host, port)."""
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and localhost."""
    return host in {"localhost", "::1"} or host.startswith("127.")


def _private_sqlite_url(files: StateDir) -> str:
    """The default store, its file created 0600 first (SQLite alone would make it 0644)."""
    try:
        files.create_private_file(files.db)
    except OSError as exc:
        raise StoreError(f"store {files.db}: cannot create it: {exc.strerror or exc}") from None
    return files.db_url


class Daemon:
    """One running fleetd."""

    def __init__(
        self,
        settings: Settings,
        state_dir: Path,
        host: HostSources,
        sim: SimulatedRig | None,
        notifier: Notifier,
        recipe: Recipe | None = None,
    ) -> None:
        self.settings = settings
        self.state_dir = state_dir
        self.host = host
        self.sim = sim
        self.notifier = notifier
        self.catalogue = xid_catalogue(settings)
        url = settings.store.url or _private_sqlite_url(StateDir(state_dir))
        self.store = Store.open(url)
        self.token = ensure_token(state_dir)
        poll = settings.poll
        self.monitor = RigMonitor(
            host.boot_id(),
            settings.rig.brake_sustained_samples,
            stale_after_s=STALE_AFTER_POLLS * poll.interval_s + poll.nvml_timeout_s,
        )
        self.writer = StoreWriter(
            store_remedy(url),
            stuck_after_s=max(STORE_STUCK_MIN_S, STALE_AFTER_POLLS * poll.interval_s),
        )
        self._store_severity = Severity.OK
        self._poll_error_logged: str | None = None
        self._stop = threading.Event()
        self._pci_devices: list[PciDevice] = []
        self._holders: list[DeviceHolder] = []
        self._holders_at_s = float("-inf")
        self._kernel_module_version: str | None = None
        self._poll_lock = threading.Lock()
        self.caps = CapKeeper(
            host.gpu,
            self.store,
            settings.rig.power_cap_w,
            settings.rig.power_cap_tolerance_w,
            dry_run=settings.recovery.dry_run,
        )
        self.xid_path = XidPath(self.store, self.monitor, self._card_index_of)
        self.follower = FollowerThread(
            host,
            self.catalogue,
            self.store,
            self.xid_path,
            on_health_change=self._kernel_log_changed,
        )
        self.scheduler = BackgroundScheduler(timezone=UTC)
        listen_host, listen_port = split_listen(settings.web.listen)
        self.listen_host, self.listen_port = listen_host, listen_port
        self._server: uvicorn.Server | None = None
        self._server_thread: threading.Thread | None = None
        self.engine: EngineService | None = None
        if recipe is not None:
            self.engine = EngineService(recipe, settings, state_dir, self.store, self.monitor, host)
        self.canaries: CanaryService | None = None
        if self.engine is not None:
            self.canaries = build_canaries(settings.canary, self.store, self.engine, self.monitor)
        self.services = DaemonServices(
            self.store,
            self.monitor,
            self.engine,
            caps=self.caps,
            gpu=host.gpu,
            follower=self.follower,
            token=self.token,
            loopback_only=is_loopback(listen_host),
            sim=SimControl(sim, self.simulate_reboot) if sim is not None else None,
            canaries=self.canaries,
        )

    # -- helpers ----------------------------------------------------------------------
    def _card_index_of(self, pci_bus_id: str | None) -> int | None:
        latest = self.monitor.view().latest
        if latest is None or pci_bus_id is None:
            return None
        for card in latest.cards:
            if card.pci_bus_id == pci_bus_id:
                return card.index
        return None

    def _kernel_log_changed(self) -> None:
        """The follower went down or came back: status says so now, not at the next poll."""
        self.monitor.put_result(self.follower.health.result())

    # -- jobs -------------------------------------------------------------------------
    def poll(self) -> None:
        """Read the cards, run the checks, hand the writes to the store writer.

        A failing poll is logged once per new error (with its traceback the first time),
        not once per poll: a broken host at a short interval must not flood the journal.
        """
        with self._poll_lock:
            try:
                self._poll_once()
            except Exception as exc:
                error = f"{exc.__class__.__name__}: {exc}"
                self.monitor.poll_failed(error)
                if error != self._poll_error_logged:
                    log.error("poll failed: %s (fleetd keeps polling)", error, exc_info=True)
                    self._poll_error_logged = error
                return
            if self._poll_error_logged is not None:
                log.warning("polls succeed again after: %s", self._poll_error_logged)
                self._poll_error_logged = None

    def _poll_once(self) -> None:
        boot_id = self.host.boot_id()
        if boot_id != self.monitor.view().boot_id:
            self._on_new_boot(boot_id)
        try:
            snapshot = self.host.gpu.snapshot()
        except BackendUnavailable as exc:
            self._on_nvml_down(exc)
            return
        self._on_nvml_answered()
        if self.settings.rig.apply_power_caps and any(map(self.caps.off_target, snapshot.cards)):
            try:
                applied = self.caps.apply(snapshot, actor="fleetd")
            except StoreError as exc:  # the cap may be set; its audit record is not
                self.writer.record_failure(exc)
                applied = []
            if any(r.outcome == "applied" for r in applied):
                snapshot = self.host.gpu.snapshot()
        window = self.monitor.add_sample(snapshot)
        now_s = time.monotonic()
        if now_s - self._holders_at_s >= HOLDER_SCAN_EVERY_S:
            self._pci_devices = self.host.pci_devices()
            self._kernel_module_version = self.host.kernel_module_version()
            own_pids = self.services.own_gpu_pids()
            self._holders = [h for h in self.host.device_holders() if h.pid not in own_pids]
            self._holders_at_s = now_s
        results = run_checks(
            CheckInput(
                samples=window,
                profile=self.settings.rig,
                pci_devices=self._pci_devices,
                xids=self.monitor.xids(),
                holders=self._holders,
                kernel_module_version=self._kernel_module_version,
            )
        )
        results.append(self.follower.health.result())  # the daemon's own kernel_log check
        results.append(self._store_check())
        self.monitor.set_results(results)  # the live picture first: it never waits on the store
        self.writer.submit(partial(self._store_poll, snapshot, results))
        self.notifier.status(self.summary())

    def _store_poll(self, snapshot: RigSnapshot, results: list[CheckResult]) -> None:
        """One poll's writes, on the store writer's thread."""
        self.store.record_samples(snapshot)  # also keeps the cards table current
        for changed in self.store.record_check_transitions(results):
            log.info(
                "check %s%s is now %s: %s",
                changed.id,
                "" if changed.card is None else f" card {changed.card}",
                changed.severity.value,
                changed.message,
            )
        if self.engine is not None:
            self.engine.record_metrics()
        self.follower.persist_cursor()
        self.follower.flush_events()  # the store answers again: the blind spell's events

    def _store_check(self) -> CheckResult:
        """The ``store`` check; one log line (and, once writable, one event) per change."""
        result = self.writer.health()
        if result.severity is self._store_severity:
            return result
        self._store_severity = result.severity
        if result.severity is Severity.CRITICAL:
            log.error("store: %s. Remedy: %s", result.message, result.remedy)
            return result
        dropped = self.writer.recovered()
        log.warning("store: writes work again (%d poll(s) were not stored)", dropped)
        message = f"the store could not write for a while: {dropped} poll(s) were not stored"
        self.writer.submit(
            partial(self.store.record_event, EventKind.DAEMON, Severity.WARNING, message)
        )
        return result

    def _on_nvml_down(self, exc: BackendUnavailable) -> None:
        """One log line when NVML goes away (not one traceback per poll); the ``nvml`` check."""
        result = nvml_check.unavailable(exc)
        if self.monitor.nvml_failed(result):
            log.error(
                "NVML unavailable: %s. Remedy: %s. fleetd keeps running and retries every poll",
                result.message,
                result.remedy,
            )
            self.writer.submit(partial(self.store.record_check_transitions, [result]))
        self.notifier.status(self.summary())

    def _on_nvml_answered(self) -> None:
        down_s = self.monitor.nvml_answered()
        if down_s is not None:
            log.warning("NVML answers again after %.0f s unavailable", down_s)

    def _on_new_boot(self, boot_id: str) -> None:
        """The host rebooted while we ran (the simulated rig can): start a fresh boot."""
        log.warning("boot id changed to %s: the host rebooted", boot_id)
        self.follower.stop()
        self._begin_boot(boot_id)

    def _begin_boot(self, boot_id: str) -> None:
        """Record the new boot, count its Xids afresh, follow its kernel log (follower stopped)."""
        track_boot(self.store, boot_id)
        self.monitor.new_boot(boot_id)
        self.follower.start()

    def simulate_reboot(self) -> str:
        """``POST /api/v1/sim/reboot``: reboot the simulated host as a real reboot looks.

        The follower is stopped first so no record of the new boot is read under the old
        boot id; the new boot is then handled at once, not at the next poll.
        """
        if self.sim is None:
            raise RuntimeError("not simulating")
        with self._poll_lock:
            self.follower.stop()
            boot_id = self.sim.reboot()
            self._begin_boot(boot_id)
        return boot_id

    def rollup(self) -> None:
        """Roll raw samples into 1-minute rollups and prune both windows (a store job)."""
        self.writer.submit(self._rollup_now)

    def _rollup_now(self) -> None:
        self.store.rollup_and_prune(
            datetime.now(UTC),
            raw_retention_s=self.settings.store.raw_retention_h * 3600,
            rollup_retention_s=self.settings.store.rollup_retention_days * 86400,
        )

    def summary(self) -> str:
        """One line for ``STATUS=`` and the logs."""
        view = self.monitor.view()
        latest = view.latest
        cards = len(latest.cards) if latest else 0
        known = (view.polls and view.stale_reason is None) or view.nvml_down is not None
        overall = worst_severity(list(view.results)).value if known else "unknown"
        serving = self.services.serving_state()
        return f"{cards} cards {overall}; engine {serving}; {len(view.xids)} Xid since boot"

    # -- lifecycle --------------------------------------------------------------------
    def start(self) -> None:
        """Open everything; returns once the first poll is stored and the API answers."""
        self._start_api()
        track_boot(self.store, self.monitor.view().boot_id)
        self.monitor.new_boot(
            self.monitor.view().boot_id,
            self.store.xids_for_boot(self.monitor.view().boot_id, self.catalogue),
        )
        self.store.record_event(EventKind.DAEMON, Severity.INFO, f"fleetd started (pid {_pid()})")
        try:
            self.poll()
        except Exception as exc:  # the daemon still runs and reports why (3 a.m. rule)
            log.error("first poll failed: %s; fleetd keeps running and retries", exc)
        # Read this boot's kernel log so far before READY, so the first status counts it.
        if self.follower.start():
            try:
                self.poll()
            except Exception as exc:
                log.error("poll failed: %s; fleetd keeps running and retries", exc)
        self._sample_until_judged()
        self.writer.flush(READY_TIMEOUT_S)  # READY=1 only once the first polls are stored
        self.scheduler.add_listener(self._job_failed, EVENT_JOB_ERROR)
        self.scheduler.add_job(
            self.poll,
            "interval",
            seconds=self.settings.poll.interval_s,
            id="poll",
            max_instances=1,
            coalesce=True,
        )
        self.scheduler.add_job(
            self.rollup,
            "interval",
            seconds=self.settings.poll.rollup_interval_s,
            id="rollup",
            max_instances=1,
            coalesce=True,
        )
        self.scheduler.start()
        if self.engine is not None:
            # A stop asked for during start-up must not leave a cold-starting engine behind.
            autostart = self.settings.serving.autostart and not self._stop.is_set()
            self.engine.open(autostart=autostart)
        if self.canaries is not None:
            self.canaries.start()
        self._wait_api_ready()
        self.notifier.ready(self.summary())
        log.info(
            "fleetd ready on http://%s:%s (%s)",
            self.listen_host,
            self.listen_port,
            "simulated rig" if self.sim else "real rig",
        )

    def _sample_until_judged(self) -> None:
        """Take the few quick samples a sustained check needs before anything starts.

        A power brake is only critical when seen in ``brake_sustained_samples`` samples in a
        row: without them, an autostart would launch the engine on braked cards.
        """
        needed = self.settings.rig.brake_sustained_samples
        for _ in range(2 * needed):
            if len(self.monitor.view().samples) >= needed or self._stop.is_set():
                return
            self._stop.wait(STARTUP_SAMPLE_GAP_S)
            try:
                self.poll()
            except Exception as exc:
                log.error("poll failed: %s; fleetd keeps running and retries", exc)

    def _job_failed(self, event: JobExecutionEvent) -> None:
        # APScheduler has already logged the traceback; the next run still happens.
        log.error("job %s failed: %s (next run still scheduled)", event.job_id, event.exception)

    def _start_api(self) -> None:
        # Bind here, synchronously, so "address already in use" stops the start with a
        # clear line instead of a dead server thread behind a READY=1.
        family = socket.AF_INET6 if ":" in self.listen_host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.listen_host, self.listen_port))
        except OSError as exc:
            sock.close()
            raise RuntimeError(
                f"cannot listen on {self.settings.web.listen}: {exc.strerror}"
            ) from None
        sock.listen(128)
        sock.set_inheritable(False)
        config = uvicorn.Config(
            create_app(self.services, canary=self.canaries),
            log_level="warning",
            access_log=False,
            lifespan="off",
        )
        self._server = uvicorn.Server(config)
        server = self._server
        self._server_thread = threading.Thread(
            target=lambda: server.run(sockets=[sock]), name="api", daemon=True
        )
        self._server_thread.start()

    def _wait_api_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        url = f"http://{_url_host(self.listen_host)}:{self.listen_port}/healthz"
        while time.monotonic() < deadline:
            if self._server_thread is not None and not self._server_thread.is_alive():
                raise RuntimeError(
                    f"the API could not listen on {self.settings.web.listen} (port in use?)"
                )
            try:
                if httpx.get(url, timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            self._stop.wait(0.05)
        raise RuntimeError(f"the API did not answer on {url} within {READY_TIMEOUT_S:.0f} s")

    def healthy(self) -> bool:
        """True while polls keep happening, the API thread lives and the kernel log is read."""
        return self.unhealthy_reason() is None

    def unhealthy_reason(self) -> str | None:
        """Why WATCHDOG=1 is withheld (so systemd restarts fleetd), or None when healthy.

        A kernel-log follower down for longer than ``[poll] kernel_log_down_watchdog_s``
        (0: never) counts: it retries on its own, so a spell that long needs a restart.
        """
        age_s = self.monitor.last_attempt_age_s()
        limit_s = max(30.0, 5 * self.settings.poll.interval_s + self.settings.poll.nvml_timeout_s)
        if self._server_thread is None or not self._server_thread.is_alive():
            return "the API thread is not running"
        if age_s is None or age_s >= limit_s:
            return "polls stopped"
        down_for_s = self.follower.health.down_for_s()
        watchdog_s = self.settings.poll.kernel_log_down_watchdog_s
        if down_for_s is not None and watchdog_s > 0 and down_for_s > watchdog_s:
            return f"the kernel-log follower has been down for {down_for_s:.0f} s"
        return None

    def run(self) -> None:
        """Main loop: watchdog pings (only while healthy) until a stop is requested."""
        interval_s = self.notifier.watchdog_interval_s
        tick_s = min(interval_s, 1.0) if interval_s else 1.0
        next_ping_s = time.monotonic()
        stale_logged = False
        withheld_for: str | None = None
        while not self._stop.wait(tick_s):
            stale = self.monitor.view().stale_reason
            if (stale is not None) != stale_logged:  # one line when it goes stale, one back
                if stale is not None:
                    log.error("status is UNKNOWN: %s", stale)
                else:
                    log.warning("fresh readings again: status is judged again")
                stale_logged = stale is not None
            if interval_s is not None and time.monotonic() >= next_ping_s:
                reason = self.unhealthy_reason()
                if reason is None:
                    self.notifier.watchdog()
                    withheld_for = None
                elif reason != withheld_for:  # one line per reason, not per tick
                    log.error("unhealthy (%s): withholding the watchdog ping", reason)
                    withheld_for = reason
                next_ping_s = time.monotonic() + interval_s

    def request_stop(self) -> None:
        """Ask the main loop to end (safe from a signal handler)."""
        self._stop.set()

    def shutdown(self) -> None:
        """Graceful stop: jobs, follower, API; flush the store. The engine keeps running."""
        self.notifier.stopping()
        log.info("shutting down")
        if self.scheduler.running:
            self.scheduler.shutdown(wait=True)
        if self.canaries is not None:
            self.canaries.stop()
        self.writer.close(STORE_DRAIN_S)  # the last polls' writes, while the follower still runs
        self.follower.stop()
        self.services.close_serving(stop_engine=self.settings.serving.stop_on_exit)
        if self._server is not None:
            self._server.should_exit = True
        if self._server_thread is not None:
            self._server_thread.join(10)
        try:
            self.store.record_event(
                EventKind.DAEMON, Severity.INFO, f"fleetd stopped (pid {_pid()})"
            )
        except StoreError as exc:
            log.warning("the stop event was not stored: %s", exc)
        self.store.close()
        self.host.close()
        self.notifier.close()


def _pid() -> int:
    return os.getpid()


def _url_host(host: str) -> str:
    if host in {"0.0.0.0", ""}:  # noqa: S104 - only turning a wildcard into a probe address
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host
