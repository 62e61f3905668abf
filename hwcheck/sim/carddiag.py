"""The card diagnostics of a simulated rig: the real procedures over simulated cards.

:func:`hwcheck.carddiag.compute.run_compute` and :func:`hwcheck.carddiag.pcie.measure`
run exactly as the child runs them on a card; only the card is simulated, with the
faults only the right test finds (``[host.cards.N] diag_faults``): ``data-path-flip``
(a bit flipped in transit: ``diag pcie``), ``sm-fma`` (SM ``bad_sm`` returns a wrong FP32
FMA) and ``tensor-ulp`` (its FP16 tensor core one ulp off: ``diag compute``), and
``heats-under-load`` (each step warms the card, through the rig's own readings, so the
product's thermal guard sees it in NVML as on a rig and stops the run). A card's link
rate follows the link it trained at (``pcie_gen_current`` x ``pcie_width_current``), so
``slow-link``'s Gen1 card measures half its neighbours. Nothing waits: a copy reports the
time the link would take, a launch returns at once.
"""

from __future__ import annotations

from hwcheck.carddiag.compute import KERNELS, Kernel, Launch, expected_words, run_compute
from hwcheck.carddiag.model import CardDiag, DiagKind, DiagOutcome, DiagPlan
from hwcheck.carddiag.pcie import LinkFigures, expected_gb_per_s, measure
from hwcheck.model import GpuSnapshot
from hwcheck.sim.heat import SimHeat, SimulatedRig
from hwcheck.thermal_stop import StopAsked

SIM_SM_COUNT = 70  # the CMP 170HX's GA100: 4,480 CUDA cores in 70 SMs
SIM_THREADS = 32  # one warp per block keeps a launch a few milliseconds of Python
HEAT_PER_LAUNCH_C = 4.0  # heats-under-load: core per kernel launch (HBM a little more)
HEAT_PER_COPY_C = 0.5
SIM_LAUNCH_S = 5.0  # the simulated time one launch stands for (a minute: a dozen launches)
F16_KERNEL = next(k for k in KERNELS if k.name == "diag_mma_f16")


class _SimCard:
    """One simulated card as both targets: its link and its SMs."""

    def __init__(self, rig: SimulatedRig, card: int) -> None:
        self._rig = rig
        self._card = card
        self._heat = SimHeat(rig)
        facts = rig.scenario.host.facts.card(card)
        self._faults = set(facts.diag_faults)
        self._bad_sm = facts.bad_sm % SIM_SM_COUNT
        self.sm_count = SIM_SM_COUNT
        self.clock_s = 0.0  # simulated seconds: each launch moves it on

    def clock(self) -> float:
        """The simulated run's clock (``run_compute``'s)."""
        return self.clock_s

    def _snapshot(self) -> GpuSnapshot:
        return self._rig.cards()[self._card].card

    def cool_down(self) -> None:
        """Back to the scenario's temperatures after the run (the rig idles again)."""
        self._heat.cool(self._card)

    # -- the link ----------------------------------------------------------------------

    def copy_s(self, nbytes: int, to_device: bool) -> float:
        self._heat.warm(self._card, HEAT_PER_COPY_C)
        card = self._snapshot()
        rate = expected_gb_per_s(card.pcie_gen_current, card.pcie_width_current) or 1.0
        rate *= 0.97 if to_device else 0.99  # a copy back runs a shade faster
        return nbytes / (rate * 1e9)

    def round_trip_mismatches(self, nbytes: int, seed: int) -> int:
        return 1 if "data-path-flip" in self._faults else 0

    # -- the compute units -------------------------------------------------------------

    def launch(self, kernel: Kernel, seed: int) -> Launch:
        self._heat.warm(self._card, HEAT_PER_LAUNCH_C)
        self.clock_s += SIM_LAUNCH_S
        threads = SIM_SM_COUNT * SIM_THREADS
        words = [
            word
            for word in expected_words(kernel, threads, seed)
            for _ in range(kernel.words_per_thread)
        ]
        first = self._bad_sm * SIM_THREADS * kernel.words_per_thread
        span = range(first, first + SIM_THREADS * kernel.words_per_thread)
        if kernel.name == "diag_fma_f32" and "sm-fma" in self._faults:
            for index in span[::3]:
                words[index] ^= 0x00000400  # one mantissa bit, a third of its threads
        if kernel is F16_KERNEL and "tensor-ulp" in self._faults:
            for index in span:
                words[index] += 1  # one ulp of the f32 accumulator
        return Launch(list(range(SIM_SM_COUNT)), words, SIM_THREADS)

    def temperatures(self) -> tuple[float | None, float | None]:
        card = self._snapshot()
        return card.temperature_c, card.memory_temperature_c


class SimulatedDiagnoser:
    """``Diagnoser`` over the simulated rig's cards and the scenario's diag faults."""

    def __init__(self, rig: SimulatedRig) -> None:
        self._rig = rig

    def compute(self, card: int, plan: DiagPlan, stop: StopAsked) -> CardDiag:
        """The real procedure over the simulated card."""
        target = _SimCard(self._rig, card)
        try:
            return run_compute(target, card, plan, stop, clock=target.clock)
        finally:
            target.cool_down()

    def link(self, card: int, plan: DiagPlan, stop: StopAsked) -> LinkFigures | CardDiag:
        """The real measurement over the simulated link."""
        target = _SimCard(self._rig, card)
        try:
            measured = measure(target, plan, stop)
        finally:
            target.cool_down()
        if isinstance(measured, str):
            verdict = f"stopped hot ({measured}) before the link was measured"
            return CardDiag(card, DiagKind.PCIE, DiagOutcome.STOPPED_HOT, verdict)
        return measured
