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
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from apscheduler.events import EVENT_JOB_ERROR, JobExecutionEvent
from apscheduler.schedulers.background import BackgroundScheduler

from daemon.alerts.service import AlertService
from daemon.api.server import ApiServer, url_host
from daemon.api.services import DaemonServices
from daemon.api.sim_control import SimControl, reboot_simulated_host
from daemon.canaries.diag import build_diag
from daemon.canaries.service import CanaryService, build_canaries
from daemon.config import Settings, xid_catalogue
from daemon.config_secrets import config_secret_values
from daemon.engine.resource_needs import ram_needed_mib, resource_paths
from daemon.engine.service import EngineService
from daemon.engine.sim_containers import SimulatedContainers
from daemon.engine.sim_load import engine_load
from daemon.engine.wiring import wire_engine
from daemon.ports.bringup import BringUp
from daemon.ports.latch import LatchFile, LatchState
from daemon.ports.parts import MonitorRig, RecoveryMemory, StoreAudit, StoreDocument, StoreLatch
from daemon.ports.reboot import host_commands
from daemon.rig.boot import track_boot
from daemon.rig.caps import CapKeeper
from daemon.rig.host_watch import build_host_watch
from daemon.rig.judge import RigJudge
from daemon.rig.metrics_source import DaemonMetrics
from daemon.rig.monitor import RigMonitor
from daemon.rig.poller import RigPoller
from daemon.rig.status_document import view_verdict
from daemon.rig.xidpath import FollowerThread, XidPath
from daemon.sdnotify import Notifier
from daemon.service_loop import ServiceLoop, sample_until_judged
from daemon.statedir import StateDir
from daemon.store import Store, StoreError
from daemon.store.keyvalue import CARD_FAULT_HISTORY
from daemon.store.writer import StoreWriter, store_remedy
from daemon.token import ensure_token
from hwcheck.cuda_probe import SubprocessCudaProber
from hwcheck.host import HostSources
from hwcheck.model import CheckResult, EventKind, Severity
from hwcheck.resources import HostResources
from hwcheck.sim.rig import SimulatedRig
from recovery.controller import RecoveryController
from recovery.facts import Trigger
from serving.profiles import ProfileSet
from serving.recipe.masking import KnownSecrets
from serving.recipe.recipe import Recipe
from web.app import create_app
from web.loopback import is_loopback
from web.metrics_model import DurationHistogram

log = logging.getLogger("fleetd")

# A reading older than this many poll intervals (plus the NVML call timeout, the longest
# a healthy poll may take) is stale: status says UNKNOWN instead of the old verdict.
STALE_AFTER_POLLS = 3
# A store write waiting longer than this (or this many intervals) makes ``store`` critical.
STORE_STUCK_MIN_S = 5.0
STORE_DRAIN_S = 10.0
READY_TIMEOUT_S = 60.0


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
        profiles: ProfileSet | None = None,
        api: ApiServer | None = None,
        sim_engine_args: Sequence[str] = (),
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
        self._stop = threading.Event()
        self.caps = CapKeeper(
            host.gpu,
            self.store,
            settings.rig.power_cap_w,
            settings.rig.power_cap_tolerance_w,
            dry_run=settings.recovery.dry_run,
            cap_for=settings.rig.power_cap_for,
        )
        self.xid_path = XidPath(
            self.store, self.monitor, self.monitor.card_index_of, kernel_clock_s=host.kernel_clock_s
        )
        self.follower = FollowerThread(
            host,
            self.catalogue,
            self.store,
            self.xid_path,
            on_health_change=self._kernel_log_changed,
        )
        self.scheduler = BackgroundScheduler(timezone=UTC)
        self.api = api or ApiServer(settings.web.listen)  # build_daemon binds it first
        self._loop = ServiceLoop(
            self.monitor, self.api, self.follower, settings.poll, notifier, self._stop
        )
        # A stored event or latch change re-renders the status at once, not at the next poll.
        self.store.add_news_listener(self.api.state_changed)
        self.alerts = AlertService(
            settings.alerts,
            self.store,
            rig=settings.rig.display_name(),
            external_url=f"http://{url_host(self.api.host)}:{self.api.port}",
            latch=lambda: self.judge.latch.latch,  # the latch in force: never waits on the store
        )
        self.judge = RigJudge(
            self.monitor,
            lambda: None if self.engine is None else self.engine.state()[0].value,
            self.api.state_changed,
            lambda: None if self.engine is None else self.engine.recipe_cards(),
        )
        self.recovery_memory = RecoveryMemory(self.store)
        self.latch_state = LatchState(
            LatchFile(StateDir(state_dir).latch), self.store, self.judge.latch
        )
        rig_view = MonitorRig(self.monitor, self.recovery_memory, self._rejudge_checks)
        self.audit = StoreAudit(self.store, settings.recovery.dry_run)
        self.recovery = RecoveryController(
            settings.recovery,
            autostart=settings.serving.autostart,
            rig=rig_view,
            latch=StoreLatch(
                self.latch_state,
                self.recovery_memory,
                lambda: self.monitor.view().boot_id,
                self._latch_changed,
                self.writer.submit,
            ),
            audit=self.audit,
            prober=host.cuda_prober or SubprocessCudaProber(),
            host=host_commands(settings, sim is not None, self.simulate_reboot),
            history=StoreDocument(self.store, CARD_FAULT_HISTORY, self.writer.submit),
            catch_up=self.follower.catch_up,
        )
        self.xid_path.add_listener(self.recovery.on_xid)
        profiles = profiles or (None if recipe is None else ProfileSet.single(recipe))
        self.engine: EngineService | None = None
        if profiles is not None:
            # Masked in every engine log line fleetd serves (each launch adds its own).
            secrets = KnownSecrets({self.token, *config_secret_values(settings, self.alerts.sinks)})
            self.engine = wire_engine(
                profiles,
                settings,
                state_dir,
                self.store,
                self.monitor,
                host,
                self.recovery,
                rig_cards=rig_view.cards,
                containers=None if sim is None else SimulatedContainers(sim),
                known_secrets=secrets,
                defer=self.writer.submit,
                sim_engine_args=None if sim is None else sim_engine_args,
            )
        if sim is not None and self.engine is not None:
            sim.attach_engine(engine_load(self.engine))  # its cards show the engine's load
        self.bring_up = BringUp(
            self.recovery,
            lambda: self.monitor.view().results,
            self.caps,
            host.gpu,
            apply_caps=settings.rig.apply_power_caps,
            judge=self._judge_now,
        )
        self.canaries: CanaryService | None = None
        if self.engine is not None:
            self.canaries = build_canaries(settings, self.store, self.engine, self.monitor)
        self.host_watch = build_host_watch(
            host,
            settings,
            state_dir,
            self.writer,
            self.store,
            lambda: None if self.engine is None else self.engine.recipe,
        )
        held = self.recovery.starts.cards_held
        self.diag = build_diag(
            self.store, self.monitor, host, self.engine, held, self._rejudge_checks
        )
        self.services = DaemonServices(
            self.store,
            self.monitor,
            self.engine,
            caps=self.caps,
            gpu=host.gpu,
            follower=self.follower,
            token=self.token,
            loopback_only=is_loopback(self.api.host),
            sim=SimControl(sim, self.simulate_reboot) if sim is not None else None,
            recovery=self.recovery,
            canaries=self.canaries,
            rig=self.settings.rig,
            host_watch=self.host_watch,
            latch_in_force=self.judge.latch.get,
            audit_rows=self.audit.last,
        )
        self.poller = RigPoller(
            settings,
            host,
            self.monitor,
            self.store,
            self.writer,
            self.caps,
            self.follower,
            own_gpu_pids=self.services.own_gpu_pids,
            on_new_boot=self._on_new_boot,
            on_polled=self._polled,
            record_metrics=None if self.engine is None else self.engine.record_metrics,
            extra_checks=lambda: [*self._canary_checks(), *self.diag.check_results()],
            host_watch=self.host_watch,
            recovery_inputs=lambda: (self.recovery_memory.probes, self.recovery_memory.waiver),
            rig_now=self.judge.rig_now,
            resources=self._resources,
        )
        self.poller.add_snapshot_listener(self.recovery.on_snapshot)
        self.poll_durations = DurationHistogram()
        self.metrics = DaemonMetrics(
            self.monitor,
            lambda: None if self.engine is None else self.engine.supervisor.status(),
            lambda: self.follower.alive() and self.follower.health.down_for_s() is None,
            self.judge.latch,
            self.poll_durations,
            canaries=None if self.canaries is None else self.canaries.metrics,
            pcie_aer=self.host_watch.aer_counters,
            profile_cards=lambda: None if self.engine is None else self.engine.profile_cards(),
        )

    # -- helpers ----------------------------------------------------------------------
    def _polled(self) -> None:
        """After each poll: the rig's verdict, then one ``STATUS=`` line for systemd."""
        self.judge.rejudge()
        self.notifier.status(self.summary())

    def _latch_changed(self, required: bool) -> None:
        """Recovery set or cleared the latch: the verdict, the picture and the alerts now."""
        self.judge.latch_changed(required)
        self.alerts.engine.wake()

    def _rejudge_checks(self) -> None:
        """Recovery changed what the checks read (a clear, a probe): judge again now."""
        self.poller.rejudge()
        self.api.state_changed()

    def _allowed_hosts(self) -> list[str] | None:
        """A loopback listener's ``Host`` names beside loopback's: this machine's, the config's."""
        if not is_loopback(self.api.host):
            return None  # every request needs the token there: no rebinding to fear
        return [socket.gethostname(), *self.settings.web.allowed_hosts]

    def _resources(self) -> HostResources:
        """The state dir's and the model's filesystems and the RAM, for ``host_resources``."""
        recipe = None if self.engine is None else self.engine.recipe
        paths = resource_paths(self.state_dir, recipe)
        return self.host.resources(paths, ram_needed_mib(recipe))

    def _canary_checks(self) -> list[CheckResult]:
        """Each poll's ``engine_output`` check (only built with an engine)."""
        return [] if self.canaries is None else [self.canaries.check_result()]

    def _kernel_log_changed(self) -> None:
        """The follower went down or came back: status says so now, not at the next poll."""
        self.monitor.put_result(self.follower.health.result())
        self.api.state_changed()

    # -- jobs -------------------------------------------------------------------------
    def poll(self) -> None:
        """One poll (``daemon.rig.poller``), timed for /metrics; then the latch mirror's refresh."""
        began_s = time.monotonic()
        try:
            self.poller.poll()
            self.poll_durations.observe(time.monotonic() - began_s)
        finally:
            self.api.state_changed()  # a failed poll changes the picture too (stale, errors)
        self.writer.submit(self.latch_state.catch_up)

    def _on_new_boot(self, boot_id: str) -> None:
        """The host rebooted while we ran (the simulated rig can): start a fresh boot."""
        log.warning("boot id changed to %s: the host rebooted", boot_id)
        self.follower.stop()
        self._begin_boot(boot_id)

    def _begin_boot(self, boot_id: str) -> None:
        """Record the new boot (clearing the latch), count its Xids afresh, follow its log.

        The follower must be stopped; the bring-up then runs on the recovery worker.
        """
        track_boot(self.store, boot_id)
        self.latch_state.new_boot(boot_id)
        self.monitor.new_boot(boot_id)
        self.host_watch.new_boot()
        self.recovery_memory.new_boot()
        self.recovery.new_boot(boot_id)
        self.follower.start()
        self.recovery.submit(lambda: self._bring_up_now(boot_id))

    def _bring_up_now(self, boot_id: str) -> None:
        if not self._stop.is_set():
            self.bring_up.run(boot_id)

    def simulate_reboot(self) -> str:
        """``POST /api/v1/sim/reboot`` and a confirmed reboot under ``--simulate``."""
        if self.sim is None:
            raise RuntimeError("not simulating")
        return reboot_simulated_host(
            self.sim, self.recovery, self.engine, self.poller.lock, self.follower, self._begin_boot
        )

    def rollup(self) -> None:
        """Roll raw samples into 1-minute rollups and prune both windows (a store job)."""
        self.writer.submit(self._rollup_now)

    def _rollup_now(self) -> None:
        report = self.store.rollup_and_prune(
            datetime.now(UTC),
            raw_retention_s=self.settings.store.raw_retention_h * 3600,
            rollup_retention_s=self.settings.store.rollup_retention_days * 86400,
        )
        if report.minutes_rolled:  # the 24 h chart reads rollups: a kept one is out of date
            self.services.history_cache.rollups_changed()

    def summary(self) -> str:
        """One line for ``STATUS=`` and the logs: the verdict the status serves."""
        view = self.monitor.view()
        latest = view.latest
        cards = len(latest.cards) if latest else 0
        overall = view_verdict(view).overall
        serving = self.services.serving_state()
        return f"{cards} cards {overall}; engine {serving}; {len(view.xids)} Xid since boot"

    # -- lifecycle --------------------------------------------------------------------
    def start(self) -> None:
        """Open everything; returns once the first poll is stored and the API answers."""
        self.alerts.start()
        self.api.start(
            create_app(
                self.services,
                metrics=self.metrics,
                alerts=self.alerts,
                canary=self.canaries,
                allowed_hosts=self._allowed_hosts(),
                diag=self.diag,
            )
        )
        boot_id = self.monitor.view().boot_id
        rebooted = track_boot(self.store, boot_id)
        self.latch_state.load(boot_id)
        self.monitor.new_boot(boot_id, self.store.xids_for_boot(boot_id, self.catalogue))
        self.recovery_memory.load(boot_id)
        self.recovery.new_boot(boot_id)
        self.store.record_event(EventKind.DAEMON, Severity.INFO, f"fleetd started (pid {_pid()})")
        try:
            self.poll()
        except Exception as exc:  # the daemon still runs and reports why (3 a.m. rule)
            log.error("first poll failed: %s; fleetd keeps running and retries", exc)
        # Adopt a running engine before this boot's kernel log is read: an Xid that came
        # while fleetd was down must stop the engine it hit, not a stranger.
        adopted = self.engine is not None and self.engine.open()
        # Read this boot's kernel log so far before READY, so the first status counts it.
        if self.follower.start():
            try:
                self.poll()
            except Exception as exc:
                log.error("poll failed: %s; fleetd keeps running and retries", exc)
        # What a fleetd killed mid-decision owed (issue 22): decided now, engine adopted.
        waiver = self.recovery_memory.waiver
        self.recovery.reconcile(frozenset() if waiver is None else waiver.xid_keys)
        self._sample_until_judged()
        self.writer.flush(READY_TIMEOUT_S)  # READY=1 only once the first polls are stored
        self.scheduler.add_listener(self._job_failed, EVENT_JOB_ERROR)
        for job, every_s in (
            (self.poll, self.settings.poll.interval_s),
            (self.rollup, self.settings.poll.rollup_interval_s),
        ):
            self.scheduler.add_job(
                job, "interval", seconds=every_s, id=job.__name__, max_instances=1, coalesce=True
            )
        self.scheduler.start()
        # A stop asked for during start-up must not leave a cold-starting engine behind.
        if not adopted and not self._stop.is_set():
            self._autostart(rebooted)
        if self.canaries is not None:
            self.canaries.start()
        self.api.wait_ready(self._stop, READY_TIMEOUT_S)
        self.notifier.ready(self.summary())
        log.info(
            "fleetd ready on http://%s:%s (%s)",
            self.api.host,
            self.api.port,
            "simulated rig" if self.sim else "real rig",
        )

    def _autostart(self, rebooted: bool) -> None:
        """After a reboot the whole bring-up; else autostart's decision (logged when no)."""
        if rebooted:
            self.bring_up.run(self.monitor.view().boot_id)
            return
        answer = self.recovery.request_start(Trigger.AUTOSTART, actor="fleetd")
        if self.engine is not None and not answer.started:
            log.warning("not autostarting the engine: %s", answer.why_not)

    def _judge_now(self) -> None:
        """Every check on fresh samples of this boot (the bring-up's step)."""
        self.poll()
        self._sample_until_judged()

    def _sample_until_judged(self) -> None:
        """The few quick samples a sustained check needs before anything starts."""
        sample_until_judged(
            self.monitor, self.poll, self.settings.rig.brake_sustained_samples, self._stop
        )

    def _job_failed(self, event: JobExecutionEvent) -> None:
        # APScheduler has already logged the traceback; the next run still happens.
        log.error("job %s failed: %s (next run still scheduled)", event.job_id, event.exception)

    def healthy(self) -> bool:
        """True while polls keep happening, the API thread lives and the kernel log is read."""
        return self._loop.unhealthy_reason() is None

    def run(self) -> None:
        """Main loop: watchdog pings (only while healthy) until a stop is requested."""
        self._loop.run()

    def request_stop(self) -> None:
        """Ask the main loop to end (safe from a signal handler)."""
        self._stop.set()

    def shutdown(self, announce: bool = True) -> None:
        """Graceful stop: jobs, follower, API; flush the store. The engine keeps running.

        ``announce=False`` after a failed start: its one line has said it all.
        """
        self.notifier.stopping()
        if announce:
            log.info("shutting down")
        if self.scheduler.running:
            self.scheduler.shutdown(wait=True)
        if self.canaries is not None:
            self.canaries.stop()
        self.writer.close(STORE_DRAIN_S)  # the last polls' writes, while the follower still runs
        self.follower.stop()
        self.recovery.close()
        self.services.close_serving(stop_engine=self.settings.serving.stop_on_exit)
        self.api.stop()
        self.alerts.stop()  # after the last events are recorded; the outbox keeps the rest
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
