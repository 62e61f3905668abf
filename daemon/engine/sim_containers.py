"""The container runtime under ``--simulate``: the scenario's foreign containers, no host CLI.

A scenario's ``[host] foreign_processes`` entry may say it runs in a container (``container``,
``image``); the foreign-holder search names it so, and ``--stop-foreign`` stops it in the
simulation only. The host's ``docker``/``podman`` are never called: the outcome carries the
command a real rig would have run.
"""

from __future__ import annotations

from hwcheck.sim.rig import SimulatedRig
from serving.runtime.foreign import ContainerRef, StopOutcome

SIM_RUNTIME = "docker"


class SimulatedContainers:
    """``ContainerProbe`` over a simulated rig."""

    def __init__(self, rig: SimulatedRig) -> None:
        self._rig = rig

    def container_of_pid(self, pid: int) -> ContainerRef | None:
        """The scenario's container of a foreign holder's pid."""
        for holder in self._rig.device_holders():
            if holder.pid == pid and holder.container:
                return ContainerRef(
                    SIM_RUNTIME, f"sim-{holder.container}", holder.container, holder.image or "?"
                )
        return None

    def container_publishing(self, port: int) -> ContainerRef | None:
        """Scenarios publish no ports: a port holder is a real process on this machine."""
        return None

    def stop(self, container: ContainerRef, timeout_s: float) -> StopOutcome:
        """Stop the scenario's container (the simulated host only)."""
        command = (SIM_RUNTIME, "stop", "--time", str(max(1, round(timeout_s))), container.name)
        if self._rig.stop_container(container.name):
            return StopOutcome(
                container, command, True, "simulated: the host's runtime was not run"
            )
        return StopOutcome(container, command, False, "no such container in the scenario")
