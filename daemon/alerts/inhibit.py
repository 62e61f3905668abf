"""Which alerts are symptoms of which causes: one notification per cause.

Alertmanager's inhibition, as a table: while a cause fires, an alert it explains is kept
(``fleetctl alerts`` lists it) but sends nothing of its own; the cause's next
notifications list it as "also affected". A power brake explains a throughput canary
that reads a quarter speed; a latched hardware fault explains the engine that crashes,
is held or is not started. If the cause resolves while the symptom still fires, the
symptom is news of its own and is sent then.

The table names alerts by ``alertname`` (the names ``daemon.alerts.rules`` gives); a
card's cause covers the same card's symptoms and every rig-wide one, a rig-wide cause
covers all. Matching is in the store (``daemon.store.alert_inhibit``), which only reads
this table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from daemon.store.alerts import AlertSignal

# Slow engine output: the canary that measures it, when the cards are held back.
_SLOW = frozenset({"CanaryThroughput"})
# An engine that cannot run: what recovery does about a latched or lost card.
_ENGINE_DOWN = frozenset({"EngineCrashed", "EngineHeld", "EngineStartRefused"})
# The fault the latch is about: the latch's page says it, with the latch's step (one page
# for an Xid 31 or a wedged card, not RebootRequired plus the Xid or the probe).
_LATCHED_FAULT = frozenset({"XidHardware", "CheckCudaProbe", "CardLost"})
# What a kernel that is not the baseline takes away (status groups them under it).
_KERNEL = frozenset({"Bar1Lost", "P2pLost"})
# One deep round of one build: the copy at depth decays first; recall and loops follow.
_DEEP = frozenset({"CanaryRecall", "CanaryLoop"})

INHIBITS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "PowerBrake": _SLOW,  # a quarter of the throughput, by definition
        "Thermal": _SLOW,  # thermal slowdown
        "PowerCapDrift": _SLOW,  # a cap below target slows the cards
        "ClocksCapped": _SLOW,
        "PcieLinkDegraded": _SLOW,  # a Gen1 link after boot
        "RebootRequired": _ENGINE_DOWN | _LATCHED_FAULT,  # the fault, and the engine under it
        "HostKernelDrift": _KERNEL,  # BAR1 and P2P lost with the stock kernel
        "CanaryCopyDepth": _DEEP,  # the deep round's decay, one page per round
        "XidHardware": _ENGINE_DOWN,
        "CardLost": _ENGINE_DOWN,
        "NvmlUnavailable": _ENGINE_DOWN,
    }
)


def _name(signal: AlertSignal) -> str:
    return str(signal.labels.get("alertname") or "")


def causes_first(
    signals: Sequence[AlertSignal], inhibits: Mapping[str, frozenset[str]]
) -> list[AlertSignal]:
    """The signals of one pass with each cause's firing first.

    A symptom seen in the same pass then folds into it whatever order the events came in
    (BAR1's check before the kernel's), and a cause that is itself another's symptom comes
    after that one. Only a cause whose fingerprint has no other signal in the pass moves: a
    fire, resolve, fire of one alert keeps its order.
    """
    seen = Counter(signal.fingerprint for signal in signals)
    first = [
        signal
        for signal in signals
        if signal.fire
        and not signal.amend
        and seen[signal.fingerprint] == 1
        and _name(signal) in inhibits
    ]
    moved = {id(signal) for signal in first}
    # A cause that is another's symptom (XidHardware under RebootRequired) after that one.
    symptoms = frozenset().union(*inhibits.values())
    first.sort(key=lambda signal: _name(signal) in symptoms)
    return first + [signal for signal in signals if id(signal) not in moved]
