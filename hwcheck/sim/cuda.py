"""The CUDA probe of a simulated rig: the scenario's ``[host] cuda_probe`` answers.

A wedged card answers ``failed`` with the error a real wedge gives
(``CUDA_ERROR_DEVICE_UNAVAILABLE``, "cudaErrorDevicesUnavailable"). Wedges last until the
simulated host reboots, as on a real rig; the probe never starts a process.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hwcheck.cuda_results import CardProbe, ProbeOutcome
from hwcheck.sim.scenario import Scenario

WEDGE_ERROR = "CUDA_ERROR_DEVICE_UNAVAILABLE"
_ERRORS = {
    ProbeOutcome.FAILED: WEDGE_ERROR,
    ProbeOutcome.TIMED_OUT: "the probe did not answer in time",
    ProbeOutcome.UNAVAILABLE: "no CUDA driver library (simulated)",
}


class SimulatedCudaProber:
    """``CudaProber`` answering from the scenario until the first simulated reboot."""

    def __init__(self, scenario: Scenario, rebooted: Callable[[], bool]) -> None:
        self._answers = {card: ProbeOutcome(outcome) for card, outcome in scenario.host.cuda_probe}
        self._rebooted = rebooted
        self.calls = 0

    def probe(self, cards: Sequence[int]) -> tuple[CardProbe, ...]:
        """One result per card, in order."""
        self.calls += 1
        wedged = {} if self._rebooted() else self._answers
        results = []
        for card in cards:
            outcome = wedged.get(card, ProbeOutcome.OK)
            results.append(CardProbe(card, outcome, _ERRORS.get(outcome)))
        return tuple(results)
