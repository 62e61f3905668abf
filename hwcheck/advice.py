"""The one advice table: each fault's action, worded for the state the rig is in now.

``Advice`` (``hwcheck.model``) is the host-level step a reboot-required latch asks for,
stored as its word; ``XidAction`` is what the catalogue advises after an Xid. Every
surface (the checks' remedies, the latch in status, alerts, top, the dashboard,
``fleetctl explain``) reads its words here, so they never disagree, and each is given the
state it is read in (``RigNow``): no "stop the engine" once it is stopped, no "start the
engine" while the latch would refuse it. The long text behind a step (``Step.why``) is
shown once, never in a step or a headline.
"""

from __future__ import annotations

from dataclasses import dataclass

from hwcheck.model import Advice, XidAction


@dataclass(frozen=True, slots=True)
class RigNow:
    """What the next step depends on besides the fault: is the engine running, is the latch set.

    The same fault asks for different words then: no "stop the engine" once it is stopped,
    no "start the engine" while the latch would refuse it. The default (running, no latch)
    is the cautious reading when the state is not known (``fleetctl check``).
    """

    engine_running: bool = True
    latched: bool = False
    # The cards the profile in force uses (None: every card, or no engine configured): a
    # foreign holder of only other cards is information, not a warning.
    profile_cards: frozenset[int] | None = None


@dataclass(frozen=True, slots=True)
class Step:
    """One fault's action, as a person reads it, for each state of the rig (``RigNow``).

    ``running``/``stopped``: the words while the engine runs / once it is stopped;
    ``latched``: while the reboot-required latch is set (``None``: as the engine's state
    says). ``why``: the long explanation, shown once (``fleetctl explain``, ``status
    --verbose``, the status document's ``explanations``), never in a headline or a step.
    """

    running: str
    stopped: str
    latched: str | None = None
    why: str = ""

    @classmethod
    def same(cls, text: str) -> Step:
        """A step that reads the same in every state."""
        return cls(text, text)

    def text(self, now: RigNow) -> str:
        """The one action for the state the rig is in now."""
        if now.latched and self.latched is not None:
            return self.latched
        return self.running if now.engine_running else self.stopped


# The one table of what each advice tells a person (status, latch, alerts, dashboard, top,
# explain), by the rig's state now.
ADVICE_STEPS: dict[Advice, Step] = {
    Advice.WARM_REBOOT: Step(
        running="reboot the host: fleetctl reboot --confirm (it stops the engine cleanly first)",
        stopped="reboot the host: fleetctl reboot --confirm (the engine is already stopped)",
        why=(
            "The card may be wedged even while NVML still looks normal, and only a reboot "
            "resets it: nvidia-smi -r is not supported on CMP 170HX cards and reloading "
            "nvidia_uvm has ended in Xid 154, so never try either. fleetctl reboot --confirm "
            "stops the engine cleanly, then runs [recovery] reboot_command; until then the "
            "reboot-required latch refuses every engine start (fleetctl clear-reboot-latch "
            "--reason TEXT is the recorded override)."
        ),
    ),
    Advice.COLD_POWER_CYCLE: Step(
        running=(
            "power the rig off for about 30 s, then on: fleetctl reboot --confirm --cold "
            "(it stops the engine cleanly first)"
        ),
        stopped=(
            "power the rig off for about 30 s, then on: fleetctl reboot --confirm --cold "
            "(the engine is already stopped)"
        ),
        why=(
            "GSP/PMU faults on these cards have survived a warm reboot: the cards' firmware "
            "only starts afresh once the power is off for about 30 s. fleetctl reboot "
            "--confirm --cold stops the engine cleanly, then runs [recovery] "
            "power_cycle_command (an IPMI call, for example); with none configured, power the "
            "rig off by hand. Until then the reboot-required latch refuses every engine start."
        ),
    ),
}
# What to do after an Xid, per catalogue action (the xid check's remedy, the Xid alerts'
# advice); the two that need the host are the latch's own steps.
ACTION_STEPS: dict[XidAction, Step] = {
    XidAction.COLD_POWER_CYCLE: ADVICE_STEPS[Advice.COLD_POWER_CYCLE],
    XidAction.REBOOT: ADVICE_STEPS[Advice.WARM_REBOOT],
    XidAction.INSPECT: Step.same(
        "inspect the kernel log around it (dmesg | grep -i xid) and the engine log"
    ),
    XidAction.RESTART_ENGINE: Step(
        running="restart the engine (fleetctl restart); the card itself is healthy",
        stopped="start the engine (fleetctl start); the card itself is healthy",
        latched="nothing for this Xid: the step the reboot-required latch asks for comes first",
    ),
    XidAction.NONE: Step.same("no action needed; watch for repeats"),
}
