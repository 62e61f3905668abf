"""The container runtime under ``--simulate``: the scenario's containers and the engine's.

A scenario's ``[host] foreign_processes`` entry may say it runs in a container (``container``,
``image``); the foreign-holder search names it so, and ``--stop-foreign`` stops it in the
simulation only. The host's ``docker``/``podman`` are never called: the outcome carries the
command a real rig would have run.

A profile with a real container preset (``dsv4-flash-pp4-dspark``: ``docker run ...``) runs
under ``--simulate`` too: ``SimulatedLaunches`` starts the simulated engine in the container's
place (``simulated_container_spec``: the engine service builds its launch so), on the port
the container would publish, serving the recipe's model name, with the scenario's
``[engine]`` behaviour. The recipe stays the recipe: its hash (adoption, drift), ``recipe
show`` (what a real rig would run), lint, the profile's cards. A process-mode recipe (a
real ``vllm serve``) is launched as it is.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence

from hwcheck.sim.rig import SimulatedRig
from serving.recipe.spec import LaunchMode, LaunchSpec
from serving.runtime.foreign import ContainerRef, StopOutcome

SIM_RUNTIME = "docker"
SIM_ENGINE_MODULE = "serving.sim.engine"
SIM_HOST = "127.0.0.1"  # a simulated container publishes on loopback only


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


def in_a_simulated_container(spec: LaunchSpec) -> bool:
    """True for a container launch: under ``--simulate`` the simulated engine stands in."""
    return spec.mode is not LaunchMode.PROCESS


def simulated_container_spec(spec: LaunchSpec, engine_args: Sequence[str]) -> LaunchSpec:
    """``spec`` (``docker run ...``) as the simulated engine on the port it would publish."""
    argv = (
        sys.executable,
        "-m",
        SIM_ENGINE_MODULE,
        "serve",
        spec.served_model_name,
        "--host",
        SIM_HOST,
        "--port",
        str(spec.port),
        "--served-model-name",
        spec.served_model_name,
        *engine_args,
    )
    return dataclasses.replace(spec, mode=LaunchMode.PROCESS, argv=argv, host=SIM_HOST)
