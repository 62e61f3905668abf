"""The rig's one verdict: OK, WARNING, CRITICAL or UNKNOWN, and the one line that says why.

One function judges it, so ``fleetctl check`` (the results alone), fleetd's status, its
systemd ``STATUS=`` line and ``/metrics`` (results, the reboot latch, the engine's state)
can never disagree. fleetd judges once per poll and whenever the latch or the engine's
state changes; a reader only turns a verdict ``unknown`` when the readings behind it have
gone stale.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hwcheck.advice import RigNow
from hwcheck.model import Advice, CheckResult, Severity, worst_severity

# An engine in these states serves nothing: the rig is not OK even if every card is.
ENGINE_DOWN_STATES = frozenset({"failed", "held", "backoff", "unhealthy"})
# An engine process exists (or is about to) in these: a step must stop it first.
ENGINE_RUNNING_STATES = frozenset({"starting", "ready", "unhealthy", "stopping"})
UNKNOWN = "unknown"
# The monitoring-plugin code of each verdict (``status``/``check`` exit codes, /metrics).
RANKS = {"ok": 0, "warning": 1, "critical": 2, UNKNOWN: 3}


@dataclass(frozen=True, slots=True)
class RigVerdict:
    """``overall`` (``ok|warning|critical|unknown``) and why, in one line."""

    overall: str
    why: str

    @property
    def rank(self) -> int:
        """0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (the exit code of ``status``)."""
        return RANKS[self.overall]

    def read(self, stale_reason: str | None) -> RigVerdict:
        """This verdict as a reader sees it now: unknown once its readings are stale."""
        return self if stale_reason is None else RigVerdict(UNKNOWN, stale_reason)


NO_DATA = RigVerdict(UNKNOWN, "no poll yet")
ALERT_WHY = "alert "  # a verdict an alert set says so first: "alert NAME: summary"


@dataclass(frozen=True, slots=True)
class FiringAlert:
    """An alert firing now that no check result carries (an engine metric, a canary...).

    A page a person got must read the same in the verdict: a warning paged while status
    said OK (exit 0) is two answers to one question.
    """

    name: str
    severity: Severity
    summary: str


def judge(
    results: Sequence[CheckResult],
    *,
    latch_reason: str | None = None,
    engine_state: str | None = None,
    alerts: Sequence[FiringAlert] = (),
) -> RigVerdict:
    """The verdict on ``results``, the latch, the engine and the alerts firing now.

    The latch is critical, an engine that serves nothing a warning, and each firing alert
    counts at its severity.
    """
    verdict = _judge_rig(results, latch_reason, engine_state)
    firing = [a for a in alerts if a.severity.rank > 0]
    if not firing:
        return verdict
    worst = max(firing, key=lambda a: a.severity.rank)
    if worst.severity.rank <= RANKS[verdict.overall]:  # unknown (3) stays unknown
        return verdict
    return RigVerdict(worst.severity.value, f"{ALERT_WHY}{worst.name}: {worst.summary}")


def _judge_rig(
    results: Sequence[CheckResult], latch_reason: str | None, engine_state: str | None
) -> RigVerdict:
    worst = worst_severity(list(results))
    problems = sorted(
        (r for r in results if r.severity.rank > 0), key=lambda r: r.severity.rank, reverse=True
    )
    why = f"{problems[0].id}: {problems[0].message}" if problems else "every check passes"
    if latch_reason is not None:
        return RigVerdict(Severity.CRITICAL.value, f"reboot required: {latch_reason}")
    if engine_state in ENGINE_DOWN_STATES and worst is Severity.OK:
        return RigVerdict(Severity.WARNING.value, f"the engine is {engine_state}")
    return RigVerdict(worst.value, why)


def rig_now(
    engine_state: str | None,
    latched: bool,
    profile_cards: frozenset[int] | None = None,
    *,
    latch_advice: Advice | None = None,
    latch_card: int | None = None,
    wrong_boot: str | None = None,
) -> RigNow:
    """The state a fault's step is worded for (``hwcheck.model.Step``).

    No engine, stopped, the latch's rung and card, a default boot entry a reboot would
    refuse.
    """
    return RigNow(
        engine_running=engine_state in ENGINE_RUNNING_STATES,
        latched=latched,
        profile_cards=profile_cards,
        latch_advice=latch_advice if latched else None,
        latch_card=latch_card if latched else None,
        wrong_boot=wrong_boot,
    )
