"""What ``web.routes.bench`` asks of fleetd: start, follow, stop, list, and the report's facts.

The report document is built here from what fleetd already serves (the status, the recipe
as ``recipe show`` prints it, the build, the canaries, the memory tests, the bench runs)
and then scrubbed as text: every secret fleetd knows (``KnownSecrets``: the launch's keys
and tokens, every free-text secret form) becomes ``***``, and the host name becomes
``<host>`` unless the owner asks for it. A report is made to be posted on a forum.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from daemon.bench.service import BenchRequest, BenchService
from daemon.store import Store
from serving.bench.sweep import parse_sweep
from serving.errors import InvalidInput
from serving.recipe.masking import KnownSecrets
from web.version import __version__

HOST_MASK = "<host>"


class BenchApi:
    """``BenchControl`` for the web layer: the bench service and the report."""

    def __init__(
        self,
        service: BenchService,
        store: Store,
        status: Callable[[], dict[str, Any]],
        recipe: Callable[[], dict[str, Any] | None],
        builds: Callable[[], dict[str, Any] | None],
        secrets: Callable[[], KnownSecrets | None],
        driver_version: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.service = service
        self._store = store
        self._status = status
        self._recipe = recipe
        self._builds = builds
        self._secrets = secrets
        self._driver_version = driver_version

    def start_bench(self, body: dict[str, Any], actor: str) -> dict[str, Any]:
        """``POST /api/v1/bench``."""
        sweep = body.get("cap_sweep")
        try:
            cap_sweep = None if sweep is None else parse_sweep(str(sweep))
        except ValueError as exc:
            raise InvalidInput(str(exc), "bad_sweep") from None

        def axis(name: str) -> tuple[Any, ...] | None:
            values = body.get(name)
            return None if not values else tuple(values)

        request = BenchRequest(
            quick=bool(body.get("quick")),
            concurrency=axis("concurrency"),
            depths=axis("depths"),
            temperatures=axis("temperatures"),
            output_tokens=body.get("output_tokens"),
            cap_sweep=cap_sweep,
        )
        return self.service.start(request, actor)

    def run_document(self, run_id: int) -> dict[str, Any]:
        """``GET /api/v1/bench/{id}``."""
        return self.service.run_document(run_id)

    def stop(self, run_id: int) -> dict[str, Any]:
        """``POST /api/v1/bench/{id}/stop``."""
        return self.service.stop(run_id)

    def list_document(self, limit: int) -> dict[str, Any]:
        """``GET /api/v1/bench``."""
        return self.service.list_document(limit)

    def report_document(self, with_hostname: bool) -> dict[str, Any]:
        """``GET /api/v1/report``: the confirmation report's facts, scrubbed."""
        status = self._status()
        cards = [
            {
                key: card.get(key)
                for key in (
                    "index",
                    "name",
                    "pci_bus_id",
                    "memory_total_mib",
                    "vbios_version",
                    "power_limit_w",
                    "power_brake_active",
                    "pcie_gen",
                    "pcie_width",
                    "temperature_c",
                    "serial",
                    "state",
                )
                if key in card
            }
            for card in status.get("cards") or []
        ]
        document: dict[str, Any] = {
            "generated_at": datetime.now(UTC).isoformat(),
            "cmpfleet_version": __version__,
            "overall": status.get("overall"),
            "simulated": bool(status.get("simulated")),
            "hardware": {
                "cards": cards,
                "driver_version": self._driver_version(),
                "host": status.get("host"),
                "unlocked": all((c.get("memory_total_mib") or 0) > 60_000 for c in cards)
                if cards
                else None,
            },
            "checks": [
                {k: c.get(k) for k in ("id", "card", "severity", "message")}
                for c in status.get("checks") or []
            ],
            "recipe": self._recipe(),
            "build": self._builds(),
            "canaries": status.get("canaries") or [],
            "memtest": self._store.memtest_verdicts(),
            "bench": self.service.last_runs(limit=5),
            "with_hostname": with_hostname,
        }
        if with_hostname:
            document["hostname"] = socket.gethostname()
        return self._scrubbed(document, with_hostname)

    def _scrubbed(self, document: dict[str, Any], with_hostname: bool) -> dict[str, Any]:
        """Every string with known secrets masked and (unless asked) the host name hidden."""
        known = self._secrets() or KnownSecrets()
        host = None if with_hostname else socket.gethostname()
        # The name as a word of its own: a short one ("vm") must not eat "vmlinuz".
        named = None if not host else re.compile(rf"(?<![\w-]){re.escape(host)}(?![\w-])")

        def clean(value: Any) -> Any:
            if isinstance(value, str):
                text = known.mask(value)
                return text if named is None else named.sub(HOST_MASK, text)
            if isinstance(value, dict):
                return {clean(str(k)): clean(v) for k, v in value.items()}
            if isinstance(value, list | tuple):
                return [clean(item) for item in value]
            return value

        scrubbed: dict[str, Any] = clean(json.loads(json.dumps(document, default=str)))
        return scrubbed
