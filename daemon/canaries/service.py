"""The engine canaries as fleetd wires them: the runner, the log-signature counter, the API side.

``build_canaries`` makes both from the settings and the engine service; ``CanaryService``
is what ``web.routes.canaries.CanaryControl`` asks for and what the status document reads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from daemon.canaries.log_signatures import LogSignatureCounter
from daemon.canaries.on_fail import OnFail
from daemon.canaries.runner import CanaryRunner
from daemon.config import Settings
from daemon.engine.builds import BuildTracker
from daemon.engine.service import EngineService
from daemon.rig.monitor import RigMonitor
from daemon.store import Store
from hwcheck.checks import power_brake
from hwcheck.checks.readings import CanaryReading
from hwcheck.model import Severity
from hwcheck.threads import CrashReport
from serving.canary.signatures import SignatureTable
from serving.canary.suite import Expectations
from serving.errors import NotFound
from web.metrics_model import CanaryMetrics


class CanaryService:
    """Canary results and log-signature counts for the API; ``run`` for ``canary run``."""

    def __init__(
        self,
        runner: CanaryRunner,
        counter: LogSignatureCounter | None,
        profile: Callable[[], str] | None = None,
    ) -> None:
        self.runner = runner
        self.counter = counter
        self._profile = profile  # the engine's profile, read each time (a switch changes it)

    def start(self) -> None:
        """Start the schedule and the log follower."""
        self.runner.start()
        if self.counter is not None:
            self.counter.start()

    def stop(self) -> None:
        """Stop both (a round in flight ends at its own timeouts)."""
        self.runner.stop()
        if self.counter is not None:
            self.counter.stop()

    def status_entries(self) -> list[dict[str, Any]]:
        """The status document's ``canaries`` list."""
        return self.runner.status_entries()

    def reading(self) -> CanaryReading:
        """The ``engine_output`` check's reading (``hwcheck.checks.engine_output``) for each poll."""
        return self.runner.reading()

    def log_signature_entries(self) -> list[dict[str, Any]]:
        """The status document's ``log_signatures`` list."""
        return [] if self.counter is None else self.counter.entries()

    def metrics(self) -> tuple[tuple[CanaryMetrics, ...], dict[str, int]]:
        """Last verdicts and signature totals for ``/metrics`` (memory only)."""
        canaries = tuple(
            CanaryMetrics(row.name, self.runner.current_result(row), row.figure)
            for row in self.runner.judged()
        )
        return canaries, ({} if self.counter is None else self.counter.totals())

    def canary_document(self, limit: int) -> dict[str, Any]:
        """``GET /api/v1/canary``: last results, signature counts and recent history."""
        return {
            "canaries": self.status_entries(),
            "log_signatures": self.log_signature_entries(),
            "history": self.runner.history(limit),
        }

    def run_canaries(
        self, force: bool, deep: bool = False, engine: str | None = None
    ) -> dict[str, Any]:
        """``POST /api/v1/canary/run``: one round now (``deep``: the deep round).

        ``engine`` (``canary run NAME``) must name this engine's profile: a NAME no
        engine here runs is refused in one line naming it.
        """
        if engine is not None:
            mine = None if self._profile is None else self._profile()
            if engine != mine:
                raise NotFound(f"no engine {engine!r} on this rig (engines: {mine or 'none'})")
        return self.runner.run_now(force=force, deep=deep)


def build_canaries(
    config: Settings,
    store: Store,
    engine: EngineService,
    monitor: RigMonitor,
    on_crash: CrashReport | None = None,
    builds: BuildTracker | None = None,
    ask_recovery: Callable[[str, str], str] | None = None,
    side: str | None = None,
) -> CanaryService:
    """The canary service for this engine (the schedule runs only when enabled).

    The log signatures are the built-ins, ``[[canary.log_signatures]]`` and, with their
    severity, ``[[serving.log_signatures]]``. ``builds`` stamps each verdict with the
    build it judged; ``ask_recovery`` carries ``[canary] on_fail`` out (recovery decides).
    ``side``: the profile of a side engine (``daemon.canaries.engines``): its verdicts are
    kept as its own, and it counts no log signatures (their hourly counts are the rig's,
    kept for the primary engine's log).
    """
    settings = config.canary

    def power_brake_active() -> bool:
        return any(
            r.id == power_brake.CHECK_ID and r.severity is not Severity.OK
            for r in monitor.view().results
        )

    def expectations() -> Expectations:
        recipe = engine.recipe  # the profile in force: a switch changes it
        return Expectations(
            recipe.expected_decode_tok_s,
            recipe.expected_prefill_tok_s,
            recipe.expected_reasoning_field,
            max_model_len=recipe.max_model_len,
            speculative=None if recipe.speculation is None else recipe.speculation.method,
        )

    def build_of(mark: str, wait_s: float) -> int | None:
        build = None if builds is None else builds.build_for(mark, wait_s)
        return None if build is None else build.id

    on_round = None
    if ask_recovery is not None:
        on_round = OnFail(
            settings.on_fail, ask_recovery, power_brake_active, settings.restarts_in_a_row
        )
    runner = CanaryRunner(
        settings,
        store,
        engine.status_document,
        lambda: engine.recipe.engine_name,
        expectations,
        power_brake_active,
        on_crash=on_crash,
        build_of=build_of,
        on_round=on_round,
        engine=side,
    )
    if side is not None:
        return CanaryService(runner, None, lambda: engine.profile)
    rules = [(sig.name, sig.pattern, sig.severity) for sig in config.serving.log_signatures]
    table = SignatureTable.build(settings.log_signatures, rules)
    counter = LogSignatureCounter(table, store, engine.supervisor.log_capture, on_crash=on_crash)
    return CanaryService(runner, counter, lambda: engine.profile)
