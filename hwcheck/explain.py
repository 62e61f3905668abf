"""The long explanations behind fault headlines, each shown once.

A fault's headline (``Xid 31 (MMU page fault) on card 1``) and its one step travel
everywhere: events, log lines, alerts, the latch's reason. The explanation behind them
(why cmpfleet judges the fault so, what the step does) is long, so it is shown once: in
the status document's ``explanations`` (``fleetctl status --verbose``) for the faults of
this boot, and by ``fleetctl explain`` for any fault kind that has one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from hwcheck.advice import ADVICE_STEPS
from hwcheck.check_texts import CHECK_TEXTS
from hwcheck.checks import xid_since_boot
from hwcheck.model import Advice, XidInfo


@dataclass(frozen=True, slots=True)
class Explanation:
    """One fault kind's long text: ``fault`` names it as ``fleetctl explain`` takes it."""

    fault: str
    title: str
    text: str

    def as_dict(self) -> dict[str, str]:
        """``{fault, title, text}``: the status document's and ``explain --json``'s form."""
        return {"fault": self.fault, "title": self.title, "text": self.text}


def of_xid(info: XidInfo) -> Explanation:
    """What the catalogue (with the config's overrides) says about one Xid.

    The text ends with NVIDIA's resolution for the code and, where cmpfleet's action
    departs from it, why on a CMP rig.
    """
    return Explanation(f"xid {info.xid}", info.title, " ".join(xid_text(info)))


def xid_text(info: XidInfo) -> list[str]:
    """The explanation, then NVIDIA's resolution and cmpfleet's action (and why they differ)."""
    lines = [info.explanation]
    nvidia = info.nvidia or "not in NVIDIA's published catalogue"
    lines.append(f"NVIDIA's resolution: {nvidia}.")
    if info.differs:
        lines.append(
            f"cmpfleet: {info.action.value}, which differs; why on a CMP rig: {info.differs}."
        )
    else:
        lines.append(f"cmpfleet: {info.action.value}, following NVIDIA.")
    return lines


def of_advice(advice: Advice) -> Explanation:
    """Why the latch asks for this host step, and what its command does."""
    return Explanation(
        f"advice {advice.value}", advice.value.replace("_", " "), ADVICE_STEPS[advice].why
    )


def of_check(check_id: str) -> Explanation | None:
    """What a check means on these rigs and what to do (None: no such check)."""
    text = CHECK_TEXTS.get(check_id)
    return None if text is None else Explanation(check_id, text.title, text.text)


def explanations(
    xids: Iterable[XidInfo], advice: Advice | None, checks: Iterable[str] = ()
) -> list[Explanation]:
    """Each distinct explanation once: Xids (in the order seen), the latch's, then checks'.

    ``checks``: the failing checks' ids (the Xid check is explained by its Xids).
    """
    found = [of_xid(info) for info in xids]
    if advice is not None:
        found.append(of_advice(advice))
    for check_id in checks:
        item = None if check_id == xid_since_boot.CHECK_ID else of_check(check_id)
        if item is not None:
            found.append(item)
    unique: dict[tuple[str, str], Explanation] = {}
    for item in found:
        unique.setdefault((item.fault, item.text), item)
    return list(unique.values())
