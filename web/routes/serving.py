"""The engine's routes: start/stop/restart, the recipe, the launch profiles and a switch.

``POST /api/v1/serving/{start,stop,restart}`` answers 409 with the reason and its code
when refused. A switch (``POST /api/v1/serving/switch``) stops the engine cleanly and
starts another profile; it answers at once (the stop can take minutes) with
``in_progress`` and the switch's id, and its progress is the status document's
``serving.switch``. An unknown profile is a 404 naming the known ones; a refusal that
needs no stop (the reboot latch, the profile's lint errors) a 409. The engine's log has
its own router (``web.routes.logs``: every route there needs the token).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from web.auth import TokenGuard
from web.errors import error_responses
from web.models import (
    Document,
    RecipeDocument,
    ServingActionDocument,
    ServingDocument,
    SwitchProgressDocument,
)
from web.services import WebServices


class LintFindingDocument(Document):
    """One lint finding: ``{rule, severity, key, value, reason}`` (``waived`` when waived)."""

    rule: str
    severity: Literal["error", "warning", "note"]
    key: str
    value: str
    reason: str
    waived: str | None = None


class ProfileLintDocument(Document):
    """A profile's lint verdict against this rig's cards."""

    verdict: Literal["clean", "warnings", "errors"]
    errors: int
    warnings: int
    notes: int
    findings: list[LintFindingDocument]


class ProfileDocument(Document):
    """One launch profile."""

    name: str
    active: bool = Field(description="the profile in force")
    configured: bool = Field(description="[serving] profile: the one the config autostarts")
    source: str = Field(description="the config table or the recipe file it was read from")
    mode: Literal["process", "docker", "podman"]
    model: str
    served_model_name: str
    gpus: str
    family: str | None
    recipe_hash: str
    lint: ProfileLintDocument


class ProfilesDocument(Document):
    """``GET /api/v1/serving/profiles``."""

    active: str
    configured: str
    profiles: list[ProfileDocument]
    switch: SwitchProgressDocument | None


class SwitchAnswerDocument(Document):
    """``POST /api/v1/serving/switch``: accepted (in progress, or already in force)."""

    profile: str
    accepted: bool
    already_active: bool | None = None
    in_progress: bool | None = None
    switch: SwitchProgressDocument | None = None
    serving: ServingDocument


class ServingActionRequest(BaseModel):
    """Optional body of ``POST /api/v1/serving/{action}``."""

    model_config = ConfigDict(extra="forbid")
    stop_foreign: bool = Field(
        False, description="start only: stop foreign containers holding the port or the cards"
    )
    engine: str | None = Field(
        None, description="the engine, by its profile ([serving] run); absent: the primary"
    )


class SwitchRequest(BaseModel):
    """``POST /api/v1/serving/switch`` body."""

    model_config = ConfigDict(extra="forbid")
    profile: Annotated[str, Field(min_length=1, max_length=64)]
    stop_foreign: bool = False


def router(services: WebServices, guard: TokenGuard) -> APIRouter:
    """The engine's routes, reading and acting through ``services`` (POSTs: the token)."""
    routes = APIRouter()
    token = [Depends(guard)]

    @routes.get(
        "/api/v1/serving/profiles",
        response_model=ProfilesDocument,
        response_model_exclude_unset=True,
        responses=error_responses(409),
    )
    def serving_profiles() -> dict[str, Any]:
        """The launch profiles (the one in force marked) and each one's lint verdict."""
        return services.serving_profiles()

    # Before the templated /serving/{action}: "switch" is not one of its actions.
    @routes.post(
        "/api/v1/serving/switch",
        dependencies=token,
        response_model=SwitchAnswerDocument,
        response_model_exclude_unset=True,
        responses=error_responses(404, 409, 503),
    )
    def serving_switch(body: SwitchRequest) -> dict[str, Any]:
        """Stop the engine cleanly and start profile ``profile`` (progress: ``serving.switch``)."""
        return services.serving_switch(body.profile, stop_foreign=body.stop_foreign)

    @routes.post(
        "/api/v1/serving/{action}",
        dependencies=token,
        response_model=ServingActionDocument,
        response_model_exclude_unset=True,
        responses=error_responses(404, 409, 503),
    )
    def serving(
        action: Literal["start", "stop", "restart"], body: ServingActionRequest | None = None
    ) -> dict[str, Any]:
        """Start, stop or restart the engine (409 with the reason and its code when refused).

        ``{"stop_foreign": true}`` with ``start``: first stop foreign containers that hold
        the port or the profile's cards (SIGINT, then SIGTERM; never SIGKILL; recorded).
        """
        if body is not None and body.engine is not None:
            return services.serving_action(action, body.stop_foreign, engine=body.engine)
        if body is not None and body.stop_foreign:
            return services.serving_action(action, stop_foreign=True)
        return services.serving_action(action)

    @routes.get(
        "/api/v1/serving/recipe",
        response_model=RecipeDocument,
        response_model_exclude_unset=True,
        responses=error_responses(401, 403, 409),
        dependencies=token,
    )
    def serving_recipe() -> RecipeDocument:
        """The argv and environment the daemon would launch; diff to the last ready launch.

        The token is needed even on loopback, as for the engine log: masked or not, the
        recipe's environment is the launch's (model paths, endpoints, what a rule missed).
        """
        return services.serving_recipe()

    return routes
