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

# The host steps that reboot: a wrong default boot entry refuses them until it is fixed.
_REBOOTS = frozenset({Advice.WARM_REBOOT, Advice.COLD_POWER_CYCLE})


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
    # The step the latch in force asks for (its rung: a warm reboot, a cold power cycle,
    # the card out) and the card it is about: every host step reads the latch's rung, so a
    # check's fix line never says "reboot" once the latch has escalated past it.
    latch_advice: Advice | None = None
    latch_card: int | None = None
    # The default boot entry is not the baseline kernel: a reboot would be refused, so a
    # host step says to fix the entry first.
    wrong_boot: str | None = None


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
    # The host-level step this is (a reboot, a power cycle, the card out; None: not one):
    # under a latch, a host step reads the latch's rung instead.
    host: Advice | None = None

    @classmethod
    def same(cls, text: str) -> Step:
        """A step that reads the same in every state."""
        return cls(text, text)

    def text(self, now: RigNow) -> str:
        """The one action for the state the rig is in now.

        A host step under a latch is the latch's own step (its rung), and ahead of any
        reboot comes the boot entry when it would boot the wrong kernel.
        """
        rung = now.latch_advice if now.latched else None
        if self.host is not None and rung is not None and rung is not self.host:
            return ADVICE_STEPS[rung].text(now)
        if now.latched and self.latched is not None:
            text = self.latched
        else:
            text = self.running if now.engine_running else self.stopped
        if "{card}" in text:
            card = now.latch_card
            text = text.replace("{card}", "the card" if card is None else f"card {card}")
        if self.host in _REBOOTS and now.wrong_boot:
            text = f"fix the boot entry first ({now.wrong_boot}: see host_kernel), then {text}"
        return text


# The one table of what each advice tells a person (status, latch, alerts, dashboard, top,
# explain), by the rig's state now.
ADVICE_STEPS: dict[Advice, Step] = {
    Advice.WARM_REBOOT: Step(
        host=Advice.WARM_REBOOT,
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
        host=Advice.COLD_POWER_CYCLE,
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
    Advice.TAKE_CARD_OUT: Step(
        host=Advice.TAKE_CARD_OUT,
        running=(
            "take {card} out: stop the engine (fleetctl stop), serve a profile whose gpus "
            "leave it out (fleetctl clear-reboot-latch --reason TEXT, then fleetctl serve "
            "PROFILE), and reseat or replace it with the rig powered off"
        ),
        stopped=(
            "take {card} out: serve a profile whose gpus leave it out (fleetctl "
            "clear-reboot-latch --reason TEXT, then fleetctl serve PROFILE), and reseat or "
            "replace it with the rig powered off"
        ),
        why=(
            "The card faulted again after a warm reboot and a cold power cycle: no reboot "
            "fixes it. Another reboot only brings the same fault back, so the card comes "
            "out of the profile (a profile whose gpus leave it out, served once a person "
            "clears the latch), then is reseated in its riser or replaced with the rig "
            "powered off. fleetctl reboot --confirm is refused while this is the advice "
            "(--force overrides)."
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
