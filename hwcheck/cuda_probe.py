"""The CUDA probe: does each card still take a context? ("nvidia-smi looks fine" wedges.)

After an Xid 31 a card can look normal to NVML (0 MiB, P0) while the next engine start
fails in ``cudaSetDevice``/``cuInit``. The probe runs :mod:`hwcheck.cuda_probe_child` in a
subprocess with a hard timeout: a card that hangs the driver is reported ``timed_out`` and
the child is abandoned after SIGTERM (never SIGKILLed: a process stuck in the driver with a
CUDA context is exactly what must not be killed -9). It must never run beside a running
engine: the caller's job (the recovery executors run it only while the engine is stopped).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from hwcheck.child_run import json_records, run_child
from hwcheck.cuda_results import CardProbe, ProbeOutcome

DEFAULT_TIMEOUT_S = 20.0


class SubprocessCudaProber:
    """The real probe: a child Python process that drives libcuda through ctypes."""

    def __init__(
        self, timeout_s: float = DEFAULT_TIMEOUT_S, env: dict[str, str] | None = None
    ) -> None:
        self._timeout_s = timeout_s
        self._env = env

    def probe(self, cards: Sequence[int]) -> tuple[CardProbe, ...]:
        """Run the child; a timeout marks every card not yet reported ``timed_out``."""
        env = dict(os.environ if self._env is None else self._env)
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        argv = [sys.executable, "-m", "hwcheck.cuda_probe_child", *map(str, cards)]
        done = run_child(argv, env, self._timeout_s, "CUDA probe")
        return parse_probe_output(done.stdout, cards, done.timed_out)


def parse_probe_output(text: str, cards: Sequence[int], timed_out: bool) -> tuple[CardProbe, ...]:
    """The child's JSON lines as results; cards it never reported are timed out or failed."""
    found: dict[int, CardProbe] = {}
    for record in json_records(text):
        if "unavailable" in record:
            why = str(record["unavailable"])
            return tuple(CardProbe(card, ProbeOutcome.UNAVAILABLE, why) for card in cards)
        card = record.get("card")
        if isinstance(card, int) and card in cards:
            outcome = ProbeOutcome.OK if record.get("outcome") == "ok" else ProbeOutcome.FAILED
            error = record.get("error")
            found[card] = CardProbe(card, outcome, str(error) if error else None)
    missing = ProbeOutcome.TIMED_OUT if timed_out else ProbeOutcome.FAILED
    why = "the probe did not answer in time" if timed_out else "the probe ended without a result"
    return tuple(found.get(card, CardProbe(card, missing, why)) for card in cards)
