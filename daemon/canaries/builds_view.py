"""``fleetctl builds`` / ``GET /api/v1/builds``: the builds seen and their canary verdicts.

Each build (``daemon.store.builds``) with its facts, first and last seen, and each
canary's newest verdict on it (deep ones with their per-depth figures); then the
regressions (``serving.canary.regressions``): canaries failing on the newest build that
judged them, naming the last build they passed on and the first they failed on; and the
last good build (``daemon.engine.rollback``), where ``fleetctl rollback`` goes.
"""

from __future__ import annotations

from typing import Any

from daemon.engine.builds import BuildTracker
from daemon.engine.rollback import last_good, rollback_target
from daemon.engine.service import EngineService
from daemon.store import BuildRow, BuildVerdict, Store
from serving.canary.regressions import BuildStandings, Regression, Standing, regressions
from serving.errors import Conflict, InvalidInput, NotFound, Unavailable
from serving.runtime.provenance import build_name
from serving.sim.images import SIM_ENGINE_IMAGE, ImageStore, ImageStoreError
from serving.sim.scenario import EngineScenarioError, override_args

MAX_BUILDS = 50


def display_name(build: BuildRow) -> str:
    """``build 3f2a9c1d (repo@sha256:0123456789ab, 0.11.0)``."""
    return build_name(build.build_key, build.image_digest, build.engine_version)


def _standing(verdict: BuildVerdict) -> Standing:
    return Standing(
        verdict.result,
        verdict.figure,
        verdict.unit,
        verdict.ts,
        verdict.details,
        verdict.first_bad_ts,
    )


def build_regressions(builds: list[BuildRow], verdicts: list[BuildVerdict]) -> list[Regression]:
    """The regressions among ``builds`` (any order) given their verdicts."""
    by_build: dict[int, dict[str, Standing]] = {}
    for verdict in verdicts:
        by_build.setdefault(verdict.build_id, {})[verdict.name] = _standing(verdict)
    ordered = sorted(builds, key=lambda b: (b.first_seen, b.id))
    return regressions(
        [BuildStandings(b.id, display_name(b), by_build.get(b.id, {})) for b in ordered]
    )


def regression_line(store: Store, canary: str, build_id: int) -> str | None:
    """The regression of ``canary`` up to build ``build_id`` (the newest), as one line, or None.

    A regression is only reported while the newest build that judged the canary fails it.
    """
    builds = store.list_builds(limit=MAX_BUILDS)
    if not any(b.id == build_id for b in builds):
        return None
    found = build_regressions(builds, store.build_verdicts([b.id for b in builds]))
    return next((r.text for r in found if r.canary == canary), None)


def _verdict_entry(verdict: BuildVerdict) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "result": verdict.result,
        "figure": verdict.figure,
        "unit": verdict.unit,
        "ts": verdict.ts.isoformat(),
        "first_bad_ts": None if verdict.first_bad_ts is None else verdict.first_bad_ts.isoformat(),
    }
    details = verdict.details or {}
    if "depths" in details:
        entry["depths"] = details["depths"]
        entry["breaks_at"] = details.get("breaks_at")
    return entry


def builds_document(
    store: Store, current_id: int | None, limit: int = MAX_BUILDS, engine: str | None = None
) -> dict[str, Any]:
    """One engine's builds (newest seen first), their verdicts, and the regressions.

    ``engine``: a side engine's profile (None: the primary's), whose builds alone count.
    """
    builds = store.list_builds(limit=limit, engine=engine)
    verdicts = store.build_verdicts([b.id for b in builds])
    per_build: dict[int, dict[str, Any]] = {}
    for verdict in verdicts:
        per_build.setdefault(verdict.build_id, {})[verdict.name] = _verdict_entry(verdict)
    entries = []
    for build in builds:
        entry = build.to_dict()
        entry["name"] = display_name(build)
        entry["current"] = build.id == current_id
        entry["canaries"] = per_build.get(build.id, {})
        entries.append(entry)
    good = last_good(builds, verdicts, current_id)
    return {
        "builds": entries,
        "regressions": [r.as_dict() for r in build_regressions(builds, verdicts)],
        "last_good": None if good is None else _build_entry(good),
    }


def _build_entry(build: BuildRow) -> dict[str, Any]:
    """A build as an answer names it: id, key, name, image digest and ID."""
    return {
        "id": build.id,
        "build_key": build.build_key,
        "name": display_name(build),
        "image_digest": build.image_digest,
        "image_id": build.image_id,
    }


class BuildsApi:
    """What ``web.routes.builds`` asks: the builds document, and (simulating) an image rebuild."""

    def __init__(
        self,
        store: Store,
        tracker: BuildTracker,
        images: ImageStore | None,
        engine: EngineService | None = None,
    ) -> None:
        self._store = store
        self._tracker = tracker
        self._images = images
        self._engine = engine
        self._sides: dict[str, BuildTracker] = {}

    def attach_sides(self, trackers: dict[str, BuildTracker]) -> None:
        """Each side engine's build tracker, by profile (``[serving] run``), for ``?engine=``."""
        self._sides = dict(trackers)

    def builds_document(self, limit: int, engine: str | None = None) -> dict[str, Any]:
        """``GET /api/v1/builds[?engine=NAME]``: the primary's builds, or NAME's own.

        NAME may be the primary's profile too; one no engine here runs is a 404 naming them.
        """
        tracker, key = self._tracker, None
        primary = None if self._engine is None else self._engine.profile
        if engine is not None and engine != primary:
            found = self._sides.get(engine)
            if found is None:
                names = ", ".join(name for name in (primary, *self._sides) if name)
                raise NotFound(f"no engine {engine!r} on this rig (engines: {names})")
            tracker, key = found, engine
        current = tracker.current()
        return builds_document(self._store, None if current is None else current.id, limit, key)

    def rollback(
        self, to: str | None, stop_foreign: bool = False, actor: str = "operator"
    ) -> dict[str, Any]:
        """``POST /api/v1/serving/rollback``: serve the last good build (or ``to``) again.

        A container profile switches to the build's image by digest, through the same gate,
        preflight and recovery moves as ``serve`` (``EngineService.switch``); a bare
        process gets what to run (``manual``), and nothing moves. ``NotFound`` for an
        unknown ``to`` (naming the known builds), ``Conflict`` when there is no way back.
        """
        engine = self._engine
        if engine is None:
            raise Unavailable("no engine to roll back", "no_engine")
        builds = self._store.list_builds(limit=MAX_BUILDS)
        verdicts = self._store.build_verdicts([b.id for b in builds])
        current = self._tracker.current()
        current_id = None if current is None else current.id
        try:
            target = rollback_target(builds, verdicts, current_id, engine.profiles, to)
        except (NotFound, Conflict) as exc:
            self._store.audit(actor, "engine_rollback", "refused", target=to, reason=str(exc))
            raise
        build = _build_entry(target.build)
        if target.image is None:
            return {
                "accepted": False,
                "manual": True,
                "profile": target.profile,
                "build": build,
                "instructions": target.instructions(),
            }
        if target.build.id == current_id:
            answer: dict[str, Any] = {
                "profile": target.profile,
                "accepted": True,
                "already_active": True,
                "serving": engine.status_document(),
            }
        else:
            answer = engine.switch(target.profile, actor, stop_foreign, target.image)
        self._store.audit(
            actor,
            "engine_rollback",
            "accepted",
            target=target.build.build_key[:8],
            reason=f"rollback to {build['name']}: profile {target.profile}, image {target.image}",
        )
        return {**answer, "build": build, "image": target.image}

    def rebuild_image(
        self, image: str | None, engine: dict[str, Any], labels: dict[str, str], version: str | None
    ) -> dict[str, Any] | None:
        """``POST /api/v1/sim/rebuild``: a new ID and digest for the tag (``None``: not simulating).

        ``engine`` holds scenario ``[engine]`` keys: how the new build behaves once the
        engine starts from it.
        """
        if self._images is None:
            return None
        try:
            args = override_args(engine, "rebuild")
        except EngineScenarioError as exc:
            raise InvalidInput(str(exc)) from None
        try:
            return self._images.rebuild(
                image or SIM_ENGINE_IMAGE, args=args, labels=labels, version=version
            )
        except ImageStoreError as exc:
            raise Unavailable(str(exc)) from None
