"""What the host checks of a one-shot check judge against, and its counter samples.

fleetd keeps its own (a recorded baseline in the state dir, a counter window spanning
minutes); ``fleetctl check`` has a config's ``[host]`` pins, maybe a readable recorded
baseline, and its few samples over two seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hwcheck.host import HostSources
from hwcheck.hostfacts.baseline import HostBaseline, merge_baseline
from hwcheck.hostfacts.counters import counter_sample
from hwcheck.hostfacts.model import PcieCounterSample
from hwcheck.model import RigSnapshot


@dataclass(frozen=True)
class HostJudging:
    """The config's ``[host]`` pins, a recorded baseline (if any) and the engine's TP size.

    Without a recorded baseline a simulated rig's own (its healthy self) is used; a real
    one then has only the pins.
    """

    pins: HostBaseline = field(default_factory=HostBaseline)
    recorded: HostBaseline | None = None
    tensor_parallel_size: int = 1

    def baseline(self, host: HostSources) -> HostBaseline:
        """The baseline in force for ``host``."""
        recorded = self.recorded
        if recorded is None and host.known_good_baseline is not None:
            recorded = host.known_good_baseline()
        return merge_baseline(recorded, self.pins)


def read_counters(host: HostSources, snapshot: RigSnapshot) -> PcieCounterSample:
    """The snapshot's replay counters and the AER counters read now."""
    aer = () if host.pcie_aer is None else host.pcie_aer(snapshot)
    replay = [(card.pci_bus_id, card.pcie_replay_count) for card in snapshot.cards if not card.lost]
    return counter_sample(snapshot.monotonic_s, replay, aer)
