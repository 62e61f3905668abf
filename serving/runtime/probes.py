"""HTTP probes of the engine: readiness (``/health`` and ``/v1/models``) and liveness.

Readiness needs both: vLLM's ``/health`` can answer 200 before the served name is
registered, and a wrong ``--served-model-name`` would otherwise look ready to clients that
then get 404s. Liveness is ``/health`` alone, every few seconds; the process check is the
launcher's job. Short timeouts: a probe must never hold the supervisor's loop for long.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from serving.recipe.spec import EngineEndpoints

# Where to probe one engine: the spec's endpoints, or an adopted engine's record.
ProbeTarget = EngineEndpoints


@dataclass(frozen=True)
class ProbeResult:
    """``ok`` or why not, in a few words (``HTTP 503``, ``timed out``, ``refused``)."""

    ok: bool
    detail: str


def new_probe_client() -> httpx.Client:
    """A client for loopback probes: no proxies from the environment, no redirects."""
    return httpx.Client(trust_env=False, follow_redirects=False)


class EngineProber:
    """Runs the probes with one reusable client (keep-alive keeps them cheap)."""

    def __init__(self, client: httpx.Client, timeout_s: float) -> None:
        self._client = client
        self._timeout_s = timeout_s

    def _get(self, url: str) -> httpx.Response | ProbeResult:
        try:
            return self._client.get(url, timeout=self._timeout_s)
        except httpx.TimeoutException:
            return ProbeResult(False, f"GET {url} timed out after {self._timeout_s:g} s")
        except httpx.ConnectError as exc:
            return ProbeResult(False, f"GET {url}: cannot connect ({exc})")
        except httpx.HTTPError as exc:
            return ProbeResult(False, f"GET {url} failed: {exc.__class__.__name__}: {exc}")

    def health(self, target: ProbeTarget) -> ProbeResult:
        """``/health`` answers 200."""
        response = self._get(target.health_url)
        if isinstance(response, ProbeResult):
            return response
        if response.status_code != 200:
            return ProbeResult(
                False, f"GET {target.health_url} answered HTTP {response.status_code}"
            )
        return ProbeResult(True, "healthy")

    def ready(self, target: ProbeTarget) -> ProbeResult:
        """``/health`` answers 200 and ``/v1/models`` lists the served name."""
        health = self.health(target)
        if not health.ok:
            return health
        response = self._get(target.models_url)
        if isinstance(response, ProbeResult):
            return response
        if response.status_code != 200:
            return ProbeResult(
                False, f"GET {target.models_url} answered HTTP {response.status_code}"
            )
        try:
            data = response.json().get("data", [])
            names = {str(item.get("id")) for item in data if isinstance(item, dict)}
        except (ValueError, AttributeError):
            return ProbeResult(False, f"GET {target.models_url} did not return a model list")
        if target.served_model_name not in names:
            listed = ", ".join(sorted(names)) or "nothing"
            return ProbeResult(
                False, f"/v1/models lists {listed}, not {target.served_model_name!r}"
            )
        return ProbeResult(True, "ready")
