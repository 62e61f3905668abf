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

from collections.abc import Mapping
from types import MappingProxyType

# Slow engine output: the canary that measures it, when the cards are held back.
_SLOW = frozenset({"CanaryThroughput"})
# An engine that cannot run: what recovery does about a latched or lost card.
_ENGINE_DOWN = frozenset({"EngineCrashed", "EngineHeld", "EngineStartRefused"})

INHIBITS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "PowerBrake": _SLOW,  # a quarter of the throughput, by definition
        "Thermal": _SLOW,  # thermal slowdown
        "PowerCapDrift": _SLOW,  # a cap below target slows the cards
        "ClocksCapped": _SLOW,
        "PcieLinkDegraded": _SLOW,  # a Gen1 link after boot
        "RebootRequired": _ENGINE_DOWN,  # crash loops and refusals under a latched fault
        "XidHardware": _ENGINE_DOWN,
        "CardLost": _ENGINE_DOWN,
        "NvmlUnavailable": _ENGINE_DOWN,
    }
)
