"""What a launcher needs to start, watch and stop one engine: plain data, no I/O.

The recipe module turns a launch recipe into a ``LaunchSpec``; the launchers and the
supervisor only ever see the spec, so they can be tested with any argv (the simulated
engine included).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from serving.recipe.flags import FlagOverride


def reach_host(host: str) -> str:
    """The address to connect to for a server listening on ``host`` (URL-ready)."""
    if host in ("0.0.0.0", ""):  # noqa: S104 - a listen address read, not one bound
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


class LaunchMode(enum.StrEnum):
    """How the engine runs."""

    PROCESS = "process"
    DOCKER = "docker"
    PODMAN = "podman"


@dataclass(frozen=True)
class EngineEndpoints:
    """Where one engine answers, and the model name it must list to count as ready.

    Kept apart from ``LaunchSpec`` because an adopted engine is known only by its record.
    """

    base_url: str
    served_model_name: str

    @property
    def health_url(self) -> str:
        """vLLM's ``/health`` (200 when serving; 503 while warming or dead)."""
        return f"{self.base_url}/health"

    @property
    def models_url(self) -> str:
        """vLLM's ``/v1/models`` (lists ``served_model_name`` once ready)."""
        return f"{self.base_url}/v1/models"

    @property
    def metrics_url(self) -> str:
        """vLLM's Prometheus ``/metrics``."""
        return f"{self.base_url}/metrics"


@dataclass(frozen=True)
class LaunchSpec:
    """The exact argv and environment of one launch.

    ``argv`` is what is executed: ``vllm serve ...`` for ``process`` mode, the full
    ``docker run ...``/``podman run ...`` line for container modes (never a shell string).
    ``env`` holds only the recipe's variables (the process launcher adds them to the
    daemon's environment; container modes pass them with ``-e`` inside ``argv``).
    ``health_url`` and ``models_url`` are the probes; ``served_model_name`` must appear in
    ``/v1/models`` for the engine to count as ready. ``preset_overrides`` lists the preset
    flags the recipe's ``extra_args`` gave again (for ``recipe show``; not launched as such).
    ``profile`` is the launch profile it was built for and ``waivers`` the recipe's
    ``[lint] waive`` (both recorded with the launch; neither changes what runs).
    """

    mode: LaunchMode
    argv: tuple[str, ...]
    env: dict[str, str]
    host: str
    port: int
    served_model_name: str
    container_name: str | None = None
    recipe_hash: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    preset_overrides: tuple[FlagOverride, ...] = ()
    profile: str | None = None
    waivers: dict[str, str] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        """``http://host:port`` where fleetd reaches the engine's OpenAI server.

        A wildcard listen address (``0.0.0.0``, ``::``: the engine published on the LAN)
        is reached on loopback; an IPv6 address is bracketed.
        """
        return f"http://{reach_host(self.host)}:{self.port}"

    @property
    def endpoints(self) -> EngineEndpoints:
        """Where this engine answers its probes."""
        return EngineEndpoints(self.base_url, self.served_model_name)

    @property
    def health_url(self) -> str:
        """vLLM's ``/health`` (200 when serving; 503 while warming or dead)."""
        return self.endpoints.health_url

    @property
    def models_url(self) -> str:
        """vLLM's ``/v1/models`` (lists ``served_model_name`` once ready)."""
        return self.endpoints.models_url

    @property
    def metrics_url(self) -> str:
        """vLLM's Prometheus ``/metrics``."""
        return self.endpoints.metrics_url
