"""``cuda_probe``: does each card still take a CUDA context? (the "nvidia-smi looks fine" wedge)

Judges the last probe round it is given (``hwcheck.cuda_probe`` runs it; fleetd before
every start and after a reboot, ``fleetctl check`` after its samples). A card that failed
or timed out is critical: the next engine start would fail in ``cudaSetDevice``. No CUDA
driver library is "unavailable", not a failure. A failure from before a person cleared
the reboot latch (``LatchWaiver``) is shown as cleared, a warning: it no longer refuses a
start. No round given, no result (the check did not run).
"""

from __future__ import annotations

from hwcheck.advice import ADVICE_STEPS
from hwcheck.checks.base import CheckInput
from hwcheck.checks.spec import Alert, CheckSpec, CheckText
from hwcheck.cuda_results import FAILED_OUTCOMES, ProbeOutcome
from hwcheck.model import Advice, CheckResult, Severity

CHECK_ID = "cuda_probe"


def check(inp: CheckInput) -> list[CheckResult]:
    """One result per probed card (none without a probe round)."""
    probes = inp.probes
    if probes is None:
        return []
    waiver = inp.waiver
    waived = waiver is not None and probes.at <= waiver.at
    # The latch's warm reboot (its why: never reload nvidia_uvm or nvidia-smi -r).
    remedy = ADVICE_STEPS[Advice.WARM_REBOOT].text(inp.rig_now)
    when = probes.at.isoformat(timespec="seconds")
    results = []
    for probe in sorted(probes.results, key=lambda p: p.card):
        if probe.outcome in FAILED_OUTCOMES:
            detail = f" ({probe.error})" if probe.error else ""
            message = f"card {probe.card}: CUDA probe {probe.outcome} at {when}{detail}"
            if waived and waiver is not None:
                results.append(
                    CheckResult(
                        CHECK_ID, probe.card, Severity.WARNING, f"{message} ({waiver.label})"
                    )
                )
            else:
                results.append(
                    CheckResult(CHECK_ID, probe.card, Severity.CRITICAL, message, remedy)
                )
        elif probe.outcome is ProbeOutcome.UNAVAILABLE:
            why = probe.error or "no CUDA driver library"
            results.append(
                CheckResult(
                    CHECK_ID, probe.card, Severity.OK, f"card {probe.card}: not probed ({why})"
                )
            )
        else:
            results.append(
                CheckResult(
                    CHECK_ID, probe.card, Severity.OK, f"card {probe.card}: takes a CUDA context"
                )
            )
    return results


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "CUDA probe failed",
        "After a wedge nvidia-smi still shows the card healthy but cudaSetDevice/cuInit "
        "fails: the probe creates a context and 1 MiB allocation per card to find that before "
        "a 45-minute start fails.",
        "fleetctl reboot --confirm.",
    ),
    alert=Alert("CheckCudaProbe", "cuda probe"),
    tag="CUDA",
    gate=True,
)
