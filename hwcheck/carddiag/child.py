"""A card diagnostic's child process: one card, ``python -m hwcheck.carddiag.child ORDINAL PLAN``.

Never run in the daemon's own process: a card with a bad link or SM can hang the driver,
and only a child can be abandoned (``hwcheck.child_run``). It prints one JSON line, the
result (``CardDiag.as_dict()``), or ``{"unavailable": why}`` without a driver library.
Between steps it looks for ``plan.stop_file``: the parent creates it when the card is
too hot (it watches the temperatures through NVML), and the result is ``stopped_hot``.
"""

from __future__ import annotations

import json
import sys

from hwcheck.carddiag.compute import run_compute
from hwcheck.carddiag.cuda import CardDevice, add_signatures
from hwcheck.carddiag.model import CardDiag, DiagKind, DiagOutcome, DiagPlan
from hwcheck.carddiag.pcie import measure
from hwcheck.memtest.cuda import CudaFailed, load_driver
from hwcheck.thermal_stop import stop_file_reason


def _stop_file(plan: DiagPlan) -> str | None:
    return stop_file_reason(plan.stop_file)


def run(ordinal: int, plan: DiagPlan) -> dict[str, object]:
    """The result document of ``plan`` on card ``ordinal``."""
    try:
        lib = add_signatures(load_driver())
    except (OSError, AttributeError) as exc:
        return {"unavailable": f"no CUDA driver library: {exc}"}
    try:
        device = CardDevice(lib, ordinal)
    except CudaFailed as exc:
        return CardDiag(ordinal, plan.kind, DiagOutcome.ERROR, error=exc.name).as_dict()
    try:
        if plan.kind is DiagKind.COMPUTE:
            return run_compute(device, ordinal, plan, lambda: _stop_file(plan)).as_dict()
        measured = measure(device, plan, lambda: _stop_file(plan))
        if isinstance(measured, str):
            return {"card": ordinal, "kind": "pcie", "stopped": measured}
        return {
            "card": ordinal,
            "kind": "pcie",
            "measured": {
                "h2d_gb_per_s": measured.h2d_gb_per_s,
                "d2h_gb_per_s": measured.d2h_gb_per_s,
                "mismatched_bytes": measured.mismatched_bytes,
                "compared_bytes": measured.compared_bytes,
            },
        }
    except CudaFailed as exc:
        return CardDiag(ordinal, plan.kind, DiagOutcome.ERROR, error=exc.name).as_dict()
    finally:
        device.close()


def main(argv: list[str]) -> int:
    """Entry point: ``ORDINAL PLAN_JSON``."""
    ordinal, plan = int(argv[1]), DiagPlan.from_dict(json.loads(argv[2]))
    print(json.dumps(run(ordinal, plan)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
