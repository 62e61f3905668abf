"""The recovery policy: ``decide(facts, now_s) -> Decision``, pure, no I/O, no clock.

It follows the recovery rules (docs/architecture.md "Recovery rules"). A hardware fault (an
Xid whose catalogue answer latches, a lost card, a recovery action asking for a reset or
reboot, a failed CUDA probe, a ``driver_poisoned`` crash) stops the engine cleanly and
latches a reboot, whatever else is going on: an Xid 31 often kills the engine a moment
before its line is read, so the exit that follows must not be mistaken for an application
crash. A card that faults again within ``escalate_within_boots`` boots after a warm reboot
is advised a cold power cycle (the warm reboot did not help). Otherwise an engine exit on a
healthy rig restarts with capped exponential backoff, and too many restarts in the window
hold the engine. Starts (a person's, autostart's, the bring-up's, the end of a backoff)
pass one gate (``recovery.gate``); a stop asked for (a person's, a profile switch's, the
host's reboot, fleetd's exit) is carried out, never refused. There are no moves here that
reload ``nvidia_uvm``, reset a GPU or kill workers: the decisions cannot express them.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

from hwcheck.model import Advice, LostKind, XidClass
from hwcheck.recovery_actions import recovery_action_info, recovery_action_words
from recovery.decisions import (
    AdviseInspection,
    Decision,
    Hold,
    NoAction,
    Refuse,
    RestartAfter,
    Start,
    Stop,
    StopAndHold,
    StopAndLatch,
)
from recovery.facts import (
    STARTS,
    STOPS,
    CardFault,
    EngineCondition,
    Facts,
    PastFault,
    PolicySettings,
    ProbeOutcome,
    Trigger,
)
from recovery.gate import start_gate
from serving.runtime.classify import CrashClass

_LOST_WHAT = {
    LostKind.RESET_REQUIRED: "NVML: reset required",
    LostKind.GPU_IS_LOST: "NVML: GPU is lost",
    LostKind.NOT_ANSWERING: "NVML: calls do not return",
    LostKind.UNKNOWN: "NVML: unknown error",
}
_LOST_WORDS = {
    LostKind.RESET_REQUIRED: "needs a reset (NVML: reset required; a reboot on these cards)",
    LostKind.GPU_IS_LOST: "is lost (NVML: GPU is lost)",
    LostKind.NOT_ANSWERING: "is lost (NVML calls on it do not return)",
    LostKind.UNKNOWN: "is lost (NVML: unknown error)",
}


def backoff_delay_s(settings: PolicySettings, failure_in_a_row: int) -> float:
    """Delay before the restart that follows the ``failure_in_a_row``-th failure.

    A ``backoff_max_s`` below the base means no growth (every wait is the base).
    """
    exponent = min(max(failure_in_a_row, 1) - 1, 64)  # capped: a long streak cannot overflow
    cap_s = max(settings.backoff_max_s, settings.backoff_base_s)
    return float(min(settings.backoff_base_s * 2**exponent, cap_s))


def restarts_in_window(
    settings: PolicySettings, restart_times_s: tuple[float, ...], now_s: float
) -> int:
    """How many automatic restarts happened within the breaker window before ``now_s``."""
    return sum(1 for t in restart_times_s if now_s - t <= settings.breaker_window_s)


def _card_fault(fault: CardFault) -> StopAndLatch | None:
    if fault.lost_kind is not None:
        return StopAndLatch(
            f"card {fault.card} {_LOST_WORDS[fault.lost_kind]}",
            Advice.WARM_REBOOT,
            fault.card,
            _LOST_WHAT[fault.lost_kind],
        )
    code = fault.recovery_action
    if not code:
        return None
    # NVML field 230 is judged by the table Xid 154's code is (hwcheck.recovery_actions).
    advice = recovery_action_info(code).advice
    if advice is None:
        return None
    words = recovery_action_words(code)
    return StopAndLatch(
        f"card {fault.card}: NVML recovery action {code}: {words}",
        advice,
        fault.card,
        f"NVML recovery action {code} ({words})",
    )


def _hardware_faults(facts: Facts) -> Iterator[StopAndLatch]:
    for fact in facts.new_xids:
        advice = fact.info.advice
        if advice is not None:
            where = f"card {fact.card}" if fact.card is not None else None
            yield StopAndLatch(
                fact.info.headline(where), advice, fact.card, fact.info.headline(None)
            )
    for fault in facts.card_faults:
        found = _card_fault(fault)
        if found is not None:
            yield found
    for probe in facts.probes:
        if probe.outcome in (ProbeOutcome.FAILED, ProbeOutcome.TIMED_OUT):
            detail = f": {probe.error}" if probe.error else ""
            yield StopAndLatch(
                f"CUDA probe {probe.outcome} on card {probe.card}{detail} (the card is wedged)",
                Advice.WARM_REBOOT,
                probe.card,
                f"CUDA probe {probe.outcome}",
            )
    exit_ = facts.engine_exit
    if exit_ is not None and exit_.crash_class is CrashClass.DRIVER_POISONED:
        yield StopAndLatch(
            "the engine crashed with a poisoned driver (CUDA driver initialization failed)",
            Advice.WARM_REBOOT,
            what="a poisoned CUDA driver",
        )


def short_time(iso: str) -> str:
    """``2026-12-06 04:42 UTC`` for a person (a phone), from a stored ISO time.

    Anything that is not an ISO time is shown as it is.
    """
    try:
        when = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    if when.tzinfo is not None:
        when = when.astimezone(UTC)
    return f"{when:%Y-%m-%d %H:%M} UTC"


def _times(count: int, one: str) -> str:
    return f"{count} {one}" if count == 1 else f"{count} {one}s"


def attempts_words(first: PastFault) -> str:
    """The reboots since the card's first fault in the chain, counted for the next rung.

    "1 warm reboot and 1 cold power cycle".
    """
    parts = []
    if first.warm_reboots:
        parts.append(_times(first.warm_reboots, "warm reboot"))
    if first.cold_cycles:
        parts.append(_times(first.cold_cycles, "cold power cycle"))
    return " and ".join(parts) or "a reboot"


def _chain(card: int, facts: Facts) -> list[PastFault]:
    """The card's earlier faults that follow each other within ``escalate_within_boots``.

    Nearest first; a fault far back, after a quiet run, starts no chain.
    """
    within = facts.settings.escalate_within_boots
    mine = sorted((p for p in facts.past_faults if p.card == card), key=lambda p: p.boots_ago)
    chain: list[PastFault] = []
    reach = 0
    for past in mine:
        if past.boots_ago < 1:
            continue
        if past.boots_ago - reach > within:
            break
        chain.append(past)
        reach = past.boots_ago
    return chain


def escalate(fault: StopAndLatch, facts: Facts) -> StopAndLatch:
    """The next rung for a card whose earlier fault a reboot did not fix.

    After a warm reboot: a cold power cycle. After a cold power cycle too: the card out
    (its profile without it, reseated or replaced), counting the attempts; never back to
    a warm reboot.
    """
    within = facts.settings.escalate_within_boots
    if fault.card is None or within < 1:
        return fault
    chain = _chain(fault.card, facts)
    if not chain:
        return fault
    last, first = chain[0], chain[-1]
    if any(past.power_cycled for past in chain):
        history = (
            f"card {fault.card} faulted again after {attempts_words(first)} (first {first.what}, "
            f"at {short_time(first.at)}): no reboot fixes it, take it out"
        )
        return StopAndLatch(
            f"{fault.reason}; {history}", Advice.TAKE_CARD_OUT, fault.card, fault.what
        )
    if fault.advice is Advice.COLD_POWER_CYCLE:
        return fault
    boots = "the boot before this one" if last.boots_ago == 1 else f"{last.boots_ago} boots ago"
    reboot = (
        f"the warm reboot at {short_time(last.rebooted_at)}"
        if last.rebooted_at
        else "the warm reboot"
    )
    history = (
        f"card {fault.card} had a hardware fault {boots} ({last.what}, at {short_time(last.at)}) and "
        f"{reboot} after it did not help: it needs a cold power cycle"
    )
    return StopAndLatch(
        f"{fault.reason}; {history}", Advice.COLD_POWER_CYCLE, fault.card, fault.what
    )


_RUNG = {Advice.TAKE_CARD_OUT: 2, Advice.COLD_POWER_CYCLE: 1, Advice.WARM_REBOOT: 0}


def _worst(faults: list[StopAndLatch]) -> StopAndLatch:
    """The fault to act on: the highest rung, else the first seen.

    The card out outranks a cold power cycle, which outranks a warm reboot.
    """
    return max(faults, key=lambda fault: _RUNG[fault.advice])


def _after_exit(facts: Facts, now_s: float) -> Decision:
    settings = facts.settings
    exit_ = facts.engine_exit
    what = "engine ended"
    streak = facts.failures_in_a_row
    if exit_ is not None:
        what = exit_.description or f"engine ended ({exit_.crash_class or 'unclassified'})"
        ready_s = exit_.ready_for_s
        if ready_s is not None and ready_s >= settings.backoff_reset_after_s:
            streak = 0  # it served long enough: this failure is the first of a new streak
    if facts.host_rebooting:
        return NoAction(f"{what}: the host is rebooting; the bring-up after it starts the engine")
    if not settings.restart_on_failure:
        return NoAction(f"{what}; automatic restart is off")
    refusals, _ = start_gate(facts)
    if refusals:
        return Refuse(refusals)
    recent = restarts_in_window(settings, facts.restart_times_s, now_s)
    if recent >= settings.breaker_max_restarts:
        return Hold(
            f"{what}; {recent} restarts within {settings.breaker_window_s:g} s: "
            "held until a person starts it"
        )
    failure = streak + 1
    delay = backoff_delay_s(settings, failure)
    return RestartAfter(
        delay, failure, f"{what}; restarting in {delay:g} s (failure {failure} in a row)"
    )


def _start(facts: Facts, reason: str) -> Decision:
    refusals, warnings = start_gate(facts)
    if refusals:
        return Refuse(refusals)
    return Start(reason, warnings)


def _automatic_start(facts: Facts, reason: str) -> Decision:
    if not facts.settings.autostart:
        return NoAction("autostart is off")
    if facts.operator_hold:
        return NoAction("not started: a person stopped the engine (or the breaker holds it)")
    if facts.engine is EngineCondition.RUNNING:
        return NoAction("the engine already runs")
    return _start(facts, reason)


_STOP_WORDS = {
    Trigger.STOP_REQUEST: "stopped by operator",
    Trigger.SWITCH: "switching profiles",
    Trigger.HOST_REBOOT: "the host reboots",
    Trigger.SHUTDOWN: "fleetd is shutting down (stop_on_exit)",
}


def reads_recipe(facts: Facts) -> bool:
    """Whether ``decide`` reads the recipe (its cards, its lint errors) for these facts.

    A start's gate does, and so does an exit's restart on a healthy rig (the gate again).
    An Xid, a card fault, a probe, a stop, or an exit that latches do not: they decide,
    and latch, without touching the model's disk (a slow or sick disk must not delay
    the latch after an Xid). The controller gathers the recipe's facts only when True.
    """
    if facts.trigger in STARTS:
        return True
    if facts.trigger is Trigger.CANARY_FAIL:  # a restart passes the start gate first
        return facts.canary_action == "restart" and facts.latch is None
    if facts.trigger is not Trigger.ENGINE_EXIT:
        return False
    if facts.host_rebooting or not facts.settings.restart_on_failure:
        return False
    return next(_hardware_faults(facts), None) is None


def _after_canaries(facts: Facts, now_s: float) -> Decision:
    """A failing canary round with ``on_fail`` restart or hold: one move, or none.

    Never under the reboot latch (a latched rig is a person's to move), never for an
    engine that is not running, never while the host reboots. A restart passes the start
    gate first (a refused start would leave the engine stopped) and counts for the
    breaker: when the window is full, the engine is stopped and held instead.
    """
    what = facts.canary_reason or "a canary round failed"
    if facts.canary_action not in ("restart", "hold"):
        return NoAction(f"{what}; on_fail only alerts")
    if facts.latch is not None:
        return NoAction(f"{what}; the reboot latch is set: no restart under it")
    if facts.host_rebooting:
        return NoAction(f"{what}; the host is rebooting")
    if facts.engine is not EngineCondition.RUNNING:
        return NoAction(f"{what}; the engine is not running")
    if facts.canary_action == "hold":
        return StopAndHold(f"{what}; stopped and held until a person starts it (on_fail = hold)")
    settings = facts.settings
    recent = restarts_in_window(settings, facts.restart_times_s, now_s)
    if recent >= settings.breaker_max_restarts:
        return StopAndHold(
            f"{what}; {recent} restarts within {settings.breaker_window_s:g} s: stopped and "
            "held until a person starts it"
        )
    refusals, warnings = start_gate(facts)
    if refusals:
        return Refuse(refusals)
    return Start(f"{what}; restarting the engine (on_fail = restart)", warnings)


def decide(facts: Facts, now_s: float) -> Decision:
    """The one decision for ``facts`` at monotonic time ``now_s``."""
    if facts.trigger in STOPS:
        return Stop(facts.stop_reason or _STOP_WORDS[facts.trigger])
    faults = [escalate(fault, facts) for fault in _hardware_faults(facts)]
    if faults:
        return _worst(faults)
    match facts.trigger:
        case Trigger.ENGINE_EXIT:
            return _after_exit(facts, now_s)
        case Trigger.START_REQUEST:
            return _start(facts, "started by a person")
        case Trigger.BACKOFF_DUE:
            return _start(
                facts, f"automatic restart after failure {facts.failures_in_a_row} in a row"
            )
        case Trigger.AUTOSTART:
            return _automatic_start(facts, "autostart")
        case Trigger.BRING_UP:
            return _automatic_start(facts, "autostart after the reboot's bring-up")
        case Trigger.CANARY_FAIL:
            return _after_canaries(facts, now_s)
    unknown = [x for x in facts.new_xids if x.info.xid_class is XidClass.UNKNOWN]
    if unknown:
        first = unknown[0]
        where = f"card {first.card}" if first.card is not None else None
        return AdviseInspection(first.info.headline(where), first.card)
    return NoAction("no hardware fault")
