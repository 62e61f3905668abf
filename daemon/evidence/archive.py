"""The black box as the API and the CLI read it: the list, one bundle, its export."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from daemon.evidence.recorder import EvidenceRecorder
from serving.errors import NotFound
from serving.evidence.bundles import SUMMARY, check_id
from serving.evidence.inflight import without_prompts


class CrashArchive:
    """``web.routes.crashes.CrashArchive`` over one recorder."""

    def __init__(
        self, recorder: EvidenceRecorder, hostname: Callable[[], str] = socket.gethostname
    ) -> None:
        self._recorder = recorder
        self._hostname = hostname

    def crashes_document(self, limit: int) -> dict[str, Any]:
        """``GET /api/v1/crashes``."""
        status = self._recorder.status()
        return {
            "crashes": self._recorder.bundles.summaries()[:limit],
            "degraded": status["degraded"],
            "fingerprint": status["fingerprint"],
        }

    def crash_document(self, bundle_id: str) -> dict[str, Any]:
        """``GET /api/v1/crashes/{id}``."""
        parts = self._recorder.bundles.read(check_id(bundle_id))
        summary = parts.pop(SUMMARY.removesuffix(".json"), None)
        if summary is None:
            raise NotFound(f"crash bundle {bundle_id} is still being written or was cut short")
        return {"summary": summary, "parts": parts}

    def crash_export(self, bundle_id: str, with_hostname: bool) -> bytes:
        """The tarball: every text masked again (and cut of prompts); the host name hidden."""
        mask = self._recorder.mask
        host = None if with_hostname else self._hostname()
        return self._recorder.bundles.export(
            bundle_id, lambda text: without_prompts(mask(text)), host
        )
