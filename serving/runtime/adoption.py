"""Finding the engine a previous fleetd launched, so a restarted fleetd adopts it.

The engine record (``engine.pid``) names the engine; a stale record (its engine gone) is
released. With no record, a container found by its name is adopted too (a lost state
dir). Either is adopted only when its recipe hash (the record's, or the container's
``cmpfleet.recipe-hash`` label) is the active profile's: anything else is a ``Drift``,
reported and left running, never passed off as the profile. An adopted engine of the
same recipe but an older launch spec (another port, another interpreter) earns a warning.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from serving.recipe.spec import LaunchSpec
from serving.runtime.engine_record import EngineRecord, RecordError, spec_hash
from serving.runtime.launchers import EngineDrifted, EngineHandle, Launcher, LauncherError
from serving.runtime.states import Drift, LaunchRecord

_LOG = logging.getLogger(__name__)


def _current_spec(spec_factory: Callable[[], LaunchSpec]) -> LaunchSpec | None:
    try:
        return spec_factory()
    except Exception as exc:
        _LOG.info("no launch spec to compare a running engine with: %s", exc)
        return None


def find_engine(
    launcher: Launcher, spec_factory: Callable[[], LaunchSpec], warn: Callable[[str], None]
) -> EngineHandle | Drift | None:
    """The running engine to adopt, a ``Drift`` (running, not the profile's), or None.

    ``warn`` hears why adoption was impossible. A drifted engine's record stays: it still
    names a running engine, which a switch to its own profile adopts.
    """
    try:
        record = launcher.read_record()
    except RecordError as exc:
        warn(f"cannot adopt the engine: {exc}")
        return None
    spec = _current_spec(spec_factory)
    handle: EngineHandle | None = None
    try:
        if record is not None:
            handle = launcher.adopt(record)
            if handle is None:
                # The recorded engine is gone: the record is stale.
                launcher.release(EngineHandle(key="stale", record=record, adopted=True))
            elif spec is not None and record.recipe_hash and record.recipe_hash != spec.recipe_hash:
                launcher.detach(handle)
                return Drift(
                    pid=record.pid,
                    container_name=record.container_name,
                    recipe_hash=record.recipe_hash,
                    expected_hash=spec.recipe_hash,
                    url=record.base_url,
                    mode=str(record.mode),
                )
        if handle is None and spec is not None:
            handle = launcher.adopt_running(spec)
    except EngineDrifted as drifted:
        return Drift(
            pid=drifted.pid,
            container_name=drifted.container_name,
            recipe_hash=drifted.recipe_hash,
            expected_hash=spec.recipe_hash if spec is not None else "",
            url=drifted.base_url,
            mode=str(spec.mode) if spec is not None else "",
        )
    except LauncherError as exc:
        warn(f"cannot adopt the engine: {exc}")
        return None
    return handle


def adopted_launch(record: EngineRecord) -> LaunchRecord:
    """The launch record of an adopted engine (its start time from the engine record)."""
    return LaunchRecord(
        launch_id=uuid.uuid4().hex,
        argv=record.argv,
        env={},
        recipe_hash=record.recipe_hash,
        spec_hash=record.spec_hash,
        pid=record.pid,
        adopted=True,
        started_at=_parse_time(record.launched_at) or datetime.now(UTC),
    )


def runs_outdated_spec(record: EngineRecord, spec_factory: Callable[[], LaunchSpec]) -> bool:
    """True when the adopted engine's spec differs from what the recipe builds now."""
    try:
        current = spec_hash(spec_factory())
    except Exception as exc:
        _LOG.warning("cannot compare the adopted engine with the current recipe: %s", exc)
        return False
    return current != record.spec_hash


def _parse_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None
