"""Which events and states are alerts: pure functions from facts to fire/resolve signals.

Every alert has a stable fingerprint (the same trouble on the same card is the same
alert, so repeats fold), a severity, a summary meant for a phone's lock screen, and the
advice: the next step. Sources:

- Xid events, one alert per card and Xid class (``xid:<class>:<card>``); they resolve at
  the next reboot, application-class ones also when the engine is ready again.
- Check transitions (``check:<id>:<card|rig>``): VRAM relocked, power brake, power cap
  drift, thermal, NVML unavailable, kernel-log follower down, card lost...; warning or
  critical fires, ok resolves. ``xid_since_boot`` is left to the Xid events themselves,
  and a result the check has not confirmed yet (the brake in 1 of 3 samples) fires
  nothing: the confirmed one does, so a warning is not followed by its critical a
  second later.
- Serving events: engine crashed, held by the breaker, stop stuck; ready again resolves.
- Recovery events of warning or worse (a cap that could not be applied, a decision that
  stopped the engine): one-shot news.
- Canary events: a canary's verdict turned warn or fail fires ``canary:<name>``; pass resolves.
- State: the reboot-required latch (fires while set), and a fleetd that finds its
  previous run never stopped cleanly (one-shot).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from daemon.store.alerts import AlertSignal
from daemon.store.events import EventRow
from daemon.store.keyvalue import Latch
from hwcheck.advice import ACTION_STEPS, ADVICE_STEPS, RigNow
from hwcheck.model import EventKind, Severity, XidAction

ADVICE_UNCLEAN = (
    "Nothing is lost, but find out why: `journalctl -u fleetd -b -1` (OOM, crash, power)."
)
# Friendly names of checks whose alerts people meet most often: a noun, to which the
# summary adds " on card N" (never a title ending in "on": "Power brake on on card 0").
CHECK_TITLES = {
    "vram_unlocked": ("VramRelocked", "VRAM relocked"),
    "power_brake": ("PowerBrake", "Power brake"),
    "power_cap": ("PowerCapDrift", "Power cap drifted"),
    "temperature": ("Thermal", "Too hot"),
    "nvml": ("NvmlUnavailable", "NVML unavailable"),
    "kernel_log": ("KernelLogBlind", "Kernel-log follower down: Xids go unseen"),
    "card_lost": ("CardLost", "Card lost"),
    "card_count": ("CardMissing", "Card missing"),
    "pcie_link": ("PcieLinkDegraded", "PCIe link degraded"),
    "driver_version": ("DriverMismatch", "Driver mismatch"),
    "persistence_mode": ("PersistenceOff", "Persistence mode off"),
    "foreign_gpu_processes": ("ForeignGpuProcess", "Foreign process on the GPUs"),
    "store": ("StoreUnwritable", "History cannot be written"),
    # Host truth, judged against the host baseline.
    "host_kernel": ("HostKernelDrift", "Not the baseline kernel"),
    "kernel_cmdline": ("KernelArgsMissing", "Kernel arguments missing"),
    "driver_module": ("DriverModuleDrift", "Not the baseline nvidia module"),
    "bar1": ("Bar1Lost", "64 GB BAR1 gone"),
    "p2p": ("P2pLost", "P2P lost"),
    "vbios": ("VbiosChanged", "VBIOS changed"),
    "clocks": ("ClocksCapped", "Max clocks below baseline"),
    "pcie_errors": ("PcieErrors", "PCIe errors climbing"),
    "host_resources": ("HostResourcesLow", "Disk or RAM short"),
    "memtest": ("MemoryTestFailed", "Memory test failed"),
}
# Left to their own events: Xids alert per Xid, the canaries per canary (``canary:<name>``).
SKIPPED_CHECKS = frozenset({"xid_since_boot", "engine_output"})
ENGINE_ADVICE = {
    "crash": "fleetd restarts it with backoff; if it keeps crashing read `fleetctl logs`.",
    "held": "Restarts are on hold: read `fleetctl logs`, fix the cause, then `fleetctl start`.",
    "stop_stuck": "The engine will not stop: reboot the host. Never kill -9 its GPU workers.",
}
_PROBLEM = (Severity.WARNING, Severity.CRITICAL)
# Recovery decisions (``details.action``) whose effect raises its own alert.
COVERED_RECOVERY_ACTIONS = frozenset({"stop_and_latch", "hold", "restart_after"})


def _camel(word: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", word) if part)


def _sentence(text: str) -> str:
    """An advice line of the one table, as an alert reads it: capital first, full stop."""
    return text[:1].upper() + text[1:].rstrip(".") + "."


# An alert is read after recovery acted: a fault that latches has stopped the engine
# (its step says so), one that does not has left it running or restarting.
_AFTER_RECOVERY = {True: RigNow(engine_running=False, latched=True), False: RigNow()}


def _action(word: str) -> XidAction:
    return XidAction(word) if word in set(XidAction) else XidAction.INSPECT


def _where(event: EventRow) -> str:
    """The card an event is about, for a fingerprint: PCI address, else index, else rig."""
    if event.pci_bus_id:
        return event.pci_bus_id
    return "rig" if event.card is None else f"card{event.card}"


def _card_labels(event: EventRow) -> dict[str, Any]:
    """The card's labels as ``/metrics`` names them (``gpu``, ``uuid``, ``pci_bus_id``).

    ``card`` (the same index as ``gpu``) stays for receivers written against schema 1.
    """
    labels: dict[str, Any] = {}
    if event.card is not None:
        labels["gpu"] = event.card
        labels["card"] = event.card
    if event.card_uuid:
        labels["uuid"] = event.card_uuid
    if event.pci_bus_id:
        labels["pci_bus_id"] = event.pci_bus_id
    if event.card_serial:
        labels["serial"] = event.card_serial
    return labels


# "card 2 (0000:41:00.0): " at the head of a check's message: the summary says the card.
_CARD_PREFIX = re.compile(r"^card \d+ \([0-9a-f:.]+\): ")


def _card_words(event: EventRow) -> str:
    return "rig" if event.card is None else f"card {event.card}"


def xid_signals(event: EventRow) -> list[AlertSignal]:
    """An Xid: one alert per card and class (more of the same fold into it)."""
    details = event.details or {}
    xid_class = str(details.get("class", "unknown"))
    action = _action(str(details.get("action", "inspect")))
    severity = event.severity if event.severity in _PROBLEM else Severity.WARNING
    latches = event.severity is Severity.CRITICAL  # the xid check's rule: it latches
    return [
        AlertSignal(
            fingerprint=f"xid:{xid_class}:{_where(event)}",
            fire=True,
            rule="xid",
            severity=severity,
            # The headline (the event's message) and one step: never the explanation.
            summary=f"Xid {event.xid} ({details.get('title') or xid_class}) on "
            f"{_card_words(event)}",
            advice=_sentence(ACTION_STEPS[action].text(_AFTER_RECOVERY[latches])),
            labels={
                "alertname": f"Xid{_camel(xid_class)}",
                "xid": event.xid,
                "xid_class": xid_class,
                **_card_labels(event),
            },
        )
    ]


def check_signals(event: EventRow) -> list[AlertSignal]:
    """A check changed severity: warning/critical fires its alert, ok resolves it."""
    details = event.details or {}
    check = str(details.get("check", ""))
    if not check or check in SKIPPED_CHECKS:
        return []
    fingerprint = f"check:{check}:{'rig' if event.card is None else event.card}"
    if event.severity not in _PROBLEM:
        return [AlertSignal(fingerprint, fire=False)]
    if details.get("confirmed") is False:
        return []  # seen too briefly to call: the confirmed result (often critical) alerts
    name, title = CHECK_TITLES.get(check, (f"Check{_camel(check)}", check.replace("_", " ")))
    message = event.message.split(": ", 1)[-1]  # past "<id> <before> -> <after>: "
    message = _CARD_PREFIX.sub("", message)
    where = "" if event.card is None else f" on card {event.card}"
    return [
        AlertSignal(
            fingerprint=fingerprint,
            fire=True,
            rule="check",
            severity=event.severity,
            summary=f"{title}{where}: {message}",
            advice=str(details.get("remedy") or "See `fleetctl status`."),
            labels={"alertname": name, "check": check, **_card_labels(event)},
        )
    ]


def _engine(kind: str, name: str, title: str, event: EventRow, severity: Severity) -> AlertSignal:
    details = event.details or {}
    return AlertSignal(
        fingerprint=f"engine:{kind}",
        fire=True,
        rule="engine",
        severity=severity,
        summary=f"{title}: {event.message}",
        advice=str(details.get("advice") or ENGINE_ADVICE[kind]),
        labels={"alertname": name, "state": str(details.get("state", ""))},
    )


def serving_signals(event: EventRow) -> list[AlertSignal]:
    """Engine crashed, held, stop stuck (fire); ready again or stopped (resolve)."""
    details = event.details or {}
    change, state = str(details.get("kind", "")), str(details.get("state", ""))
    if change == "stop_stuck":
        return [
            _engine("stop_stuck", "EngineStopStuck", "Engine stop stuck", event, Severity.CRITICAL)
        ]
    if change == "breaker" or (change == "state" and state == "held"):
        return [_engine("held", "EngineHeld", "Engine held", event, Severity.CRITICAL)]
    if change == "crash":
        severity = event.severity if event.severity in _PROBLEM else Severity.WARNING
        return [_engine("crash", "EngineCrashed", "Engine crashed", event, severity)]
    if change == "state" and state == "ready":
        return [
            AlertSignal("engine:", fire=False, prefix=True),
            AlertSignal("xid:application:", fire=False, prefix=True),
        ]
    if change == "state" and state == "stopped":
        return [AlertSignal("engine:stop_stuck", fire=False)]
    return []


def recovery_signals(event: EventRow) -> list[AlertSignal]:
    """A recovery event of warning or worse: one-shot news.

    Decisions whose outcome already has its own alert are not sent twice: a stop and latch
    is ``RebootRequired`` (from the latch), a hold is ``EngineHeld``, a restart after a
    crash is ``EngineCrashed``; in dry run nothing happened, so the decision is the news.
    """
    details = event.details or {}
    if event.severity not in _PROBLEM:
        return []
    if details.get("action") in COVERED_RECOVERY_ACTIONS and not details.get("dry_run"):
        return []
    return [
        AlertSignal(
            fingerprint=f"recovery:{event.id}",
            fire=True,
            rule="recovery",
            severity=event.severity,
            summary=f"Recovery on {_card_words(event)}: {event.message}",
            advice=str(details.get("advice") or details.get("remedy") or "See `fleetctl events`."),
            labels={"alertname": "Recovery", **_card_labels(event)},
            one_shot=True,
        )
    ]


def canary_signals(event: EventRow) -> list[AlertSignal]:
    """An engine canary's verdict changed: warn/fail fires ``canary:<name>``, pass resolves."""
    details = event.details or {}
    name = str(details.get("canary", ""))
    if not name:
        return []
    fingerprint = f"canary:{name}"
    if event.severity not in _PROBLEM:
        return [AlertSignal(fingerprint, fire=False)]
    return [
        AlertSignal(
            fingerprint=fingerprint,
            fire=True,
            rule="canary",
            severity=event.severity,
            summary=f"Engine {event.message}",  # "canary <name>: fail (was pass): <what>"
            advice=str(details.get("advice") or "See `fleetctl canary status`."),
            labels={"alertname": f"Canary{_camel(name)}", "canary": name},
        )
    ]


def event_signals(event: EventRow) -> list[AlertSignal]:
    """Every signal one stored event gives."""
    if event.kind is EventKind.XID:
        return xid_signals(event)
    if event.kind is EventKind.CHECK:
        return check_signals(event)
    if event.kind is EventKind.SERVING:
        return serving_signals(event)
    if event.kind is EventKind.RECOVERY:
        return recovery_signals(event)
    if event.kind is EventKind.CANARY:
        return canary_signals(event)
    if event.kind is EventKind.REBOOT and event.message.startswith("host rebooted"):
        return [
            AlertSignal("xid:", fire=False, prefix=True),
            AlertSignal("engine:stop_stuck", fire=False),
        ]
    return []


def latch_signal(latch: Latch | None) -> AlertSignal:
    """The reboot-required latch: fires while set, resolves once cleared."""
    if latch is None:
        return AlertSignal("reboot_required", fire=False)
    return AlertSignal(
        fingerprint="reboot_required",
        fire=True,
        rule="reboot_required",
        severity=Severity.CRITICAL,
        summary=f"Reboot required: {latch.reason}",
        advice=_sentence(ADVICE_STEPS[latch.advice].text(_AFTER_RECOVERY[True])),
        labels={"alertname": "RebootRequired", "latch_source": latch.source},
    )


def unclean_stop_signal(previous: dict[str, Any], now: datetime) -> AlertSignal:
    """fleetd found the marker of a run that never stopped cleanly."""
    pid, since = previous.get("pid", "?"), previous.get("since", "?")
    return AlertSignal(
        fingerprint=f"daemon:unclean_stop:{now.isoformat()}",
        fire=True,
        rule="daemon",
        severity=Severity.WARNING,
        summary=f"fleetd restarted after an unclean stop: pid {pid} (up since {since}) was "
        "killed, crashed or lost power",
        advice=ADVICE_UNCLEAN,
        labels={"alertname": "DaemonUncleanStop"},
        one_shot=True,
    )
