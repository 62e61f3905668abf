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
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from apscheduler.events import EVENT_JOB_ERROR, JobExecutionEvent
from apscheduler.schedulers.background import BackgroundScheduler

from daemon.alerts.service import AlertService
from daemon.api.server import ApiServer, url_host
from daemon.api.services import DaemonServices
from daemon.api.sim_control import SimControl, reboot_simulated_host
from daemon.canaries.diag import build_diag
from daemon.canaries.service import CanaryService
from daemon.canaries.wiring import EngineWatch, watch_engine
from daemon.config import Settings, xid_catalogue
from daemon.config_secrets import config_secret_values
from daemon.engine.guard import GuardService
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
from daemon.rig.readings import ReadingSources
from daemon.rig.status_document import view_verdict
from daemon.rig.xidpath import FollowerThread, XidPath
from daemon.sdnotify import Notifier
from daemon.service_loop import ServiceLoop, sample_until_judged
from daemon.statedir import StateDir
from daemon.store import Store, StoreError
from daemon.store.keyvalue import CARD_FAULT_HISTORY
from daemon.store.writer import StoreWriter, store_remedy
from daemon.token import ensure_token
from hwcheck.checks import kernel_log as kernel_log_check
from hwcheck.cuda_probe import SubprocessCudaProber
from hwcheck.host import HostSources
from hwcheck.model import EventKind, Severity
from hwcheck.resources import HostResources
from hwcheck.sim.rig import SimulatedRig
from hwcheck.threads import CrashBoard
from recovery.controller import RecoveryController
from recovery.facts import Trigger
from serving.guard.supervisor import EngineView
from serving.profiles import ProfileSet
from serving.recipe.masking import KnownSecrets
from serving.recipe.recipe import Recipe
from serving.runtime.foreign_containers import RuntimeContainers
from serving.sim.images import ImageStore
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
        guard_sockets: tuple[socket.socket, socket.socket] | None = None,
        sim_engine_args: Sequence[str] = (),
    ) -> None:
        """Build every part, in the order each needs the ones before it; nothing runs yet.

        The store first (everything records into it), then the rig's picture and the Xid
        path, the process around them (API, watchdog loop, alerts), recovery, the engine
        it drives, the parts beside the engine (bring-up, canaries, host watch, memory
        test), what the API serves, and last the poll that feeds them all.
        """
        self.settings = settings
        self.state_dir = state_dir
        self.host = host
        self.sim = sim
        self._sim_engine_args = tuple(sim_engine_args)
        self.notifier = notifier
        self.catalogue = xid_catalogue(settings)
        self._stop = threading.Event()
        # Every background thread reports a crash here; the watchdog then asks for a restart.
        self.crashes = CrashBoard()
        store_url = settings.store.url or _private_sqlite_url(StateDir(state_dir))
        self.store = Store.open(store_url)
        self.token = ensure_token(state_dir)
        self._build_rig(store_url)
        self._build_process(api or ApiServer(settings.web.listen))  # build_daemon binds it first
        self._build_recovery()
        self.engine: EngineService | None = None  # the judge reads its state: none until built
        self.engine = self._build_engine(
            profiles or (None if recipe is None else ProfileSet.single(recipe))
        )
        if sim is not None and self.engine is not None:
            sim.attach_engine(engine_load(self.engine))  # its cards show the engine's load
        self._build_beside_engine()
        self.guard = self._build_guard(guard_sockets)
        self.services = self._build_services()
        self.poller = self._build_poller()
        self.poll_durations = DurationHistogram()
        self.metrics = DaemonMetrics(
            self.monitor,
            lambda: None if self.engine is None else self.engine.supervisor.status(),
            lambda: self.follower.alive() and self.follower.health.down_for_s() is None,
            self.latch_state.in_force,
            self.poll_durations,
            canaries=None if self.canaries is None else self.canaries.metrics,
            pcie_aer=self.host_watch.aer_counters,
            guard=None if self.guard is None else self.guard.metrics,
            profile_cards=lambda: None if self.engine is None else self.engine.profile_cards(),
        )

    # -- building (in __init__'s order) -------------------------------------------------
    def _build_rig(self, store_url: str) -> None:
        """The rig's live picture, the store writer, the power caps and the Xid path."""
        settings, host, poll = self.settings, self.host, self.settings.poll
        self.monitor = RigMonitor(
            host.boot_id(),
            settings.rig.brake_sustained_samples,
            stale_after_s=STALE_AFTER_POLLS * poll.interval_s + poll.nvml_timeout_s,
        )
        self.writer = StoreWriter(
            lambda error: store_remedy(store_url, error),
            stuck_after_s=max(STORE_STUCK_MIN_S, STALE_AFTER_POLLS * poll.interval_s),
            on_crash=self.crashes.report,
        )
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
            on_crash=self.crashes.report,
        )

    def _build_process(self, api: ApiServer) -> None:
        """The scheduler, the API server, the watchdog loop and the alerts."""
        self.scheduler = BackgroundScheduler(timezone=UTC)
        self.api = api
        self._loop = ServiceLoop(
            self.monitor,
            self.api,
            self.follower,
            self.settings.poll,
            self.notifier,
            self._stop,
            self.crashes,
        )
        # A stored event or latch change re-renders the status at once, not at the next poll.
        self.store.add_news_listener(self.api.state_changed)
        # The latch in force: its one holder, in memory (status, verdict, alerts, /metrics).
        self.latch_state = LatchState(LatchFile(StateDir(self.state_dir).latch), self.store)
        self.alerts = AlertService(
            self.settings.alerts,
            self.store,
            rig=self.settings.rig.display_name(),
            external_url=f"http://{url_host(self.api.host)}:{self.api.port}",
            latch=self.latch_state.in_force,  # the latch in force: never waits on the store
            on_crash=self.crashes.report,
        )

    def _build_recovery(self) -> None:
        """The rig's verdict, the latch in force and the recovery controller with its ports."""
        settings, host = self.settings, self.host
        self.judge = RigJudge(
            self.monitor,
            self.latch_state.in_force,
            lambda: None if self.engine is None else self.engine.state()[0].value,
            self.api.state_changed,
            lambda: None if self.engine is None else self.engine.recipe_cards(),
        )
        self.recovery_memory = RecoveryMemory(self.store)
        self.rig_view = MonitorRig(self.monitor, self.recovery_memory, self._rejudge_checks)
        self.audit = StoreAudit(self.store, settings.recovery.dry_run)
        self.host_commands = host_commands(
            settings,
            self.sim is not None,
            self.simulate_reboot,
            self._wrong_next_boot,
        )
        self.recovery = RecoveryController(
            settings.recovery,
            autostart=settings.serving.autostart,
            rig=self.rig_view,
            latch=StoreLatch(
                self.latch_state,
                self.recovery_memory,
                lambda: self.monitor.view().boot_id,
                self._latch_changed,
                self.writer.submit,
            ),
            audit=self.audit,
            prober=host.cuda_prober or SubprocessCudaProber(),
            host=self.host_commands,
            history=StoreDocument(self.store, CARD_FAULT_HISTORY, self.writer.submit),
            catch_up=self.follower.catch_up,
            on_crash=self.crashes.report,
        )
        self.xid_path.add_listener(self.recovery.on_xid)

    def _build_engine(self, profiles: ProfileSet | None) -> EngineService | None:
        """The engine recovery drives (None on a rig without a recipe)."""
        # The simulated container runtime and its images (IDs, digests, a rebuild).
        self.images = None if self.sim is None else ImageStore(StateDir(self.state_dir).sim_images)
        self.sim_containers = (
            None if self.sim is None else SimulatedContainers(self.sim, self.images)
        )
        if profiles is None:
            return None
        # Masked in every engine log line fleetd serves (each launch adds its own).
        secrets = KnownSecrets(
            {self.token, *config_secret_values(self.settings, self.alerts.sinks)}
        )
        return wire_engine(
            profiles,
            self.settings,
            self.state_dir,
            self.store,
            self.monitor,
            self.host,
            self.recovery,
            rig_cards=self.rig_view.cards,
            containers=self.sim_containers,
            known_secrets=secrets,
            defer=self.writer.submit,
            on_crash=self.crashes.report,
            sim_engine_args=None if self.sim is None else self._sim_engine_args,
        )

    def _build_beside_engine(self) -> None:
        """The bring-up after a boot, the engine's watchers, the host watch, the memory test."""
        settings, host = self.settings, self.host
        self.bring_up = BringUp(
            self.recovery,
            lambda: self.monitor.view().results,
            self.caps,
            host.gpu,
            apply_caps=settings.rig.apply_power_caps,
            judge=self._judge_now,
        )
        self.watch: EngineWatch | None = None
        if self.engine is not None:
            self.watch = watch_engine(
                settings,
                self.store,
                self.engine,
                self.monitor,
                self.sim_containers or RuntimeContainers(),
                self.images,
                self.recovery.on_canary_failure,
                on_crash=self.crashes.report,
            )
        self.canaries: CanaryService | None = None if self.watch is None else self.watch.canaries
        self.host_watch = build_host_watch(
            host,
            settings,
            self.state_dir,
            self.writer,
            self.store,
            lambda: None if self.engine is None else self.engine.recipe,
        )
        held = self.recovery.starts.cards_held
        self.diag = build_diag(
            self.store, self.monitor, host, self.engine, held, self._rejudge_checks
        )

    def _build_guard(
        self, sockets: tuple[socket.socket, socket.socket] | None
    ) -> GuardService | None:
        """The traffic guard's keeper, when ``[guard]`` is configured (its sockets bound)."""
        if sockets is None:
            return None
        return GuardService(
            self.settings.guard,
            sockets,
            self.store,
            self.writer.submit,
            self._guard_engine_view,
            tick_s=self.settings.poll.interval_s,
            on_crash=self.crashes.report,
        )

    def _build_services(self) -> DaemonServices:
        """What the API and fleetctl read and ask of fleetd."""
        sim = self.sim
        return DaemonServices(
            self.store,
            self.monitor,
            self.engine,
            caps=self.caps,
            gpu=self.host.gpu,
            follower=self.follower,
            token=self.token,
            loopback_only=is_loopback(self.api.host),
            sim=SimControl(sim, self.simulate_reboot) if sim is not None else None,
            recovery=self.recovery,
            canaries=self.canaries,
            rig=self.settings.rig,
            host_watch=self.host_watch,
            latch_in_force=self.latch_state.in_force,
            audit_rows=self.audit.last,
        )

    def _build_poller(self) -> RigPoller:
        """The poll, fed by every part above; fleetd's own checks get their parts' readings."""
        readings = ReadingSources(
            kernel_log=self.follower.health.reading,
            store=self.writer.reading,
            canaries=None if self.canaries is None else self.canaries.reading,
            memtest=self.diag.reading,
            host_commands=self.host_commands.reading,
        )
        poller = RigPoller(
            self.settings,
            self.host,
            self.monitor,
            self.store,
            self.writer,
            self.caps,
            self.follower,
            own_gpu_pids=self.services.own_gpu_pids,
            on_new_boot=self._on_new_boot,
            on_polled=self._polled,
            record_metrics=None if self.watch is None else self.watch.poll,
            readings=readings,
            host_watch=self.host_watch,
            recovery_inputs=lambda: (self.recovery_memory.probes, self.recovery_memory.waiver),
            rig_now=self.judge.rig_now,
            resources=self._resources,
        )
        poller.add_snapshot_listener(self.recovery.on_snapshot)
        return poller

    # -- helpers ----------------------------------------------------------------------
    def _guard_engine_view(self) -> EngineView:
        """What the guard is told each tick: the engine's URL, state and profile."""
        if self.engine is None:
            return EngineView(None, None, None)
        status = self.engine.supervisor.status()
        return EngineView(status.url, status.state.value, self.engine.profile)

    def _wrong_next_boot(self) -> str | None:
        """The host watch's judgement of the default boot entry (built after recovery)."""
        return self.host_watch.wrong_next_boot()

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

    def _kernel_log_changed(self) -> None:
        """The follower went down or came back: status says so now, not at the next poll."""
        self.monitor.put_result(kernel_log_check.judge(self.follower.health.reading()))
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
        boot_id = self.monitor.view().boot_id
        # The first write: a store that cannot write (a full disk) ends the start here, in
        # one line, before any thread has begun to report the same fault its own way.
        rebooted = track_boot(self.store, boot_id)
        self.alerts.start()
        self.api.start(
            create_app(
                self.services,
                metrics=self.metrics,
                alerts=self.alerts,
                canary=self.canaries,
                allowed_hosts=self._allowed_hosts(),
                diag=self.diag,
                traffic=self.guard,
                builds=None if self.watch is None else self.watch.builds_api,
            ),
            on_crash=self.crashes.report,
        )
        self.latch_state.load(boot_id)
        self.monitor.new_boot(boot_id, self.store.xids_for_boot(boot_id, self.catalogue))
        self.recovery_memory.load(boot_id)
        self.recovery.new_boot(boot_id)
        if self.watch is not None:
            self.watch.load()
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
        if self.guard is not None:
            self.guard.start()
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

    def _stop_engine_on_exit(self) -> None:
        """``[serving] stop_on_exit``: recovery stops the engine cleanly before fleetd exits."""
        if not self.settings.serving.stop_on_exit or self.engine is None:
            return  # the engine outlives fleetd
        try:
            answer = self.recovery.request_stop(Trigger.SHUTDOWN, "fleetd")
        except Exception as exc:  # the exit goes on; the engine is left as it is, said so
            log.error("the engine could not be stopped on exit: %s", exc)
            return
        if not answer.stopped:
            log.warning("the engine did not stop on exit: %s", answer.why_not)

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
        steps: list[tuple[str, Callable[[], object]]] = [
            ("the jobs", lambda: self.scheduler.running and self.scheduler.shutdown(wait=True)),
            ("the canaries", self.canaries.stop if self.canaries else lambda: None),
            # The guard's last usage is stored before the writer closes.
            ("the traffic guard", self.guard.stop if self.guard else lambda: None),
            ("the store writer", lambda: self.writer.close(STORE_DRAIN_S)),  # follower still on
            ("the kernel-log follower", self.follower.stop),
            ("the engine", self._stop_engine_on_exit),  # only with [serving] stop_on_exit
            ("recovery", self.recovery.close),
            ("the engine service", self.services.close_serving),
            ("the API", self.api.stop),
            ("the alerts", self.alerts.stop),  # after the last events; the outbox keeps the rest
            ("the stop event", self._record_stop),
            ("the store", self.store.close),
            ("the host sources", self.host.close),
            ("the notify socket", self.notifier.close),
        ]
        for what, step in steps:  # one line for a step that fails (a full disk), never more
            try:
                step()
            except Exception as exc:  # after a failed start its one line has said it all
                level = logging.WARNING if announce else logging.DEBUG
                log.log(level, "shutting down %s failed: %s", what, str(exc).splitlines()[0])

    def _record_stop(self) -> None:
        self.store.record_event(EventKind.DAEMON, Severity.INFO, f"fleetd stopped (pid {_pid()})")


def _pid() -> int:
    return os.getpid()
