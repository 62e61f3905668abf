"""Finding the engine a previous fleetd launched, so a restarted fleetd adopts it.

The engine record (``engine.pid``) names the engine; a stale record (its engine gone) is
released. With no record, a container found by its name is adopted too (a lost state
dir). An adopted engine running an older spec than the current recipe earns a warning.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from serving.recipe.spec import LaunchSpec
from serving.runtime.engine_record import EngineRecord, RecordError, spec_hash
from serving.runtime.launchers import EngineHandle, Launcher, LauncherError
from serving.runtime.states import LaunchRecord

_LOG = logging.getLogger(__name__)


def find_engine(
    launcher: Launcher, spec_factory: Callable[[], LaunchSpec], warn: Callable[[str], None]
) -> EngineHandle | None:
    """The running engine to adopt, or None; ``warn`` hears why adoption was impossible."""
    try:
        record = launcher.read_record()
    except RecordError as exc:
        warn(f"cannot adopt the engine: {exc}")
        return None
    handle: EngineHandle | None = None
    try:
        if record is not None:
            handle = launcher.adopt(record)
            if handle is None:
                # The recorded engine is gone: the record is stale.
                launcher.release(EngineHandle(key="stale", record=record, adopted=True))
        if handle is None:
            handle = _adopt_unrecorded(launcher, spec_factory)
    except LauncherError as exc:
        warn(f"cannot adopt the engine: {exc}")
        return None
    return handle


def _adopt_unrecorded(
    launcher: Launcher, spec_factory: Callable[[], LaunchSpec]
) -> EngineHandle | None:
    """A container found by name though no record names it (a lost state dir)."""
    try:
        spec = spec_factory()
    except Exception as exc:
        _LOG.info("no launch spec to look for an unrecorded engine: %s", exc)
        return None
    return launcher.adopt_running(spec)


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
