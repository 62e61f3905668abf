"""The container runtime under ``--simulate``: the scenario's containers and the engine's.

A scenario's ``[host] foreign_processes`` entry may say it runs in a container (``container``,
``image``, and ``ignores_signals`` for one that outlives SIGINT and SIGTERM); the
foreign-holder search names it so, and ``--stop-foreign`` signals it in the simulation only,
in the same order as on a real rig (SIGINT, then SIGTERM; never SIGKILL). The host's
``docker``/``podman`` are never called: the outcome carries the commands a real rig would
have run. Images have an ID, a digest and labels kept in the state dir
(``serving.sim.images``): ``image inspect`` prints them as docker does, and a simulated
rebuild gives a tag a new digest. No host command runs under ``--simulate``,
``[serving] provenance_command`` included.

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
import json
import sys
from collections.abc import Sequence

from hwcheck.sim.rig import SimulatedRig
from serving.recipe.recipe import Recipe
from serving.recipe.spec import LaunchMode, LaunchSpec
from serving.runtime.foreign import (
    STOP_SIGNALS,
    ContainerRef,
    StopOutcome,
    kill_command,
    still_running,
)
from serving.sim.images import ImageStore, ImageStoreError

SIM_RUNTIME = "docker"
SIM_ENGINE_MODULE = "serving.sim.engine"
SIM_HOST = "127.0.0.1"  # a simulated container publishes on loopback only


def is_simulated_engine(recipe: Recipe) -> bool:
    """A process-mode recipe running ``{python} -m serving.sim.engine``: no GPU behind it."""
    return recipe.mode == "process" and tuple(recipe.command[1:3]) == ("-m", SIM_ENGINE_MODULE)


class SimulatedContainers:
    """``ContainerProbe`` (and the build facts) over a simulated rig."""

    def __init__(self, rig: SimulatedRig, images: ImageStore | None = None) -> None:
        self._rig = rig
        self.images = images

    def image_of_container(self, runtime: str, name: str) -> str | None:
        """Simulated engines are processes: no container to ask."""
        return None

    def inspect_image(self, runtime: str, image: str) -> str | None:
        """The simulated image as ``docker image inspect`` prints it (``None``: no store)."""
        if self.images is None:
            return None
        try:
            facts = self.images.facts(image)
        except ImageStoreError:
            return None
        return json.dumps(
            [
                {
                    "Id": facts["id"],
                    "RepoTags": [image],
                    "RepoDigests": [facts["digest"]],
                    "Created": facts.get("built_at"),
                    "Config": {"Labels": dict(facts.get("labels") or {})},
                }
            ]
        )

    def command_output(self, argv: Sequence[str], timeout_s: float) -> tuple[bool, str]:
        """Nothing runs on the host under ``--simulate``."""
        return False, f"simulated rig: `{' '.join(argv)}` was not run"

    def container_of_pid(self, pid: int) -> ContainerRef | None:
        """The scenario's container of a foreign holder's pid."""
        for holder in self._rig.device_holders(frozenset()):
            if holder.pid == pid and holder.container:
                return ContainerRef(
                    SIM_RUNTIME, f"sim-{holder.container}", holder.container, holder.image or "?"
                )
        return None

    def container_publishing(self, port: int) -> ContainerRef | None:
        """Scenarios publish no ports: a port holder is a real process on this machine."""
        return None

    def stop(self, container: ContainerRef, timeout_s: float) -> StopOutcome:
        """SIGINT, then SIGTERM to the scenario's container (the simulated host only)."""
        commands: list[tuple[str, ...]] = []
        sent: list[str] = []
        for signal_name in STOP_SIGNALS:
            commands.append(kill_command(SIM_RUNTIME, signal_name, container.name))
            answer = self._rig.signal_container(container.name, signal_name)
            if answer is None:
                return StopOutcome(
                    container, tuple(commands), False, "no such container in the scenario"
                )
            sent.append(signal_name)
            if answer:
                detail = "simulated: the host's runtime was not run"
                return StopOutcome(container, tuple(commands), True, detail)
        return StopOutcome(container, tuple(commands), False, still_running(sent, timeout_s))


def in_a_simulated_container(spec: LaunchSpec) -> bool:
    """True for a container launch: under ``--simulate`` the simulated engine stands in."""
    return spec.mode is not LaunchMode.PROCESS


def simulated_container_spec(
    spec: LaunchSpec,
    engine_args: Sequence[str],
    build_file: str | None = None,
    image: str | None = None,
) -> LaunchSpec:
    """``spec`` (``docker run ...``) as the simulated engine on the port it would publish.

    ``build_file`` and ``image``: the simulated image file and the image (tag or digest
    reference) the container would run, so the engine behaves as that build does: a
    rebuilt tag runs its new build, a rollback's digest its old one.
    """
    build = (
        ()
        if build_file is None or image is None
        else ("--sim-build-file", build_file, "--sim-image", image)
    )
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
        *build,
    )
    return dataclasses.replace(spec, mode=LaunchMode.PROCESS, argv=argv, host=SIM_HOST)
