"""One local check of the rig with no daemon: what ``fleetctl check`` runs.

It samples the cards a few times over about two seconds (so a power brake must be
sustained to count as critical), reads this boot's kernel log for Xids, runs the CUDA
probe on each card that answers (the same probe fleetd runs before a start, with its
timeout; unless asked not to, or an engine holds the cards: a probe never runs beside
one), reads the host facts (boot chain, module, bus, P2P) and PCIe error counters with
each sample, and runs every check once over what it saw.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hwcheck.checks import CheckInput, run_checks
from hwcheck.cuda_probe import SubprocessCudaProber
from hwcheck.cuda_results import CardProbe, ProbeOutcome, ProbeRound
from hwcheck.host import HostSources
from hwcheck.hostfacts.baseline import HostBaseline
from hwcheck.hostfacts.document import add_card_bus_fields, host_document
from hwcheck.hostfacts.judging import HostJudging, read_counters
from hwcheck.hostfacts.model import HostFacts, PcieCounterSample
from hwcheck.kernellog.catalogue import XidCatalogue
from hwcheck.kernellog.parser import parse_xid
from hwcheck.kernellog.records import KernelRecord
from hwcheck.model import CheckResult, ClassifiedXid, RigProfile, RigSnapshot
from hwcheck.report import rig_document

DEFAULT_SAMPLES = 3
DEFAULT_SPAN_S = 2.0


@dataclass(frozen=True)
class CheckReport:
    """What one local check found."""

    samples: tuple[RigSnapshot, ...]
    results: tuple[CheckResult, ...]
    xids: tuple[ClassifiedXid, ...]
    host: HostFacts | None = None
    baseline: HostBaseline = field(default_factory=HostBaseline)
    tensor_parallel_size: int = 1

    def document(self) -> dict[str, Any]:
        """``{overall, cards, checks}`` (docs/reference.md "JSON documents"), plus ``host``."""
        doc = rig_document(self.samples[-1], self.results, self.xids)
        add_card_bus_fields(doc["cards"], self.host)
        doc["host"] = host_document(self.host, self.baseline, self.tensor_parallel_size)
        return doc


def classify_records(
    records: Sequence[KernelRecord], catalogue: XidCatalogue
) -> list[ClassifiedXid]:
    """The Xids among ``records``, each with the catalogue's verdict."""
    found: list[ClassifiedXid] = []
    for record in records:
        if record.from_user_space:  # written into the kernel log by a process: not an Xid
            continue
        event = parse_xid(record.text)
        if event is not None:
            found.append(ClassifiedXid(event=event, info=catalogue.classify(event)))
    return found


def sample_rig(
    host: HostSources,
    samples: int = DEFAULT_SAMPLES,
    span_s: float = DEFAULT_SPAN_S,
    sleep: Callable[[float], None] = time.sleep,
    on_sample: Callable[[RigSnapshot], None] | None = None,
) -> list[RigSnapshot]:
    """``samples`` snapshots spread evenly over ``span_s`` seconds (each shown to ``on_sample``)."""
    gap_s = span_s / max(samples - 1, 1)
    taken: list[RigSnapshot] = []
    for number in range(samples):
        if number:
            sleep(gap_s)
        taken.append(host.gpu.snapshot())
        if on_sample is not None:
            on_sample(taken[-1])
    return taken


def probe_cards(host: HostSources, snapshot: RigSnapshot, skip: str | None) -> ProbeRound:
    """The CUDA probe of every card that answers; ``skip`` says why it must not run."""
    cards = [card.index for card in snapshot.cards if not card.lost]
    if skip is not None:
        results = tuple(CardProbe(card, ProbeOutcome.UNAVAILABLE, skip) for card in cards)
    else:
        prober = host.cuda_prober or SubprocessCudaProber()
        results = tuple(prober.probe(cards)) if cards else ()
    return ProbeRound(datetime.now(UTC), results)


def run_local_check(
    host: HostSources,
    profile: RigProfile,
    catalogue: XidCatalogue,
    *,
    samples: int = DEFAULT_SAMPLES,
    span_s: float = DEFAULT_SPAN_S,
    sleep: Callable[[float], None] = time.sleep,
    host_judging: HostJudging | None = None,
    probe: bool = False,
    skip_probe: str | None = None,
) -> CheckReport:
    """Sample, read the kernel log and the host facts, probe CUDA (with ``probe``), check.

    ``skip_probe`` (why the probe must not run now, e.g. an engine serves) turns each
    card's probe into a "not probed" note.
    """
    judging = host_judging or HostJudging()
    counters: list[PcieCounterSample] = []
    snapshots = sample_rig(
        host, samples, span_s, sleep, lambda taken: counters.append(read_counters(host, taken))
    )
    probes = probe_cards(host, snapshots[-1], skip_probe) if probe else None
    xids = classify_records(host.kernel_log_history(), catalogue)
    inp = CheckInput(
        samples=snapshots,
        profile=profile,
        pci_devices=host.pci_devices(),
        xids=xids,
        holders=host.device_holders(frozenset()),
        kernel_module_version=host.kernel_module_version(),
        probes=probes,
        host=None if host.host_facts is None else host.host_facts(snapshots[-1]),
        baseline=judging.baseline(host),
        pcie_counters=counters,
        tensor_parallel_size=judging.tensor_parallel_size,
    )
    return CheckReport(
        samples=tuple(snapshots),
        results=tuple(run_checks(inp)),
        xids=tuple(xids),
        host=inp.host,
        baseline=inp.baseline,
        tensor_parallel_size=inp.tensor_parallel_size,
    )
