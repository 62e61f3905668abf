"""The crash bundles: ``GET /api/v1/crashes``, ``/api/v1/crashes/{id}`` and its export.

Each bundle is what fleetd kept of one event before the stop (``daemon.evidence``): the
verdict with its evidence, the parts a reboot would wipe, the launch diff. The export is
a ``.tar.gz`` safe to attach to a public issue (masked, no prompt text, the host name
only with ``with_hostname``). Without a black box (a stand-in app) the routes answer 409.
"""

from __future__ import annotations

from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Path, Query, Response
from pydantic import Field

from serving.errors import Conflict
from web.errors import error_responses
from web.models import Document

# The path's ``{id}`` (as documented); ``bundle_id`` in the code (``id`` is Python's builtin).
BundleId = Annotated[str, Path(alias="id", max_length=64, description="a bundle's id")]


class CrashArchive(Protocol):
    """What the API asks of fleetd's crash black box."""

    def crashes_document(self, limit: int) -> dict[str, Any]:
        """The bundles, newest first, and whether evidence can be written now."""
        ...

    def crash_document(self, bundle_id: str) -> dict[str, Any]:
        """Every part of one bundle (raises ``NotFound``/``InvalidInput``)."""
        ...

    def crash_export(self, bundle_id: str, with_hostname: bool) -> bytes:
        """The bundle as a ``.tar.gz``, masked again."""
        ...


class VerdictDocument(Document):
    """Triage's answer: the rule, one line, what to do, how sure, and on what evidence."""

    rule: str = Field(description="the triage rule (docs/domain.md), or unknown")
    summary: str
    advice: str
    confidence: str = Field(description="high, medium, low, or none (unknown)")
    evidence: list[dict[str, str]] = Field(
        description="{kind: depth|rank|card|env|line|xid, value}"
    )
    source: str = Field("", description="where the rule comes from")


class CrashSummaryDocument(Document):
    """One bundle in the list."""

    id: str
    ts: str
    kind: str = Field(description="xid31, cuda_fault, stop_and_latch, ...")
    crash_class: str | None = None
    fault: str | None = Field(None, description="what recurrence counts")
    card: int | None = None
    serial: str | None = None
    rank: int | None = Field(None, description="the pipeline rank that faulted")
    depth_tokens: int | None = Field(None, description="the deepest request in flight")
    verdict: VerdictDocument
    escalation: dict[str, Any] | None = None


class CrashesDocument(Document):
    """``GET /api/v1/crashes``."""

    crashes: list[CrashSummaryDocument]
    degraded: str | None = Field(None, description="why the last bundle could not be written")
    fingerprint: dict[str, Any] | None = Field(None, description="the last ready's fingerprint")


class CrashDocument(Document):
    """``GET /api/v1/crashes/{id}``: the summary and every part."""

    summary: CrashSummaryDocument
    parts: dict[str, Any]


def router(archive: CrashArchive | None) -> APIRouter:
    """The crash routes (409 without a black box)."""
    routes = APIRouter()

    def control() -> CrashArchive:
        if archive is None:
            raise Conflict("this fleetd keeps no crash bundles", "no_evidence")
        return archive

    @routes.get(
        "/api/v1/crashes",
        response_model=CrashesDocument,
        responses=error_responses(409),
    )
    def list_crashes(limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> dict[str, Any]:
        """The crash bundles, newest first: when, class, verdict, card, rank, depth."""
        return control().crashes_document(limit)

    @routes.get(
        "/api/v1/crashes/{id}",
        response_model=CrashDocument,
        responses=error_responses(400, 404, 409),
    )
    def show_crash(bundle_id: BundleId) -> dict[str, Any]:
        """One bundle: the verdict and its evidence, and every part it holds."""
        return control().crash_document(bundle_id)

    @routes.get(
        "/api/v1/crashes/{id}/export",
        response_class=Response,
        responses={
            200: {
                "content": {"application/gzip": {"schema": {"type": "string", "format": "binary"}}},
                "description": "the bundle's tarball",
            },
            **error_responses(400, 404, 409),
        },
    )
    def export_crash(bundle_id: BundleId, with_hostname: bool = False) -> Response:
        """The bundle as a ``.tar.gz`` safe to attach to a public issue."""
        data = control().crash_export(bundle_id, with_hostname)
        return Response(
            data,
            media_type="application/gzip",
            headers={"Content-Disposition": f'attachment; filename="{bundle_id}.tar.gz"'},
        )

    return routes
