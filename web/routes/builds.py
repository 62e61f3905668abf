"""The builds routes: the builds, a rollback to the last good one, a simulated rebuild.

``GET /api/v1/builds``, ``POST /api/v1/builds/rollback`` and, simulating,
``POST /api/v1/sim/rebuild``.

The daemon hands ``create_app`` an object satisfying ``BuildsControl`` (web never imports
daemon); without one (no engine configured) the routes answer 409 with a reason.
"""

from __future__ import annotations

from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict, Field

from serving.errors import Conflict, NotFound
from web.auth import TokenGuard
from web.errors import error_responses
from web.models import Document, IsoTime, ServingDocument, SwitchProgressDocument


class BuildsControl(Protocol):
    """What the API asks of the daemon's build tracking."""

    def builds_document(self, limit: int, engine: str | None = None) -> dict[str, Any]:
        """One engine's builds (None: the primary's), their canary verdicts, the regressions."""
        ...

    def rebuild_image(
        self, image: str | None, engine: dict[str, Any], labels: dict[str, str], version: str | None
    ) -> dict[str, Any] | None:
        """A simulated image rebuild (``None``: not simulating)."""
        ...

    def rollback(self, to: str | None, stop_foreign: bool = False) -> dict[str, Any]:
        """Serve the last good build (or ``to``) again, or say what to run for a process."""
        ...


class BuildDocument(Document):
    """One engine build: what ran, when it was seen, what the canaries found on it."""

    id: int
    name: str = Field(description="how people are shown it: build <key> (digest, version)")
    build_key: str = Field(description="the hash of its facts")
    recipe_hash: str
    image: str | None = None
    image_id: str | None = None
    image_digest: str | None = None
    engine_version: str | None = Field(None, description="the engine's GET /version")
    labels: dict[str, str] = Field(description="the image labels named in provenance_labels")
    provenance_output: str | None = Field(None, description="provenance_command's output")
    first_seen: IsoTime
    last_seen: IsoTime
    current: bool = Field(description="the build of the engine run serving now")
    canaries: dict[str, dict[str, Any]] = Field(
        description="each canary's newest verdict on this build (deep ones per depth)"
    )


class RegressionDocument(Document):
    """A canary that passed on an earlier build and fails on the newest that judged it."""

    canary: str
    depth: int | None = None
    passed_build: str
    passed_figure: str
    failed_build: str
    failed_figure: str
    since: IsoTime | None = None
    text: str


class SimImageDocument(Document):
    """``POST /api/v1/sim/rebuild``: the simulated image as now built under its tag."""

    image: str = Field(description="the tag, unchanged")
    build: int = Field(description="how many times it has been built")
    id: str = Field(description="the new image ID (sha256:...)")
    digest: str = Field(description="the new repository digest")
    labels: dict[str, str]
    version: str = Field(description="what the simulated engine's /version answers")
    args: list[str] = Field(description="engine arguments the rebuilt image adds")
    built_at: str


class BuildRefDocument(Document):
    """A build as an answer names it."""

    id: int
    build_key: str
    name: str
    image_digest: str | None = None
    image_id: str | None = None


class BuildsDocument(Document):
    """``GET /api/v1/builds``."""

    builds: list[BuildDocument]
    regressions: list[RegressionDocument]
    last_good: BuildRefDocument | None = Field(
        None,
        description="the newest build, other than the one serving, whose canaries all passed",
    )


class RollbackRequest(BaseModel):
    """``POST /api/v1/builds/rollback`` body."""

    model_config = ConfigDict(extra="forbid")
    to: Annotated[str, Field(min_length=1, max_length=80)] | None = Field(
        None,
        description="the build (its key, a 4+ character prefix, or its id); default: last_good",
    )
    stop_foreign: bool = False


class RollbackDocument(Document):
    """``POST /api/v1/builds/rollback``: the switch begun (or in force), or what to run."""

    accepted: bool
    build: BuildRefDocument
    profile: str
    image: str | None = Field(None, description="the image reference served (by digest)")
    manual: bool | None = Field(None, description="a bare process: nothing moved")
    instructions: str | None = Field(None, description="what to run to go back (manual)")
    already_active: bool | None = None
    in_progress: bool | None = None
    switch: SwitchProgressDocument | None = None
    serving: ServingDocument | None = None


class RebuildRequest(BaseModel):
    """``POST /api/v1/sim/rebuild``: build the simulated image again under the same tag."""

    model_config = ConfigDict(extra="forbid")
    image: str | None = Field(None, description="default: the simulated engine's image")
    engine: dict[str, Any] = Field(
        default_factory=dict,
        description="scenario [engine] keys the new build behaves by (after its next start)",
    )
    labels: dict[str, str] = Field(default_factory=dict)
    version: str | None = Field(None, description="what the new build's /version answers")


def router(builds: BuildsControl | None, guard: TokenGuard) -> APIRouter:
    """The routes around ``builds`` (``None``: no engine, 409)."""
    routes = APIRouter()

    def control() -> BuildsControl:
        if builds is None:
            raise Conflict("no engine is configured on this rig: no builds", "no_engine")
        return builds

    @routes.get(
        "/api/v1/builds",
        response_model=BuildsDocument,
        response_model_exclude_unset=True,
        responses=error_responses(404, 409),
    )
    def list_builds(
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        engine: Annotated[
            str | None,
            Query(
                min_length=1,
                max_length=64,
                description="an engine's profile ([serving] run); default the primary's",
            ),
        ] = None,
    ) -> dict[str, Any]:
        """One engine's builds seen (newest first), their canary verdicts, the regressions."""
        return control().builds_document(limit, engine)

    @routes.post(
        "/api/v1/builds/rollback",
        dependencies=[Depends(guard)],
        response_model=RollbackDocument,
        response_model_exclude_unset=True,
        responses=error_responses(404, 409, 503),
    )
    def rollback(body: RollbackRequest) -> dict[str, Any]:
        """Serve the last good build again (``to``: another), by its image's digest.

        The same gate, preflight and recovery moves as a profile switch (progress:
        ``serving.switch``); a bare process answers ``manual`` with what to run.
        """
        return control().rollback(body.to, body.stop_foreign)

    @routes.post(
        "/api/v1/sim/rebuild",
        dependencies=[Depends(guard)],
        response_model=SimImageDocument,
        responses=error_responses(400, 404, 409, 503),
    )
    def sim_rebuild(body: RebuildRequest) -> dict[str, Any]:
        """Simulation only: rebuild an image under the same tag (a new ID and digest).

        The simulated engine runs the new build from its next start.
        """
        done = control().rebuild_image(body.image, body.engine, body.labels, body.version)
        if done is None:
            raise NotFound("not simulating: start fleetd with --simulate")
        return done

    return routes
