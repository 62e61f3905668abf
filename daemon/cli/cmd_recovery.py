"""fleetctl commands for the reboot-required latch: ``reboot`` and ``clear-reboot-latch``.

``reboot`` without ``--confirm`` only explains what would happen (exit 0). With it, fleetd
stops the engine cleanly and only then runs the configured reboot command (under
``--simulate``: the simulated reboot); an engine that will not stop means no reboot
(exit 4, with the reason). ``clear-reboot-latch --reason TEXT`` is the recorded override.
"""

from __future__ import annotations

from typing import Any

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.output import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_REFUSED, Output


def _post(out: Output, client: FleetClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    try:
        result: dict[str, Any] = client.post(path, body)
    except ClientError as exc:
        if exc.status == 409:
            out.fail(f"refused: {exc}", EXIT_REFUSED)
        if exc.status in (400, 422):
            out.fail(str(exc), EXIT_BAD_INPUT)
        out.fail(str(exc), EXIT_FAILED)
    return result


def reboot(out: Output, client: FleetClient, confirm: bool) -> int:
    """``fleetctl reboot [--confirm]``."""
    result = _post(out, client, "/api/v1/recovery/reboot", {"confirm": confirm})
    if out.json_mode:
        out.emit_json(result)
    elif confirm:
        out.line(f"rebooting: {result['message']}")
    else:
        out.line(f"would reboot: {result['message']}")
        out.line("nothing done; run `fleetctl reboot --confirm` to do it")
    return 0


def clear_latch(out: Output, client: FleetClient, reason: str) -> int:
    """``fleetctl clear-reboot-latch --reason TEXT``."""
    if not reason.strip():
        out.fail("--reason must say why the latch is cleared (it is recorded)", EXIT_BAD_INPUT)
    result = _post(out, client, "/api/v1/recovery/clear", {"reason": reason})
    if out.json_mode:
        out.emit_json(result)
    else:
        out.line(result["message"])
    return 0
