"""fleetd's composition root: it builds every wing's parts, connects them, starts and stops.

No reaction lives here: a wing's reaction to another's news (a poll ended, the latch moved,
the follower went down, a new boot) is that wing's own method, subscribed below where both
parts exist (docs/architecture.md, "A new reaction to another wing's news").

Lifecycle: ``start()`` opens everything and returns once the first poll is stored and
the API answers (then ``READY=1``); ``run()`` is the main loop (watchdog pings, status
lines) until ``request_stop()``; ``shutdown()`` stops jobs, the follower and the API and
flushes the store. The engine is not stopped unless ``[serving] stop_on_exit``.
"""

from __future__ import annotations

import logging
import os
import platform
import socket
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC
from functools import partial
from pathlib import Path

from apscheduler.events import EVENT_JOB_ERROR, JobExecutionEvent
from apscheduler.schedulers.background import BackgroundScheduler
from prometheus_client.registry import Collector, CollectorRegistry

from daemon.alerts.service import AlertService
from daemon.api.server import ApiServer, url_host
from daemon.api.services import DaemonServices
from daemon.api.sim_control import (
    SimControl,
    end_as_a_reboot_does,
    reboot_simulated_host,
    simulated_host_cannot_reboot,
)
from daemon.bench.wiring import build_bench
from daemon.canaries.diag import build_diag
from daemon.canaries.engines import FleetCanaries, SideCanaries, build_side_canaries
from daemon.canaries.service import CanaryService
from daemon.canaries.wiring import EngineWatch, watch_engine
from daemon.config import Settings, xid_catalogue
from daemon.config_secrets import config_secret_values
from daemon.engine.drain import DrainKeeper
from daemon.engine.fleet import (
    DrainThenStopSides,
    SideEngines,
    build_side_engines,
    engine_series,
    every_engines_cards,
    every_engines_profile_cards,
    share_cards,
    side_state_dir,
)
from daemon.engine.guard import GuardService
from daemon.engine.guard_view import guard_engine_view
from daemon.engine.resource_needs import read_host_resources
from daemon.engine.service import EngineService
from daemon.engine.sim_containers import SimulatedContainers
from daemon.engine.sim_load import engine_load
from daemon.engine.sim_xids import faults_for
from daemon.engine.wiring import wire_engine
from daemon.evidence.archive import CrashArchive
from daemon.evidence.recorder import EvidenceRecorder
from daemon.evidence.wiring import evidence_sources
from daemon.ports.bringup import BringUp
from daemon.ports.engine_lifecycle import autostart, stop_engine_on_exit
from daemon.ports.latch import LatchFile, LatchState
from daemon.ports.new_boot import NewBoot
from daemon.ports.parts import MonitorRig, RecoveryMemory, StoreAudit, StoreDocument, StoreLatch
from daemon.ports.reboot import host_commands
from daemon.rig.boot import track_boot
from daemon.rig.caps import CapKeeper
from daemon.rig.host_watch import build_host_watch
from daemon.rig.judge import RigJudge
from daemon.rig.kernellog_health import put_kernel_log_result
from daemon.rig.metrics_source import rig_collectors
from daemon.rig.monitor import RigMonitor
from daemon.rig.passport import Passports
from daemon.rig.poller import Rejudge, RigPoller
from daemon.rig.readings import ReadingSources
from daemon.rig.rollup_job import RollupJob
from daemon.rig.xidpath import FollowerThread, XidPath
from daemon.sdnotify import Notifier
from daemon.service_loop import ServiceLoop, StatusLine, sample_until_judged
from daemon.statedir import StateDir
from daemon.store import Store, StoreError
from daemon.store.keyvalue import CARD_FAULT_HISTORY
from daemon.store.writer import StoreWriter, store_remedy
from daemon.token import ensure_token
from hwcheck.checks.readings import CanaryReading
from hwcheck.cuda_probe import SubprocessCudaProber
from hwcheck.host import HostSources
from hwcheck.model import EventKind, Severity
from hwcheck.sim.rig import SimulatedRig, SimulationError
from hwcheck.threads import CrashBoard
from recovery.controller import RecoveryController
from recovery.history import FaultHistory
from recovery.ports import AuditTrail
from serving.profiles import ProfileSet
from serving.recipe.masking import KnownSecrets
from serving.recipe.recipe import Recipe
from serving.runtime.foreign_containers import RuntimeContainers
from serving.sim.images import ImageStore
from web.app import create_app
from web.hosts import allowed_hosts
from web.loopback import is_loopback
from web.metrics_canaries import CanariesCollector
from web.metrics_crashes import CrashesCollector
from web.metrics_engine import EngineCollector
from web.metrics_guard import GuardCollector
from web.metrics_host import HostCollector
from web.metrics_recovery import RecoveryCollector
from web.metrics_rig import BuildInfoCollector, poll_duration_histogram

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
        path, the process around them (API, watchdog loop, alerts), recovery (with the host
        watch it asks), the engine it drives, the parts beside the engine (bring-up,
        canaries, passports, memory test), what the API serves, and last the poll that
        feeds them all. Each wing's reaction to another's news is subscribed here, where
        both exist (the wing owns the reaction; this only connects).
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
        self.side_engines = SideEngines()  # and their cards: none until built
        profiles = profiles or (None if recipe is None else ProfileSet.single(recipe))
        self.engine = self._build_engine(profiles)
        # [serving] run's other profiles: an engine each, with its own recovery controller.
        self.side_engines = build_side_engines(
            profiles, settings.serving.run, state_dir, self._new_recovery, self.audit, self._wire
        )
        share_cards(self.engine, self.recovery, self.side_engines)
        for controller in self.side_engines.controllers():
            self.xid_path.add_listener(controller.on_xid)
        if sim is not None and self.engine is not None:
            # its cards show the engine's load
            sim.attach_engine(engine_load(self.engine, StateDir(self.state_dir).sim_engine_load))
            for side in self.side_engines:  # each loads its own cards
                side_files = StateDir(side_state_dir(self.state_dir, side.name))
                sim.attach_engine(engine_load(side.service, side_files.sim_engine_load))
        self._build_beside_engine()
        self.guard = self._build_guard(guard_sockets)
        self.evidence = self._build_evidence()
        if self.guard is not None and self.engine is not None:
            self.engine.attach_guard(self.guard.summary)
        self.drain = DrainKeeper(
            self.store,
            lambda: self.monitor.view().boot_id,
            settings.recovery.drain_grace_s,
            self.guard,
            self.api.state_changed,
        )
        self.recovery.executors.attach_drain(DrainThenStopSides(self.drain, self.side_engines))
        self.services = self._build_services()
        self.bench = build_bench(
            self.store,
            self.engine,
            None if self.watch is None else self.watch.builds,
            self.caps,
            self.host.gpu,
            self.monitor,
            self.latch_state.in_force,
            StateDir(self.state_dir).bench_sweep,
            self.services.status_document,
        )
        self.poller = self._build_poller()
        for controller in self.side_engines.controllers():
            self.poller.add_snapshot_listener(controller.on_snapshot)
        self.services.attach_side_engines(self.side_engines, self.side_canaries.status_entries)
        self.poller.add_snapshot_listener(self.evidence.on_snapshot)
        self.sim_faults = faults_for(
            sim,
            self.engine,
            StateDir(state_dir).sim_cards,
            self.crashes.report,
        )
        if self.sim_faults is not None:
            self.poller.add_snapshot_listener(self.sim_faults.on_snapshot)
        self.poll_durations = poll_duration_histogram()
        self.metrics = CollectorRegistry(auto_describe=False)
        for collector in self._metrics_collectors():
            self.metrics.register(collector)

    def _metrics_collectors(self) -> tuple[Collector, ...]:
        """Each wing's ``/metrics`` collector, reading that wing's memory at scrape time."""
        return (
            *rig_collectors(
                self.monitor,
                lambda: self.follower.alive() and self.follower.health.down_for_s() is None,
                self.poll_durations,
                lambda: every_engines_profile_cards(self.engine, self.side_engines),
            ),
            HostCollector(self.host_watch.aer_counters),
            EngineCollector(
                lambda: None if self.engine is None else self.engine.supervisor.status(),
                lambda: engine_series(self.engine, self.side_engines),
            ),
            CanariesCollector(
                None if self.canaries is None else self.canaries.metrics,
                self.side_canaries.metrics,
            ),
            RecoveryCollector(lambda: self.latch_state.in_force() is not None, self.drain.active),
            CrashesCollector(self.evidence.counts),
            *(() if self.guard is None else (GuardCollector(self.guard.metrics),)),
            BuildInfoCollector(),
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
            on_crash=self.crashes.report,
        )
        # The follower went down or came back: status says so now, not at the next poll.
        self.follower.add_health_listener(
            partial(put_kernel_log_result, self.monitor, self.follower.health)
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
        self.follower.add_health_listener(self.api.state_changed)  # after its check's result
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
        # Host truth: the judge and the host's reboot ask it about the default boot entry.
        self.host_watch = build_host_watch(
            host,
            settings,
            self.state_dir,
            self.writer,
            self.store,
            lambda: None if self.engine is None else self.engine.recipe,
        )
        self.judge = RigJudge(
            self.monitor,
            self.latch_state.in_force,
            lambda: None if self.engine is None else self.engine.state()[0].value,
            self.api.state_changed,
            lambda: every_engines_cards(self.engine, self.side_engines),
            self.host_watch.wrong_next_boot_known,
        )
        self.alerts.engine.add_firing_listener(self.judge.alerts_changed)
        self.rejudge_checks = Rejudge()  # the poller subscribes once built
        self.recovery_memory = RecoveryMemory(self.store)
        self.rig_view = MonitorRig(self.monitor, self.recovery_memory, self.rejudge_checks)
        self.audit = StoreAudit(self.store, settings.recovery.dry_run)
        self.host_commands = host_commands(
            settings,
            self.sim is not None,
            self.simulate_reboot,
            self.host_watch.wrong_next_boot,
            partial(simulated_host_cannot_reboot, self.sim),
        )
        self.latch_port = StoreLatch(
            self.latch_state,
            self.recovery_memory,
            lambda: self.monitor.view().boot_id,
            self.writer.submit,
        )
        # Recovery set or cleared the latch: the verdict, the picture and the alerts now.
        self.latch_port.add_change_listener(self.judge.latch_changed)
        self.latch_port.add_change_listener(self.alerts.engine.latch_changed)
        self._prober = host.cuda_prober or SubprocessCudaProber()
        self.fault_history = FaultHistory(
            StoreDocument(self.store, CARD_FAULT_HISTORY, self.writer.submit)
        )
        self.recovery = self._new_recovery()
        self.xid_path.add_listener(self.recovery.on_xid)

    def _new_recovery(self, audit: AuditTrail | None = None) -> RecoveryController:
        """A recovery controller on the rig's ports (one per engine: ``daemon.engine.fleet``)."""
        return RecoveryController(
            self.settings.recovery,
            autostart=self.settings.serving.autostart,
            rig=self.rig_view,
            latch=self.latch_port,
            audit=self.audit if audit is None else audit,
            prober=self._prober,
            host=self.host_commands,
            history=self.fault_history,
            catch_up=self.follower.catch_up,
            on_crash=self.crashes.report,
        )

    def _build_engine(self, profiles: ProfileSet | None) -> EngineService | None:
        """The engine recovery drives (None on a rig without a recipe)."""
        # The simulated container runtime and its images (IDs, digests, a rebuild).
        self.images = None if self.sim is None else ImageStore(StateDir(self.state_dir).sim_images)
        self.sim_containers = (
            None if self.sim is None else SimulatedContainers(self.sim, self.images)
        )
        if profiles is None:
            return None
        return self._wire(profiles, self.state_dir, self.recovery)

    def _wire(
        self, profiles: ProfileSet, state_dir: Path, recovery: RecoveryController
    ) -> EngineService:
        """An engine service for ``profiles`` keeping its files in ``state_dir``."""
        # Masked in every engine log line fleetd serves (each launch adds its own).
        secrets = KnownSecrets(
            {self.token, *config_secret_values(self.settings, self.alerts.sinks)}
        )
        return wire_engine(
            profiles,
            self.settings,
            state_dir,
            self.store,
            self.monitor,
            self.host,
            recovery,
            rig_cards=self.rig_view.cards,
            containers=self.sim_containers,
            known_secrets=secrets,
            defer=self.writer.submit,
            on_crash=self.crashes.report,
            sim_engine_args=None if self.sim is None else self._sim_engine_args,
            primary=state_dir == self.state_dir,
            sim_images=StateDir(self.state_dir).sim_images,
        )

    def _build_beside_engine(self) -> None:
        """The bring-up after a boot, the engine's watchers, the passports, the memory test."""
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
        # Each side engine's own canaries: its on_fail goes to its own controller.
        self.side_canaries: SideCanaries = build_side_canaries(
            settings,
            self.store,
            self.side_engines,
            self.monitor,
            on_crash=self.crashes.report,
            probe=self.sim_containers or RuntimeContainers(),
        )
        if self.watch is not None:  # GET /api/v1/builds?engine=NAME: a side engine's own
            self.watch.builds_api.attach_sides(self.side_canaries.build_trackers())
        held = self.recovery.starts.cards_held
        self.passports = Passports(self.store, self.monitor, self.rejudge_checks)
        self.diag = build_diag(
            self.store,
            self.monitor,
            host,
            self.engine,
            held,
            self.rejudge_checks,
            rig=settings.rig,
            limits=settings.diag.limits(),
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
            lambda: guard_engine_view(
                self.engine, self.drain, self.side_engines
            ),  # the drain is built after
            tick_s=self.settings.poll.interval_s,
            on_crash=self.crashes.report,
        )

    def _build_evidence(self) -> EvidenceRecorder:
        """The crash black box: told by recovery after each latch and stop, fed by each poll."""
        guard = self.guard
        recorder = EvidenceRecorder(
            self.state_dir,
            self.settings.evidence,
            evidence_sources(
                self.store,
                self.monitor,
                self.engine,
                defer=self.writer.submit,
                known=KnownSecrets(
                    {self.token, *config_secret_values(self.settings, self.alerts.sinks)}
                ),
                booted_kernel=platform.release if self.sim is None else self.sim.booted_kernel,
                guard_sessions=None if guard is None else lambda: guard.overview()["sessions"],
                kernel_records=self.host.kernel_log_history,
                read_rig=self.host.gpu.snapshot,
                sides={side.name: side.service for side in self.side_engines},
            ),
            on_crash=self.crashes.report,
        )
        self.recovery.attach_witness(recorder)
        self.side_engines.attach_witness(recorder)
        return recorder

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
            evidence=self.evidence.status,
            drain=self.drain.document,
        )

    def _poll_engines(self) -> None:
        """Each poll: the primary's metrics and build, then each side engine's build."""
        assert self.watch is not None  # noqa: S101 (wired only with the primary's watch)
        self.watch.poll()
        self.side_canaries.poll_builds()

    def _canary_reading(self) -> CanaryReading:
        """The ``engine_output`` check's reading: the primary's, each side engine's beside it."""
        assert self.canaries is not None  # noqa: S101 (wired only with the primary's canaries)
        return self.side_canaries.beside(self.canaries.reading())

    def _build_poller(self) -> RigPoller:
        """The poll, fed by every part above; fleetd's own checks get their parts' readings.

        Beside it the rollup job, and the ``STATUS=`` line each poll ends with.
        """
        self.status_line = StatusLine(self.monitor, self.services.serving_state, self.notifier)
        self.rollups = RollupJob(
            self.store, self.writer.submit, self.settings.store, self.services.history_cache
        )
        readings = ReadingSources(
            kernel_log=self.follower.health.reading,
            store=self.writer.reading,
            canaries=None if self.canaries is None else self._canary_reading,
            memtest=self.diag.reading,
            host_commands=self.host_commands.reading,
        )
        self.new_boot = NewBoot(
            self.store,
            self.latch_state,
            self.monitor,
            self.host_watch,
            self.recovery_memory,
            self.recovery,
            self.follower,
            self.bring_up,
            self._stop,
            others=self.side_engines,
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
            on_new_boot=self.new_boot.on_new_boot,
            record_metrics=None if self.watch is None else self._poll_engines,
            readings=readings,
            host_watch=self.host_watch,
            recovery_inputs=lambda: (self.recovery_memory.probes, self.recovery_memory.waiver),
            rig_now=self.judge.rig_now,
            resources=partial(read_host_resources, self.host, self.state_dir, self.engine),
            out_of_service=self.passports.marks,
        )
        poller.add_snapshot_listener(self.recovery.on_snapshot)
        # After each poll: the rig's verdict, then one ``STATUS=`` line for systemd.
        poller.add_polled_listener(self.judge.rejudge)
        poller.add_polled_listener(self.status_line.polled)
        # Recovery, a passport or a memory test changed what the checks read: judge again.
        self.rejudge_checks.add_listener(poller.rejudge)
        self.rejudge_checks.add_listener(self.api.state_changed)
        return poller

    # -- helpers ----------------------------------------------------------------------
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

    def simulate_reboot(self) -> str:
        """``POST /api/v1/sim/reboot`` and a confirmed reboot under ``--simulate``."""
        if self.sim is None:
            raise RuntimeError("not simulating")
        self.sim.check_can_reboot()  # refused before any engine ends
        self.side_engines.begin_host_reboot()
        for side in self.side_engines:
            end_as_a_reboot_does(side.service, side.recovery)
        try:
            return reboot_simulated_host(
                self.sim,
                self.recovery,
                self.engine,
                self.poller.lock,
                self.follower,
                self.new_boot.begin_boot,
            )
        except SimulationError:  # the old boot stays: the side engines may restart again
            self.side_engines.end_host_reboot()
            raise

    # -- lifecycle --------------------------------------------------------------------
    def start(self) -> None:
        """Open everything; returns once the first poll is stored and the API answers."""
        boot_id = self.monitor.view().boot_id
        # The first write: a store that cannot write (a full disk) ends the start here, in
        # one line, before any thread has begun to report the same fault its own way.
        rebooted = track_boot(self.store, boot_id)
        self.alerts.start()
        self.evidence.start()
        if self.sim_faults is not None:
            self.sim_faults.start()
        self.api.start(
            create_app(
                self.services,
                metrics=self.metrics,
                alerts=self.alerts,
                canary=self._canary_control(),
                allowed_hosts=allowed_hosts(self.api.host, self.settings.web.allowed_hosts),
                diag=self.diag,
                traffic=self.guard,
                builds=None if self.watch is None else self.watch.builds_api,
                cards=self.passports,
                crashes=CrashArchive(self.evidence),
                bench=None if self.engine is None else self.bench,
                drain=self.drain,
            ),
            on_crash=self.crashes.report,
        )
        self.latch_state.load(boot_id)
        self.monitor.new_boot(boot_id, self.store.xids_for_boot(boot_id, self.catalogue))
        self.recovery_memory.load(boot_id)
        self.recovery.new_boot(boot_id)
        self.side_engines.new_boot(boot_id)
        if self.watch is not None:
            self.watch.load()
        self.store.record_event(EventKind.DAEMON, Severity.INFO, f"fleetd started (pid {_pid()})")
        self.bench.service.recover()  # a sweep cut short by a dead fleetd: its caps put back
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
            (self.rollups.rollup, self.settings.poll.rollup_interval_s),
        ):
            self.scheduler.add_job(
                job, "interval", seconds=every_s, id=job.__name__, max_instances=1, coalesce=True
            )
        self.scheduler.start()
        # A stop asked for during start-up must not leave a cold-starting engine behind.
        if not adopted and not self._stop.is_set():
            now = self.monitor.view().boot_id  # a simulated reboot may have come meanwhile
            engine = self.engine is not None
            autostart(self.bring_up, self.recovery, now, rebooted=rebooted, has_engine=engine)
        if not self._stop.is_set():
            self.side_engines.open()
        if self.canaries is not None:
            self.canaries.start()
        self.side_canaries.start()
        if self.guard is not None:
            self.guard.start()
        self.api.wait_ready(self._stop, READY_TIMEOUT_S)
        self.notifier.ready(self.status_line.summary())
        log.info(
            "fleetd ready on http://%s:%s (%s)",
            self.api.host,
            self.api.port,
            "simulated rig" if self.sim else "real rig",
        )

    def _canary_control(self) -> CanaryService | FleetCanaries | None:
        """What the canary routes ask: the primary's service, or every engine's when several run."""
        engine = self.engine
        if self.canaries is None or engine is None or not len(self.side_canaries):
            return self.canaries
        return FleetCanaries(self.canaries, lambda: engine.profile, self.side_canaries)

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
        steps: list[tuple[str, Callable[[], object]]] = [
            ("the jobs", lambda: self.scheduler.running and self.scheduler.shutdown(wait=True)),
            ("the canaries", self.canaries.stop if self.canaries else lambda: None),
            ("the side engines' canaries", self.side_canaries.stop),
            # The guard's last usage is stored before the writer closes.
            ("the traffic guard", self.guard.stop if self.guard else lambda: None),
            ("the crash black box", self.evidence.stop),
            (
                "the simulated faults",
                self.sim_faults.stop if self.sim_faults else lambda: None,
            ),  # its events before the writer
            ("the store writer", lambda: self.writer.close(STORE_DRAIN_S)),  # follower still on
            ("the kernel-log follower", self.follower.stop),
            (
                "the engine",  # only with [serving] stop_on_exit
                lambda: stop_engine_on_exit(
                    self.recovery,
                    stop_on_exit=self.settings.serving.stop_on_exit and self.engine is not None,
                    sides=self.side_engines,
                ),
            ),
            ("recovery", self.recovery.close),
            ("the engine service", self.services.close_serving),
            ("the side engines", self.side_engines.close),
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
