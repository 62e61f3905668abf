"""fleetd's side of the engine: profiles, launcher, supervisor, preflight, records.

The supervisor (``serving.runtime.supervisor``) knows nothing of the store, the checks or
the latch; this module hands it a spec factory (the active profile's recipe), a preflight
of this host's mechanics (``engine_preflight``: who holds the port or the profile's cards,
an engine of another recipe left running), the listener of its reports (recovery's
controller) and an event sink that records every state change and launch. Whether the
engine starts or stops is recovery's decision (``daemon.engine.recovery_port`` is the
engine as recovery drives it; it reads the active profile's cards and lint errors and keeps
a person's stop here), and the supervisor is built with recovery's guard (``move_guard``):
a start or stop asked of it outside recovery raises. Switching profiles is
``engine_switch``'s: it asks recovery to stop the engine, makes another profile active here
(``activate``), then asks recovery's one start path.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil

from daemon.config import Settings
from daemon.engine.foreign_stop import stop_foreign_containers, unstopped_refusal
from daemon.engine.gate_now import GateNow
from daemon.engine.preflight import (
    blocking_for_switch,
    checkpoint_refusals,
    drift_refusal,
    foreign_refusals,
    lint_refusals,
    rig_card_ids,
    rig_cards,
    scan_foreign,
)
from daemon.engine.profiles import ActiveProfile
from daemon.engine.recipe_view import recipe_document
from daemon.engine.recovery_requests import RecoveryRequests
from daemon.engine.sim_containers import (
    in_a_simulated_container,
    is_simulated_engine,
    simulated_container_spec,
)
from daemon.engine.switch import ProfileSwitcher
from daemon.rig.monitor import RigMonitor
from daemon.statedir import StateDir
from daemon.store import Store, StoreError
from hwcheck.atomic import atomic_write
from hwcheck.host import HostSources
from hwcheck.kernellog.oom import oom_kill_record
from hwcheck.model import EventKind, Severity
from hwcheck.threads import CrashReport
from recovery.decisions import Reason
from serving.errors import Busy, Refused, Unavailable
from serving.profiles import ProfileSet
from serving.recipe.build import build_launch, recipe_hash
from serving.recipe.cards import gate_cards
from serving.recipe.checkpoint import VerifyMode, min_mode
from serving.recipe.masking import KnownSecrets, mask_argv
from serving.recipe.recipe import Recipe
from serving.recipe.spec import LaunchSpec
from serving.runtime.engine_record import RecordError, RecordFile
from serving.runtime.foreign import ContainerProbe
from serving.runtime.foreign_containers import RuntimeContainers
from serving.runtime.launchers import Launcher, launch_secrets
from serving.runtime.logcapture import LogCapture, LogSubscription
from serving.runtime.mode_launcher import ModeLauncher
from serving.runtime.ports import free_port, port_in_use
from serving.runtime.reports import EngineReports
from serving.runtime.states import (
    LaunchRecord,
    Refusal,
    ServingChange,
    ServingEvent,
    ServingState,
    SupervisorClosed,
)
from serving.runtime.supervisor import Supervisor
from web.models import RecipeDocument

log = logging.getLogger("fleetd.engine")

MAX_FOLLOWERS = 8
# How many recent builds a recipe's labels are looked up in.
LABEL_BUILDS = 20


def make_launcher(recipe: Recipe, state_dir: Path) -> Launcher:
    """The launcher for every mode (profiles may run as a process or a container)."""
    return ModeLauncher(state_dir)


def oom_record_of(host: HostSources, pids: Collection[int]) -> str | None:
    """The kernel log's OOM-killer record for one of ``pids`` this boot (the kernel's own).

    Asked by the supervisor when the engine ended by a SIGKILL it did not send.
    """
    texts = (r.text for r in host.kernel_log_history() if not r.from_user_space)
    return oom_kill_record(texts, set(pids))


class EngineService:
    """The engine as the daemon and its API see it."""

    def __init__(
        self,
        profiles: ProfileSet,
        settings: Settings,
        state_dir: Path,
        store: Store,
        monitor: RigMonitor,
        host: HostSources,
        *,
        reports: EngineReports,
        starts: RecoveryRequests,
        launcher_factory: Callable[[Recipe, Path], Launcher] = make_launcher,
        containers: ContainerProbe | None = None,
        known_secrets: KnownSecrets | None = None,
        move_guard: Callable[[str], None],
        defer: Callable[[Callable[[], None]], None] | None = None,
        on_crash: CrashReport | None = None,
        sim_engine_args: Sequence[str] | None = None,
        primary: bool = True,
        sim_images: Path | None = None,
    ) -> None:
        self.profiles = profiles
        # The simulated container runtime's image file: the host's, one for every engine
        # (a side engine's own state dir would hold a file no rebuild or pull ever writes).
        self._sim_images = sim_images or StateDir(state_dir).sim_images
        # The rig's first engine keeps its state in the store (the status's ``serving``);
        # an engine beside it (``daemon.engine.fleet``) keeps its person's stop in memory.
        self._primary = primary
        # Under --simulate: a container launch runs the simulated engine with these flags.
        self._sim_engine_args = None if sim_engine_args is None else tuple(sim_engine_args)
        self._guard_summary: Callable[[], dict[str, Any]] | None = None
        self._active_file = ActiveProfile(state_dir)
        self.profile = self._active_file.choose(profiles)
        # A rollback's digest (``daemon.engine.rollback``): the image the profile runs.
        self.pinned_image = self._active_file.pinned_image(self.profile)
        self._active_file.save(self.profile, profiles, self.pinned_image)
        self.recipe = profiles.get(self.profile).recipe
        self._containers = containers or RuntimeContainers()
        # Serving events reach the store through ``defer`` (fleetd's store writer): a
        # locked or full store must not hold the supervisor's stop back (issue 22).
        self._defer = defer or (lambda job: job())
        self._settings = settings
        self._store = store
        self._monitor = monitor
        self._host = host
        self._starts = starts
        self._state_dir = state_dir
        self._launch_ids: dict[str, int] = {}
        # A fleet.db started afresh lacks the running launch's row: recorded again at its
        # next event (the dict is replaced, not cleared: the listener takes no lock).
        store.add_fresh_listener(lambda: setattr(self, "_launch_ids", {}))
        # The newest launch stored (its row id and record): what ``daemon.engine.builds``
        # ties the build it captures to.
        self.latest_launch: tuple[int, LaunchRecord] | None = None
        self._last_metrics_ts: datetime | None = None
        self._launch_lock = threading.Lock()
        self._followers = threading.BoundedSemaphore(MAX_FOLLOWERS)
        self.switcher = ProfileSwitcher(self, monitor, settings.rig, starts)
        self._gate_now = GateNow(
            starts,
            lambda: self.profile,
            lambda: (
                self.profile,
                self.recipe_cards(),
                self.lint_errors(),
                self.checkpoint_blocks(),
            ),
        )
        # A person's stop: autostart (a fleetd restart) must respect it. Persisted with the
        # serving state, so no reason text is ever parsed back.
        # A side engine's state is kept under its own key (``serving_state:NAME``).
        self._state_key = None if primary else self.profile
        kept = store.get_serving_state(self._state_key) or {}
        self._operator_stop = bool(kept.get("operator_stop"))
        self.supervisor = Supervisor(
            self._spec,
            launcher_factory(self.recipe, state_dir),
            state_dir,
            serving=settings.serving,
            preflight=self.preflight,
            on_event=self._on_event,
            reports=reports,
            known_secrets=self._with_recipe_secrets(known_secrets),
            on_crash=on_crash,
            guard=move_guard,
            oom_record=lambda pids: oom_record_of(host, pids),
        )

    def _with_recipe_secrets(self, known: KnownSecrets | None) -> KnownSecrets:
        """``known`` plus every profile's launch secrets, before the log's history is loaded.

        The engine to adopt was most likely launched from one of these recipes (the profile
        in force, or the one before a switch), and its start-up lines (the echoed flags)
        are in the history. The port does not matter here, so the spec is built without
        choosing one (that is the launch's business).
        """
        known = KnownSecrets() if known is None else known
        for name in self.profiles.names:
            known.add(launch_secrets(build_launch(self.profiles.get(name).recipe)))
        return known

    # -- the supervisor's hooks ---------------------------------------------------------
    def _spec(self) -> LaunchSpec:
        image = self.pinned_image if self.recipe.is_container else None
        spec = build_launch(self.recipe, port=self._engine_port(), image=image)
        if self._sim_engine_args is not None and in_a_simulated_container(spec):
            build_file = str(self._sim_images)
            runs = image or self.recipe.image
            spec = simulated_container_spec(spec, self._sim_engine_args, build_file, runs)
        return dataclasses.replace(spec, profile=self.profile)

    def _engine_port(self) -> int | None:
        """``port = 0``: one free loopback port chosen per daemon and kept in the state dir.

        Clients keep finding the engine across restarts, and an adopted engine's spec
        matches the recipe's (no false "older launch spec" warning).
        """
        if self.recipe.port != 0:
            return None
        path = StateDir(self._state_dir).engine_port
        try:
            saved = int(path.read_text().strip())
        except (OSError, ValueError):
            saved = 0
        engine_running = self.supervisor.status().pid is not None or self._recorded_port() == saved
        if saved and (engine_running or not port_in_use(self.recipe.host, saved)):
            return saved
        port = free_port(self.recipe.host)  # first launch, or someone else took ours
        atomic_write(path, f"{port}\n")
        return port

    def _recorded_port(self) -> int | None:
        """The port of the engine ``engine.pid`` names (ours, running or about to be adopted)."""
        try:
            record = RecordFile(self._state_dir).read()
        except RecordError:
            return None
        return None if record is None else record.port

    @property
    def engine_key(self) -> str | None:
        """What the store files this engine's rows under: None (primary), else its profile."""
        return self._state_key

    def preflight(self) -> list[Refusal]:
        """The mechanics of this host that block a launch, naming what blocks and what to do.

        Who holds the engine's port or the active profile's cards (a foreign process on
        other cards only warns), and an engine of another recipe left running (drift).
        Whether to start at all (the latch, the checks, the CUDA probe, lint errors) was
        decided by recovery before the start reached the supervisor.
        """
        refusals: list[Refusal] = []
        status = self.supervisor.status()
        if status.drift is not None:
            refusals.append(drift_refusal(status.drift, self.profiles, self.profile))
        refusals += foreign_refusals(self.recipe, self._scan_foreign())
        refusals += checkpoint_refusals(self.recipe, self._settings.serving.verify_checkpoint)
        return refusals

    def recipe_cards(self, recipe: Recipe | None = None) -> frozenset[int] | None:
        """The cards whose checks gate a start of ``recipe`` (the active profile's by default)."""
        recipe = self.recipe if recipe is None else recipe
        return gate_cards(recipe.gpus, rig_card_ids(self._monitor))

    def profile_cards(self) -> list[int]:
        """The cards the profile in force uses (every card of the last poll for "all")."""
        named = self.recipe_cards()
        if named is not None:
            return sorted(named)
        return [index for index, _ in rig_card_ids(self._monitor)]

    def lint_errors(self, recipe: Recipe | None = None) -> tuple[str, ...]:
        """The lint errors (one line each) of ``recipe`` (the active profile's by default).

        Judged with the model family's rules, the waivers and fits-the-cards against this
        rig's cards as last polled; recovery's start gate refuses on them.
        """
        recipe = self.recipe if recipe is None else recipe
        cards = rig_cards(self._monitor, self._settings.rig)
        labels = self.build_labels(recipe)
        return tuple(refusal.message for refusal in lint_refusals(recipe, cards, labels))

    def build_labels(self, recipe: Recipe) -> dict[str, str] | None:
        """The provenance labels the newest build of ``recipe`` recorded (None: none yet).

        Lint counts the fork's labels (``dsv4.patch-series``) as evidence of the fork,
        where the image's name does not say (``serving.recipe.family_evidence``).
        """
        digest = recipe_hash(recipe)
        try:
            builds = self._store.list_builds(limit=LABEL_BUILDS, engine=self._state_key)
        except StoreError:
            return None
        found = next((build for build in builds if build.recipe_hash == digest), None)
        return None if found is None or not found.labels else dict(found.labels)

    def _scan_foreign(self, recipe: Recipe | None = None) -> Any:
        """Who, not ours, holds ``recipe``'s (the active profile's) port or cards."""
        status = self.supervisor.status()
        recipe = self.recipe if recipe is None else recipe
        running_url = status.url if status.pid is not None else None
        if status.drift is not None:
            running_url = status.drift.url  # the drift refusal already explains that one
        return scan_foreign(
            recipe,
            holders=self._host.device_holders(frozenset(self.engine_pids())),
            allowed=self._settings.rig.allowed_gpu_processes,
            probe=self._containers,
            rig_cards_ids=rig_card_ids(self._monitor),
            port_is_ours=running_url is not None and running_url.endswith(f":{recipe.port}"),
        )

    def held_for(self, recipe: Recipe, stop_foreign: bool) -> tuple[Reason, ...]:
        """What holds ``recipe``'s port or cards now (ours aside), or a broken checkpoint.

        A switch asks before it stops the engine that serves (``engine_preflight``); with
        ``stop_foreign`` the foreign containers would be stopped first: only the others hold.
        """
        held = blocking_for_switch(recipe, self._scan_foreign(recipe), stop_foreign)
        # A broken checkpoint would refuse the start too: known before A stops serving.
        reasons = tuple(Reason(refusal.code, refusal.message) for refusal in held)
        return reasons + self.checkpoint_blocks(recipe)

    def checkpoint_blocks(self, recipe: Recipe | None = None) -> tuple[Reason, ...]:
        """The checkpoint's shards missing or short: recovery's gate refuses a start on them.

        Of ``recipe`` (the active profile's by default), at quick depth at most: the
        gate asks at every start request and the status every ``LINT_KEEP_S``; a full
        hash is the start's own preflight (``preflight``), never the request's.
        """
        recipe = self.recipe if recipe is None else recipe
        mode = min_mode(self._settings.serving.verify_checkpoint, VerifyMode.QUICK)
        return tuple(Reason(r.code, r.message) for r in checkpoint_refusals(recipe, mode))

    def stop_foreign(self, actor: str, recipe: Recipe | None = None) -> list[dict[str, Any]]:
        """``--stop-foreign``: stop the foreign containers holding the port or the cards.

        Of ``recipe`` (the active profile's by default). A drifted engine's container is
        one of them (it holds the port); a foreign bare process is never signalled: the
        start's refusal names it (``foreign_stop``).
        """
        return stop_foreign_containers(
            self._scan_foreign(recipe).containers(),
            self.supervisor.status().drift,
            self._containers,
            self._settings.serving.stop_foreign_timeout_s,
            self._store,
            actor,
        )

    def _on_event(self, event: ServingEvent) -> None:
        severity = event.severity.as_event()
        log.log(
            logging.WARNING if severity.rank > Severity.OK.rank else logging.INFO,
            "engine %s%s: %s",
            "" if self._primary else f"{self.profile} ",
            event.state,
            event.message,
        )
        self._defer(lambda: self._record_logged(event))

    def _record_logged(self, event: ServingEvent) -> None:
        try:
            self._record(event)
        except StoreError as exc:  # the store check says so; no traceback per event
            log.warning("a serving event was not stored: %s", exc)
        except Exception:
            log.exception("could not record a serving event")

    def _record(self, event: ServingEvent) -> None:
        # An engine beside the primary names itself: every event, and the alerts built on
        # them, say which engine (``daemon.engine.fleet``).
        message = event.message if self._primary else f"engine {self.profile}: {event.message}"
        details = event.as_dict() if self._primary else {**event.as_dict(), "engine": self.profile}
        self._store.record_event(
            EventKind.SERVING, event.severity.as_event(), message, details=details
        )
        if event.kind is ServingChange.STATE:
            self._store.set_serving_state(
                {
                    "state": str(event.state),
                    "reason": self.supervisor.status().reason,
                    "operator_stop": self._operator_stop,
                },
                self._state_key,
            )
        launch = event.launch
        if launch is None:
            return
        with self._launch_lock:
            row_id = self._launch_ids.get(launch.launch_id)
            if row_id is None and launch.adopted:
                row_id = self._launch_row_of_adopted(launch.argv)
            if row_id is None:
                row_id = self._store.record_launch(
                    launch.argv, launch.env, launch.recipe_hash, launch.started_at, self._state_key
                )
            self._launch_ids[launch.launch_id] = row_id
            self.latest_launch = (row_id, launch)
        self._store.update_launch(
            row_id,
            ready_at=launch.ready_at,
            ended_at=launch.ended_at,
            exit_code=launch.exit_code,
            crash_class=None if launch.crash_class is None else str(launch.crash_class),
        )

    @property
    def runs_simulated_engine(self) -> bool:
        """True when the recipe runs the simulated engine (``serving.sim.engine``).

        Under ``--simulate`` a container recipe runs it too (``daemon.engine.sim_containers``).
        """
        if self._sim_engine_args is not None and self.recipe.mode != "process":
            return True
        return is_simulated_engine(self.recipe)

    @property
    def containers(self) -> ContainerProbe:
        """The container runtime as fleetd reaches it (the simulated one under ``--simulate``)."""
        return self._containers

    def engine_pids(self) -> set[int]:
        """The engine's process and all its descendants (its GPU workers are not foreign)."""
        pid = self.supervisor.status().pid
        if pid is None:
            return set()
        try:
            root = psutil.Process(pid)
            return {pid, *(child.pid for child in root.children(recursive=True))}
        except psutil.Error:
            return {pid}

    def record_metrics(self) -> None:
        """Store the engine's latest scraped metrics once (called by the poll job)."""
        metrics = self.supervisor.status().metrics
        if metrics is None or metrics.ts == self._last_metrics_ts:
            return
        self._last_metrics_ts = metrics.ts

        def whole(value: float | None) -> int | None:
            return None if value is None else round(value)

        self._store.record_engine_sample(
            metrics.ts,
            tokens_per_s=metrics.generation_tokens_per_s,
            requests_running=whole(metrics.requests_running),
            requests_waiting=whole(metrics.requests_waiting),
            kv_cache_usage_pct=metrics.kv_cache_usage_pct,
            figures=metrics.figures.as_dict(),
        )

    def _launch_row_of_adopted(self, argv: tuple[str, ...]) -> int | None:
        """The stored launch an adopted engine came from (same argv, not ended), if any.

        An adopted engine is the same launch, not a new one: its row keeps the real
        environment, so ``recipe show --diff`` stays right after a fleetd restart.
        """
        for row in self._store.list_launches(limit=20, engine=self._state_key):
            if row.ended_at is None and tuple(row.argv) == tuple(mask_argv(argv)):
                return row.id
        return None

    # -- lifecycle ----------------------------------------------------------------------
    def open(self) -> bool:
        """Adopt a running engine (True); the daemon then asks the policy about autostart."""
        adopted = self.supervisor.open(adopt=True)
        if adopted:
            log.info("adopted the running engine (pid %s)", self.supervisor.status().pid)
        return adopted

    def held_by_a_person(self) -> bool:
        """A breaker hold or a person's stop: automatic starts must leave the engine down."""
        return self._operator_stop or self.supervisor.status().state is ServingState.HELD

    def state(self) -> tuple[ServingState, int | None]:
        """The engine's state and pid now."""
        status = self.supervisor.status()
        return status.state, status.pid

    def person_starts(self) -> None:
        """A person's start: their earlier stop no longer holds autostart back."""
        self._operator_stop = False

    def person_stops(self) -> None:
        """A person's stop: autostart (a fleetd restart) then leaves the engine down.

        Stored with the serving state at the stop's state change, so no reason text is
        ever parsed back.
        """
        self._operator_stop = True

    def hold_down(self) -> None:
        """Recovery stops the engine for a person to start (``[canary] on_fail = "hold"``).

        Kept like a person's stop: autostart and a fleetd restart leave it down.
        """
        self._operator_stop = True

    # -- EngineControl -----------------------------------------------------------------
    def status_document(self) -> dict[str, Any]:
        """The status's ``serving`` block plus extras (the active ``profile`` among them)."""
        document = self.supervisor.status().as_dict()
        document["profile"] = self.profile
        if self.pinned_image is not None:
            document["pinned_image"] = self.pinned_image
        document["cards"] = self.profile_cards()
        refusal = self._starts.last_refusal()
        if refusal is not None:
            document["refusal"] = refusal.as_dict()
        document["start_blocked"] = self._gate_now.blocked()
        switch = self.switcher.progress()
        if switch is not None:
            document["switch"] = switch
        if self._guard_summary is not None:
            document["guard"] = self._guard_summary()
        return document

    def attach_guard(self, summary: Callable[[], dict[str, Any]]) -> None:
        """The traffic guard in front of the engine: the status's ``serving.guard``."""
        self._guard_summary = summary

    def switch(
        self,
        name: str,
        actor: str = "operator",
        stop_foreign: bool = False,
        image: str | None = None,
    ) -> dict[str, Any]:
        """``fleetctl serve NAME`` (``engine_switch``): stop cleanly, switch, start NAME.

        ``image``: a rollback's image reference to run NAME with (``daemon.engine.rollback``).
        """
        try:
            return self.switcher.switch(name, actor, stop_foreign, image)
        except SupervisorClosed:
            raise Unavailable("fleetd is shutting down", "closed") from None

    def profiles_document(self) -> dict[str, Any]:
        """``GET /api/v1/serving/profiles``."""
        return self.switcher.profiles_document()

    def activate(self, name: str, actor: str, image: str | None = None) -> str:
        """Make profile ``name`` the one in force (the engine must be stopped); the old name.

        ``image``: run this image reference instead of the recipe's (a rollback's digest);
        None ends any earlier pin. Kept across fleetd restarts; recorded as an event and
        an audit row.
        """
        profile = self.profiles.get(name)
        previous = self.profile
        self.recipe = profile.recipe
        self.profile = name
        self.pinned_image = image
        self._active_file.save(name, self.profiles, image)
        pinned = f" pinned to image {image}" if image is not None else ""
        message = f"launch profile switched from {previous} to {name}{pinned} by {actor}"
        log.info("%s", message)
        self._store.record_event(
            EventKind.OPERATOR,
            Severity.INFO,
            message,
            details={
                "profile": name,
                "from": previous,
                "source": profile.source,
                "image": image,
            },
        )
        self._store.audit(actor, "profile_switch", "done", target=name, reason=message)
        return previous

    def refused(self, action: str, refusals: tuple[Reason, ...], actor: str) -> Refused:
        """A refusal given before anything moved, audited, as the API's 409 (fleetctl's 4)."""
        message = "; ".join(reason.line for reason in refusals) or f"{action} refused"
        self._store.audit(actor, f"engine_{action}", "refused", reason=message)
        return Refused(message, refusals[0].code if refusals else "refused", refusals)

    def stop_foreign_before_start(self, actor: str) -> list[dict[str, Any]]:
        """``start --stop-foreign``: what the start gate refuses is refused first, at once.

        Only then are the foreign containers stopped (the start itself is recovery's
        ``request_start``, asked by the caller next): nobody's container is stopped for a
        start that cannot happen. One that would not stop refuses the start, named.
        """
        refusals = self._starts.start_refusals()
        if refusals:
            raise self.refused("start", refusals, actor)
        stopped = self.stop_foreign(actor)
        left = unstopped_refusal(stopped)
        if left is not None:
            raise self.refused("start", (left,), actor)
        return stopped

    def recipe_document(self) -> RecipeDocument:
        """What ``fleetctl recipe show`` prints: the spec, and the diff to the last ready launch."""
        known = self.supervisor.log_capture.secrets
        return recipe_document(self._spec(), self._store.last_ready_launch(self._state_key), known)

    def logs(self, lines: int) -> list[str]:
        """The engine log's last lines."""
        return self.supervisor.logs(lines)

    def launch_logs(self, lines: int) -> list[str]:
        """The current launch's last lines, the file read up to now (a boot fingerprint)."""
        return self.supervisor.launch_logs(lines)

    def follow(self, backlog: int, idle_s: float = 1.0) -> Iterator[str | None]:
        """The last ``backlog`` lines, then new ones as they come (for ``logs --follow``).

        Yields ``None`` after each quiet ``idle_s`` so the web layer gets control back: a
        reader that went away is noticed and its thread freed, never parked forever on a
        quiet engine. At most ``MAX_FOLLOWERS`` follow at once (each holds a thread).
        """
        # Checked here, before any byte is sent, so a refusal is a clean HTTP 429.
        if not self._followers.acquire(blocking=False):
            raise Busy(f"{MAX_FOLLOWERS} log followers already; try again later")
        capture = self.supervisor.log_capture
        return self._follow(capture, capture.subscribe(backlog=backlog), idle_s)

    def _follow(
        self, capture: LogCapture, subscription: LogSubscription, idle_s: float
    ) -> Iterator[str | None]:
        try:
            while True:
                yield subscription.get(timeout_s=idle_s)
        finally:
            capture.unsubscribe(subscription)
            self._followers.release()

    def close(self) -> None:
        """Stop supervising; the engine keeps running.

        fleetd's exit with ``stop_on_exit`` asks recovery to stop it first.
        """
        self.supervisor.close()
