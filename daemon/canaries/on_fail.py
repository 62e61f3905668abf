"""``[canary] on_fail``: what a round with a failing canary does besides alerting.

``alert`` (the default) does nothing more: the canary's event alerts. ``restart`` asks
recovery for one engine restart per failing round and ``hold`` asks it to stop the engine
and keep it down until a person starts it; recovery decides (``recovery.policy``): never
under the reboot latch, and its breaker counts the restarts. A ``throughput`` failure
while the power brake is on never acts: the engine is not what is wrong. Only ``fail``
verdicts act (a warning alerts, it does not restart an engine).

Restarts asked by canaries are counted by rounds, not in the breaker's time window: a
cold start of 20-45 minutes plus a round is longer than ``breaker_window_s /
breaker_max_restarts``, so the window never filled and an always-failing canary restarted
the engine every round, forever (issue 36). After ``restarts_in_a_row`` failing rounds
that each asked for a restart, with no passing round between, the next failing round
asks for a hold instead: a person looks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from serving.canary import throughput
from serving.canary.model import CanaryResult, Outcome

log = logging.getLogger("fleetd.canary")

# Recovery's side: (action, reason) -> one line saying what it decided.
AskRecovery = Callable[[str, str], str]


def acting_failures(results: list[CanaryResult], brake_active: bool) -> list[CanaryResult]:
    """The failures a round acts on (throughput's are left out while the brake is on)."""
    return [
        r
        for r in results
        if r.result is Outcome.FAIL and not (r.name == throughput.NAME and brake_active)
    ]


class OnFail:
    """Called with each round's results; asks recovery when ``on_fail`` says so."""

    def __init__(
        self,
        action: str,
        ask: AskRecovery,
        power_brake_active: Callable[[], bool],
        restarts_in_a_row: int = 3,
    ) -> None:
        self._action = action
        self._ask = ask
        self._brake = power_brake_active
        self._max_in_a_row = restarts_in_a_row
        self._in_a_row = 0  # failing rounds that asked for a restart, none passing between

    def __call__(self, results: list[CanaryResult]) -> None:
        """Act once on this round's failures (nothing for ``alert`` or a clean round)."""
        if self._action == "alert":
            return
        failures = acting_failures(results, self._brake())
        if not failures:
            self._in_a_row = 0  # a round that passes ends the streak
            return
        what = "; ".join(f"{r.name}: {r.message}" for r in failures)
        reason = f"canary failed ({what})"[:500]
        action = self._action
        if action == "restart" and self._in_a_row >= self._max_in_a_row:
            action = "hold"
            reason += (
                f"; {self._in_a_row} restarts in a row did not fix it: stopped and held "
                "(on_fail restarts_in_a_row)"
            )
        decided = self._ask(action, reason)
        self._in_a_row = self._in_a_row + 1 if action == "restart" else 0
        log.warning("canary on_fail = %s: %s", action, decided)
