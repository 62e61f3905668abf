"""``[canary] on_fail``: one restart per failing round through recovery, counted, never latched.

The policy's answer for each fact, then the controller's one start path with a recording
engine: restarts counted by the breaker (a full window holds instead), dry run deciding
without moving, the reboot latch and a stopped engine leaving everything as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

from daemon.canaries.on_fail import OnFail, acting_failures
from hwcheck.model import Advice
from recovery.decisions import NoAction, Refuse, Start, StopAndHold
from recovery.facts import EngineCondition, Facts, LatchFact, PolicySettings, Trigger
from recovery.policy import decide
from recovery.settings import RecoverySettings
from serving.canary.model import CanaryResult, Outcome, Verdict
from tests.support.executor_rig import Rig
from tests.support.recovery_ports import standalone_recovery

RUNNING = Facts(
    Trigger.CANARY_FAIL,
    engine=EngineCondition.RUNNING,
    canary_action="restart",
    canary_reason="canary failed (copy_depth: breaks at 96k)",
)


def test_the_policy_restarts_a_running_engine_once_the_gate_allows_it() -> None:
    decision = decide(RUNNING, 100.0)
    assert isinstance(decision, Start)
    assert decision.reason.startswith("canary failed (copy_depth: breaks at 96k); restarting")


def test_never_under_the_latch_nor_a_stopped_engine_nor_alert_only() -> None:
    latched = replace(RUNNING, latch=LatchFact("Xid 79 on card 1", Advice.WARM_REBOOT))
    assert "reboot latch is set" in decide(latched, 100.0).reason  # type: ignore[union-attr]
    assert isinstance(decide(latched, 100.0), NoAction)
    stopped = replace(RUNNING, engine=EngineCondition.STOPPED)
    assert isinstance(decide(stopped, 100.0), NoAction)
    rebooting = replace(RUNNING, host_rebooting=True)
    assert isinstance(decide(rebooting, 100.0), NoAction)
    assert isinstance(decide(replace(RUNNING, canary_action="alert"), 100.0), NoAction)


def test_hold_and_a_full_breaker_window_stop_and_hold() -> None:
    assert isinstance(decide(replace(RUNNING, canary_action="hold"), 100.0), StopAndHold)
    settings = PolicySettings(breaker_max_restarts=2, breaker_window_s=600.0)
    full = replace(RUNNING, settings=settings, restart_times_s=(50.0, 90.0))
    decision = decide(full, 100.0)
    assert isinstance(decision, StopAndHold)
    assert "2 restarts within 600 s" in decision.reason
    old = replace(full, restart_times_s=(-900.0, -800.0))
    assert isinstance(decide(old, 100.0), Start)


def test_a_start_the_gate_refuses_is_refused_before_anything_stops() -> None:
    linted = replace(RUNNING, recipe_errors=("layer_partition sums to 42, not 43",))
    assert isinstance(decide(linted, 100.0), Refuse)


@dataclass
class Engine(Rig):
    """A running engine that records what recovery asks of it (the executors' recorder)."""

    def condition(self) -> EngineCondition:
        return EngineCondition.RUNNING

    def restart_automatic(self, reason: str) -> None:
        self.calls.append("restart")

    def stop_and_hold(self, reason: str) -> bool:
        self.calls.append("stop_and_hold")
        return True


def controller(engine: Engine, **settings: object) -> object:
    now = [1000.0]
    recovery = RecoverySettings(breaker_max_restarts=2, **settings)  # type: ignore[arg-type]
    control, _ = standalone_recovery(recovery, engine, clock=lambda: now[0])
    control.attach_engine(engine)
    return control


def test_each_failing_round_restarts_once_and_the_breaker_counts_them() -> None:
    engine = Engine()
    control = controller(engine)
    reason = "canary failed (copy_fidelity: 5/10 identifiers)"
    assert control.on_canary_failure("restart", reason).startswith("start done")  # type: ignore[attr-defined]
    assert control.on_canary_failure("restart", reason).startswith("start done")  # type: ignore[attr-defined]
    third = control.on_canary_failure("restart", reason)  # type: ignore[attr-defined]
    assert third.startswith("stop_and_hold done")
    assert engine.calls == ["restart", "restart", "stop_and_hold"]
    assert [a[1] for a in engine.audit] == ["start", "start", "stop_and_hold"]


def test_under_the_latch_or_in_dry_run_nothing_moves() -> None:
    engine = Engine(latched=LatchFact("Xid 79 on card 1", Advice.WARM_REBOOT))
    answer = controller(engine).on_canary_failure("restart", "canary failed")  # type: ignore[attr-defined]
    assert answer.startswith("nothing done: canary failed; the reboot latch is set")
    assert engine.calls == []
    dry = Engine()
    said = controller(dry, dry_run=True).on_canary_failure("hold", "canary failed")  # type: ignore[attr-defined]
    assert "not done: dry run" in said
    assert dry.calls == []


def result(name: str, outcome: Outcome) -> CanaryResult:
    return CanaryResult.of(name, "ratio", Verdict(outcome, 0.1, "m"), 1.0, datetime.now(UTC))


def test_only_failures_act_and_never_throughput_under_the_power_brake() -> None:
    round_ = [result("throughput", Outcome.FAIL), result("tool_calls", Outcome.WARN)]
    assert acting_failures(round_, brake_active=True) == []
    assert [r.name for r in acting_failures(round_, brake_active=False)] == ["throughput"]
    asked: list[tuple[str, str]] = []
    act = OnFail("restart", lambda action, why: asked.append((action, why)) or "ok", lambda: False)
    act([result("tool_calls", Outcome.WARN)])
    assert asked == []
    act([result("copy_fidelity", Outcome.FAIL), result("loop", Outcome.FAIL)])
    assert asked == [("restart", "canary failed (copy_fidelity: m; loop: m)")]
    OnFail("alert", lambda a, w: asked.append((a, w)) or "", lambda: False)(
        [result("copy_fidelity", Outcome.FAIL)]
    )
    assert len(asked) == 1
