"""``POST /api/v1/serving/{start,restart}``'s answer: recovery's start path, in the API's words.

A person's start and restart (and ``serve``'s start, after its switch) go through recovery
(``request_start``: one decision, the gate, a probe), never straight to the supervisor: a
refusal raises ``Refused`` at once, before anything is stopped, with every reason and what
to do on one line and each reason with its own code (the API's 409 ``reasons``, fleetctl's
exit 4); a start answers with the warnings it
was made with (the gate's, and the mechanics' such as foreign processes on other cards).
"""

from __future__ import annotations

from typing import Any

from recovery.decisions import Reason
from recovery.starts import StartAnswer
from serving.errors import Refused


def refusal_document(reason: Reason, blocking: bool = True) -> dict[str, Any]:
    """A reason in ``RefusalDocument``'s shape (a warning that went with a start: not blocking)."""
    return {"code": reason.code, "message": reason.line, "blocking": blocking}


def start_document(action: str, answer: StartAnswer, serving: dict[str, Any]) -> dict[str, Any]:
    """The answer to a person's ``start``/``restart``; ``Refused`` when it did not start."""
    if not answer.started:
        reasons = answer.refusals
        first = reasons[0].code if reasons else "refused"
        raise Refused(answer.why_not or f"{action} refused", first, reasons)
    launched = None if answer.outcome is None else answer.outcome.launched
    return {
        "action": action,
        "accepted": True,
        "already_running": bool(launched is not None and launched.already_running),
        "warnings": [refusal_document(reason, blocking=False) for reason in answer.warnings],
        "serving": serving,
    }
