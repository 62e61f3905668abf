"""Who holds what a start needs: the engine's port, or the cards of its profile.

"Port is taken" is not something an owner can act on; "container glm-old (image
vllm-glm:int4, docker) holds port 8098" is. A holder is ours when it is the engine this
fleetd supervises (its process tree, or the container it launched); anything else is
foreign and named, a container by its name and image, a bare process by its pid and
command line. ``--stop-foreign`` stops foreign containers signal by signal with the
runtime's ``kill --signal``: SIGINT (vLLM's graceful stop), then SIGTERM, each given its
grace; never ``stop --time`` (it ends in SIGKILL), never ``rm -f``. A container still
running after both is refused, not killed. A foreign bare process is named, never
signalled. The container runtime is reached through ``ContainerProbe`` (the real CLIs in
``foreign_containers``, the scenario under ``--simulate``).
"""

from __future__ import annotations

import contextlib
import ipaddress
from dataclasses import dataclass
from typing import Protocol

import psutil

from serving.recipe.masking import mask_argv

# A command line in a refusal: enough to recognise it, not a screenful of flags.
COMMAND_CHARS = 160


@dataclass(frozen=True)
class ContainerRef:
    """A container as its runtime names it."""

    runtime: str
    container_id: str
    name: str
    image: str


@dataclass(frozen=True)
class Holder:
    """Something that is not ours holding ``what`` (``port 8098``, ``card 3``)."""

    what: str
    pid: int | None = None
    command: str = ""
    container: ContainerRef | None = None

    def describe(self) -> str:
        """One phrase for a refusal: who holds what."""
        if self.container is not None:
            ref = self.container
            return f"container {ref.name} (image {ref.image}, {ref.runtime}) holds {self.what}"
        if self.pid is not None:
            shown = self.command or "?"
            return f"pid {self.pid} ({shown}) holds {self.what}"
        return f"{self.what} is held by a process fleetd cannot see (run fleetd as root to name it)"


# The signals ``--stop-foreign`` sends, in order, each with its grace; never SIGKILL.
STOP_SIGNALS = ("SIGINT", "SIGTERM")


def kill_command(runtime: str, signal_name: str, name: str) -> tuple[str, ...]:
    """``docker kill --signal SIGINT NAME`` as shown in an outcome."""
    return (runtime, "kill", "--signal", signal_name, name)


def still_running(sent: list[str], grace_s: float) -> str:
    """The outcome's detail for a container that outlived every signal sent."""
    return (
        f"still running after {' then '.join(sent)} ({grace_s:g} s each): not killed "
        "(fleetd never sends SIGKILL); stop it yourself, then start again"
    )


@dataclass(frozen=True)
class StopOutcome:
    """What ``--stop-foreign`` did to one container: the commands sent and how it went."""

    container: ContainerRef
    commands: tuple[tuple[str, ...], ...]
    stopped: bool
    detail: str = ""


class ContainerProbe(Protocol):
    """The container runtimes as the foreign-holder search needs them."""

    def container_of_pid(self, pid: int) -> ContainerRef | None:
        """The container ``pid`` runs in, or None (a bare process, or no runtime)."""
        ...

    def container_publishing(self, port: int) -> ContainerRef | None:
        """A running container that publishes host ``port``, or None."""
        ...

    def stop(self, container: ContainerRef, timeout_s: float) -> StopOutcome:
        """SIGINT, then SIGTERM (``kill --signal``), each waited ``timeout_s``; never SIGKILL."""
        ...


def _same_address(bound: str, host: str) -> bool:
    """A listener on ``bound`` takes ``host``'s port (wildcards take every address)."""
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(bound).is_unspecified:
            return True
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(host).is_unspecified:
            return True
    return bound == host or (bound in ("127.0.0.1", "::1") and host == "localhost")


def listening_pids(host: str, port: int) -> list[int]:
    """Processes listening on ``host:port`` that this process may see (all, as root)."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, OSError):
        return []
    pids = {
        conn.pid
        for conn in connections
        if conn.status == psutil.CONN_LISTEN
        and conn.pid is not None
        and conn.laddr
        and conn.laddr.port == port
        and _same_address(conn.laddr.ip, host)
    }
    return sorted(pids)


def shown_command(words: list[str]) -> str:
    """A command line for a message: secrets masked, cut to ``COMMAND_CHARS``."""
    text = " ".join(mask_argv(words))
    return text if len(text) <= COMMAND_CHARS else text[: COMMAND_CHARS - 3] + "..."


def process_command(pid: int) -> str:
    """A process's command line (its name when that is unreadable), for messages."""
    try:
        process = psutil.Process(pid)
        words = process.cmdline()
        return shown_command(words) if words else process.name()
    except psutil.Error:
        return ""
