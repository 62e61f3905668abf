"""fleetd's side of the engine: recipe, launcher, supervisor, preflight, records.

The supervisor (``serving.runtime.supervisor``) knows nothing of the store, the checks or
the latch; this module hands it a spec factory, a preflight of the mechanics (the port),
the listener of its reports (recovery's controller) and an event sink that records every
state change and launch. Whether the engine starts is recovery's decision
(``daemon.recovery_engine`` is the engine as recovery drives it); a person's stop is
audited here.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil

from daemon.config import Settings
from daemon.statedir import StateDir
from daemon.store import Store, StoreError
from hwcheck.atomic import atomic_write
from hwcheck.model import EventKind, Severity
from serving.errors import Busy, Unavailable
from serving.recipe.build import build_launch, diff_specs, show_text, spec_to_dict
from serving.recipe.lint import lint_recipe
from serving.recipe.masking import KnownSecrets, mask_argv, mask_spec
from serving.recipe.recipe import Recipe, load_recipe, preset_recipe, recipe_from_table
from serving.recipe.spec import LaunchSpec
from serving.runtime.container_launcher import ContainerLauncher
from serving.runtime.launchers import Launcher, launch_secrets
from serving.runtime.logcapture import LogCapture, LogSubscription
from serving.runtime.ports import free_port, port_in_use
from serving.runtime.process_launcher import ProcessLauncher
from serving.runtime.reports import EngineReports
from serving.runtime.states import (
    Refusal,
    ServingChange,
    ServingEvent,
    ServingState,
    SupervisorClosed,
)
from serving.runtime.supervisor import Supervisor
from serving.sim.scenario import EngineScenario, simulated_engine_args
from web.models import LastReadyLaunchDocument, LaunchSpecDocument, RecipeDocument

log = logging.getLogger("fleetd.engine")

SIM_PRESET = "sim-engine"
SIM_ENGINE_MODULE = "serving.sim.engine"
OPERATOR_STOP_REASON = "stopped by operator"
MAX_FOLLOWERS = 8


def resolve_recipe(
    settings: Settings, config_dir: Path | None, sim_engine: EngineScenario | None
) -> Recipe | None:
    """The configured recipe; the simulated engine under ``--simulate``; else none.

    Raises ``RecipeError`` (one line) for a bad recipe file or table.
    """
    configured = settings.serving.recipe
    if isinstance(configured, str):
        path = Path(configured)
        if not path.is_absolute() and config_dir is not None:
            path = config_dir / path
        return load_recipe(path)
    if isinstance(configured, dict):
        return recipe_from_table(configured, "[serving.recipe]")
    if sim_engine is None:
        return None
    recipe = preset_recipe(SIM_PRESET)
    return recipe.model_copy(
        update={"extra_args": (*recipe.extra_args, *simulated_engine_args(sim_engine))}
    )


def is_simulated_engine(recipe: Recipe) -> bool:
    """A process-mode recipe running ``{python} -m serving.sim.engine``: no GPU behind it."""
    return recipe.mode == "process" and tuple(recipe.command[1:3]) == ("-m", SIM_ENGINE_MODULE)


def make_launcher(recipe: Recipe, state_dir: Path) -> Launcher:
    """The launcher for the recipe's mode."""
    if recipe.mode == "process":
        return ProcessLauncher(state_dir)
    return ContainerLauncher(state_dir, runtime=str(recipe.mode))


class EngineService:
    """The engine as the daemon and its API see it."""

    def __init__(
        self,
        recipe: Recipe,
        settings: Settings,
        state_dir: Path,
        store: Store,
        *,
        reports: EngineReports,
        launcher_factory: Callable[[Recipe, Path], Launcher] = make_launcher,
        known_secrets: KnownSecrets | None = None,
        defer: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        self.recipe = recipe
        # Serving events reach the store through ``defer`` (fleetd's store writer): a
        # locked or full store must not hold the supervisor's stop back (issue 22).
        self._defer = defer or (lambda job: job())
        self._settings = settings
        self._store = store
        self._state_dir = state_dir
        self._launch_ids: dict[str, int] = {}
        self._last_metrics_ts: datetime | None = None
        self._launch_lock = threading.Lock()
        self._followers = threading.BoundedSemaphore(MAX_FOLLOWERS)
        # A person's stop: autostart (a fleetd restart) must respect it. Persisted with the
        # serving state, so no reason text is ever parsed back.
        self._operator_stop = bool((store.get_serving_state() or {}).get("operator_stop"))
        self.supervisor = Supervisor(
            self._spec,
            launcher_factory(recipe, state_dir),
            state_dir,
            serving=settings.serving,
            preflight=self.preflight,
            on_event=self._on_event,
            reports=reports,
            known_secrets=self._with_recipe_secrets(known_secrets),
        )

    def _with_recipe_secrets(self, known: KnownSecrets | None) -> KnownSecrets:
        """``known`` plus the recipe's launch secrets, before the log's history is loaded.

        The engine to adopt was most likely launched from this recipe, and its start-up
        lines (the echoed flags) are in the history. The port does not matter here, so the
        spec is built without choosing one (that is the launch's business).
        """
        known = KnownSecrets() if known is None else known
        known.add(launch_secrets(build_launch(self.recipe)))
        return known

    # -- the supervisor's hooks ---------------------------------------------------------
    def _spec(self) -> LaunchSpec:
        return build_launch(self.recipe, port=self._engine_port())

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
        engine_running = self.supervisor.status().pid is not None
        if saved and (engine_running or not port_in_use(self.recipe.host, saved)):
            return saved
        port = free_port(self.recipe.host)  # first launch, or someone else took ours
        atomic_write(path, f"{port}\n")
        return port

    def preflight(self) -> list[Refusal]:
        """The mechanics that block a launch: the recipe's port held by another process.

        Whether to start at all (the latch, the checks, the CUDA probe, lint errors) was
        decided by recovery before the start reached the supervisor.
        """
        if self.recipe.port and port_in_use(self.recipe.host, self.recipe.port):
            return [
                Refusal("port_in_use", f"port {self.recipe.port} on {self.recipe.host} is taken")
            ]
        return []

    def lint_errors(self) -> tuple[str, ...]:
        """The recipe's lint errors (one line each): they refuse a start."""
        findings = lint_recipe(self.recipe, host_checks=False)
        return tuple(f.line() for f in findings if f.severity == "error")

    def _on_event(self, event: ServingEvent) -> None:
        severity = event.severity.as_event()
        log.log(
            logging.WARNING if severity.rank > Severity.OK.rank else logging.INFO,
            "engine %s: %s",
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
        self._store.record_event(
            EventKind.SERVING, event.severity.as_event(), event.message, details=event.as_dict()
        )
        if event.kind is ServingChange.STATE:
            self._store.set_serving_state(
                {
                    "state": str(event.state),
                    "reason": self.supervisor.status().reason,
                    "operator_stop": self._operator_stop,
                }
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
                    launch.argv, launch.env, launch.recipe_hash, launch.started_at
                )
            self._launch_ids[launch.launch_id] = row_id
        self._store.update_launch(
            row_id,
            ready_at=launch.ready_at,
            ended_at=launch.ended_at,
            exit_code=launch.exit_code,
            crash_class=None if launch.crash_class is None else str(launch.crash_class),
        )

    @property
    def runs_simulated_engine(self) -> bool:
        """True when the recipe runs the simulated engine (``serving.sim.engine``)."""
        return is_simulated_engine(self.recipe)

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
        )

    def _launch_row_of_adopted(self, argv: tuple[str, ...]) -> int | None:
        """The stored launch an adopted engine came from (same argv, not ended), if any.

        An adopted engine is the same launch, not a new one: its row keeps the real
        environment, so ``recipe show --diff`` stays right after a fleetd restart.
        """
        for row in self._store.list_launches(limit=20):
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

    # -- EngineControl -----------------------------------------------------------------
    def status_document(self) -> dict[str, Any]:
        """CONTRACT's ``serving`` block plus extras."""
        return self.supervisor.status().as_dict()

    def stop_by_person(self) -> dict[str, Any]:
        """A person's stop (finishes in the background): autostart then leaves it down."""
        self._operator_stop = True
        try:
            self.supervisor.stop(OPERATOR_STOP_REASON, wait=False)
        except SupervisorClosed:
            raise Unavailable("fleetd is shutting down", "closed") from None
        self._store.audit("operator", "engine_stop", "accepted")
        return {"action": "stop", "accepted": True, "serving": self.status_document()}

    def recipe_document(self) -> RecipeDocument:
        """What ``fleetctl recipe show`` prints: the spec, and the diff to the last ready launch."""
        # Served over the API and compared with stored launches: both masked alike.
        spec = mask_spec(build_launch(self.recipe, port=self._engine_port()))
        spec_document = LaunchSpecDocument.model_validate(spec_to_dict(spec))
        last = self._store.last_ready_launch()
        if last is None:
            return RecipeDocument(
                spec=spec_document, text=show_text(spec), last_ready=None, diff=None
            )
        previous = dataclasses.replace(spec, argv=tuple(last.argv), env=dict(last.env))
        return RecipeDocument(
            spec=spec_document,
            text=show_text(spec),
            last_ready=LastReadyLaunchDocument(
                id=last.id,
                started_at=last.started_at.isoformat(),
                ready_at=None if last.ready_at is None else last.ready_at.isoformat(),
                argv=list(last.argv),
                env=dict(last.env),
                recipe_hash=last.recipe_hash,
            ),
            diff=diff_specs(
                previous, spec, old_label=f"last ready launch #{last.id}", new_label="next launch"
            ),
        )

    def logs(self, lines: int) -> list[str]:
        """The engine log's last lines."""
        return self.supervisor.logs(lines)

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

    def stop_for_recovery(self, reason: str) -> ServingState:
        """A recovery stop: graceful, no restart, the reason shown in the status."""
        return self.supervisor.stop(reason, hold_reason=reason).state

    def close(self, stop_engine: bool) -> None:
        """Stop supervising (the engine keeps running unless ``stop_engine``)."""
        self.supervisor.close(stop_engine=stop_engine)


def recipe_for_daemon(
    settings: Settings, config_path: Path | None, sim_engine: EngineScenario | None
) -> Recipe | None:
    """``resolve_recipe`` relative to the config file's folder."""
    return resolve_recipe(settings, config_path.parent if config_path else None, sim_engine)
