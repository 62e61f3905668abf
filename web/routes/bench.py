"""The bench routes: ``POST /api/v1/bench`` starts a run, ``GET`` follows it, a stop ends it.

The daemon hands ``create_app`` an object satisfying ``BenchControl`` (web never imports
daemon). A start answers at once with the run (state ``running``) and fleetctl follows it;
a second start while one runs is 429 ``bench_running``; under the latch 409 ``latched``;
with the engine not ready 409 ``engine_not_ready``; a bad axis or a cap outside a card's
range 400 (a body of the wrong shape: 422). ``GET /api/v1/report`` is the confirmation report's document.
"""

from __future__ import annotations

from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict, Field

from serving.errors import Conflict
from web.auth import TokenGuard
from web.errors import error_responses
from web.params import RowId


class BenchControl(Protocol):
    """What the API asks of the daemon's bench."""

    def start_bench(self, body: dict[str, Any], actor: str) -> dict[str, Any]:
        """Begin a run (refusals are ``serving.errors``)."""
        ...

    def run_document(self, run_id: int) -> dict[str, Any]:
        """One run with its progress."""
        ...

    def stop(self, run_id: int) -> dict[str, Any]:
        """Stop a run (its finished cells kept)."""
        ...

    def list_document(self, limit: int) -> dict[str, Any]:
        """The runs, newest first, and per build."""
        ...

    def report_document(self, with_hostname: bool) -> dict[str, Any]:
        """The confirmation report's facts (no secret; the host name only when asked)."""
        ...


class BenchRequestBody(BaseModel):
    """``POST /api/v1/bench``: what ``fleetctl bench``'s flags say (absent: the default)."""

    model_config = ConfigDict(extra="forbid")
    quick: bool = False
    concurrency: Annotated[
        list[Annotated[int, Field(ge=1, le=1024)]] | None, Field(max_length=16)
    ] = None
    depths: Annotated[
        list[Annotated[int, Field(ge=1, le=10_000_000)]] | None,
        Field(max_length=16, description="prompt depths in tokens"),
    ] = None
    temperatures: Annotated[
        list[Annotated[float, Field(ge=0, le=2)]] | None, Field(max_length=8)
    ] = None
    output_tokens: Annotated[int | None, Field(ge=2, le=4096)] = None
    cap_sweep: Annotated[
        str | None,
        Field(description="LO:HI:STEP in watts: a power-cap sweep instead of the matrix"),
    ] = None


class BenchRunDocument(BaseModel):
    """One run: ``method`` (axes, sampling, speculative config, build, caps), ``cells``, verdict."""

    model_config = ConfigDict(extra="allow")
    id: int
    kind: str = Field(description="matrix or sweep")
    state: str = Field(description="running, done, stopped (finished cells kept) or failed")
    method: dict[str, Any]
    cells: list[dict[str, Any]]
    verdict: dict[str, Any] | None = None
    sweep: dict[str, Any] | None = None
    progress: dict[str, Any] | None = None


class BenchListDocument(BaseModel):
    """The runs newest first, and grouped per build."""

    model_config = ConfigDict(extra="allow")
    running: int | None
    runs: list[dict[str, Any]]
    builds: list[dict[str, Any]]


class ReportDocument(BaseModel):
    """The confirmation report: hardware, recipe (masked) and hash, build, canaries, bench."""

    model_config = ConfigDict(extra="allow")

    generated_at: str
    cmpfleet_version: str
    overall: str | None = None
    simulated: bool = False
    hardware: dict[str, Any] = Field(description="cards, driver, host facts, unlock")
    checks: list[dict[str, Any]] = Field(default_factory=list)
    recipe: dict[str, Any] | None = Field(None, description="masked, with its hash")
    build: Any = None
    canaries: list[dict[str, Any]] = Field(default_factory=list)
    memtest: dict[str, Any] = Field(default_factory=dict)
    bench: list[dict[str, Any]] = Field(default_factory=list)
    with_hostname: bool = False


def router(bench: BenchControl | None, guard: TokenGuard) -> APIRouter:
    """The routes around ``bench`` (``None``: no engine, every route 409)."""
    routes = APIRouter()
    token = [Depends(guard)]

    def control() -> BenchControl:
        if bench is None:
            raise Conflict("no engine is configured on this rig: nothing to bench", "no_engine")
        return bench

    @routes.post(
        "/api/v1/bench",
        dependencies=token,
        response_model=BenchRunDocument,
        responses=error_responses(400, 409, 422, 429),
    )
    def bench_start(body: BenchRequestBody | None = None) -> dict[str, Any]:
        """Start a bench run against the engine in service (answers at once, state running)."""
        request = body or BenchRequestBody()
        return control().start_bench(request.model_dump(), "api")

    @routes.get("/api/v1/bench", response_model=BenchListDocument, responses=error_responses(409))
    def bench_list(limit: Annotated[int, Query(ge=1, le=500)] = 50) -> dict[str, Any]:
        """The bench runs, newest first, and per build."""
        return control().list_document(limit)

    @routes.get(
        "/api/v1/bench/{run_id}",
        response_model=BenchRunDocument,
        responses=error_responses(404, 409),
    )
    def bench_run(run_id: RowId) -> dict[str, Any]:
        """One bench run: method, cells, verdict (and progress while it runs)."""
        return control().run_document(run_id)

    @routes.post(
        "/api/v1/bench/{run_id}/stop",
        dependencies=token,
        response_model=BenchRunDocument,
        responses=error_responses(404, 409),
    )
    def bench_stop(run_id: RowId) -> dict[str, Any]:
        """Stop a run: the cell under way dropped, the finished ones kept; a sweep's caps back."""
        return control().stop(run_id)

    @routes.get(
        "/api/v1/report",
        dependencies=token,
        response_model=ReportDocument,
        responses=error_responses(409),
    )
    def report(
        with_hostname: Annotated[bool, Query(description="name this host in the report")] = False,
    ) -> dict[str, Any]:
        """The confirmation report's facts (no secret; no host name unless asked)."""
        return control().report_document(with_hostname)

    return routes
