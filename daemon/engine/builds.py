"""Which build each engine run is: captured once the run is ready, stored, and kept at hand.

Each poll asks ``BuildTracker.poll``; when the engine is ready in a run it has not seen
(a launch or an adoption: pid and ready time), it captures that run's build on a short
thread of its own (an ``image inspect`` may take seconds; a poll must not wait): the
recipe hash, the image ID and digest of the image the container runs (the simulated
runtime's under ``--simulate``), the engine's ``/version``, the labels named in
``[serving] provenance_labels``, or ``[serving] provenance_command``'s output for a bare
process (``serving.runtime.provenance``). The build is stored (``builds``), its launch
row points at it, and ``build_for`` hands its id to the canaries, which stamp their
verdicts with it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Protocol

import httpx

from daemon.engine.service import EngineService
from daemon.engine.sim_containers import is_simulated_engine
from daemon.store import BuildRow, Store, StoreError
from hwcheck.threads import run_in_thread
from serving.recipe.build import build_launch
from serving.recipe.recipe import Recipe
from serving.runtime.provenance import (
    VERSION_MAX_BYTES,
    BuildFacts,
    ProvenanceError,
    image_facts_of,
    output_text,
    parse_image_inspect,
    parse_version,
)
from serving.runtime.states import ServingState
from serving.settings import ServingSettings
from serving.sim.images import SIM_ENGINE_IMAGE

log = logging.getLogger("fleetd.builds")

VERSION_TIMEOUT_S = 5.0
TOUCH_EVERY_S = 600.0


class BuildProbe(Protocol):
    """What capturing a build asks of the container runtime and the host."""

    def image_of_container(self, runtime: str, name: str) -> str | None:
        """The ID of the image a container runs."""
        ...

    def inspect_image(self, runtime: str, image: str) -> str | None:
        """``image inspect``'s JSON text."""
        ...

    def command_output(self, argv: Sequence[str], timeout_s: float) -> tuple[bool, str]:
        """A command's output, or why there is none."""
        ...


def engine_version(base_url: str, timeout_s: float = VERSION_TIMEOUT_S) -> tuple[str | None, str]:
    """``GET /version``'s version, or ``None`` and why.

    Bounded like ``provenance_command``'s output: at most ``VERSION_MAX_BYTES`` read and
    ``timeout_s`` in all (httpx's timeout is per read: an answer that trickles a byte at a
    time never met it). A 300 MB answer was read, logged and stored whole (issue 36).
    """
    deadline_s = time.monotonic() + timeout_s
    try:
        with (
            httpx.Client(trust_env=False) as client,
            client.stream("GET", f"{base_url.rstrip('/')}/version", timeout=timeout_s) as response,
        ):
            if response.status_code != 200:
                return None, f"GET /version answered HTTP {response.status_code}"
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > VERSION_MAX_BYTES:
                    return None, f"GET /version answered over {VERSION_MAX_BYTES // 1024} KiB"
                if time.monotonic() > deadline_s:
                    return None, f"GET /version took over {timeout_s:g} s"
        version = parse_version(json.loads(bytes(body)))
    except (httpx.HTTPError, ValueError, RecursionError) as exc:
        return None, f"GET /version failed: {exc.__class__.__name__}"
    return version, "" if version else "GET /version gave no version"


def capture_build(
    recipe: Recipe,
    recipe_hash: str,
    base_url: str,
    probe: BuildProbe,
    serving: ServingSettings,
    *,
    container_name: str | None = None,
    simulated: bool = False,
    version_of: Callable[[str], tuple[str | None, str]] = engine_version,
    pinned: str | None = None,
) -> BuildFacts:
    """The facts of the build an engine run (ready at ``base_url``) is.

    ``pinned``: the image reference a rollback runs instead of the recipe's tag; it is
    what is inspected when the runtime cannot say which image the container runs.
    """
    notes: list[str] = []
    facts = BuildFacts(recipe_hash)
    runtime, image = (recipe.mode, recipe.image) if recipe.is_container else ("docker", None)
    if image is None and simulated:
        image = SIM_ENGINE_IMAGE
    if image is not None:
        running = None
        if recipe.is_container and container_name:
            running = probe.image_of_container(runtime, container_name)
        asked = running or (pinned if recipe.is_container else None) or image
        text = probe.inspect_image(runtime, asked)
        if text is None:
            notes.append(f"{runtime} image inspect {asked} gave no answer")
        else:
            try:
                inspected = parse_image_inspect(text)
                facts = image_facts_of(recipe_hash, image, inspected, serving.provenance_labels)
            except ProvenanceError as exc:
                notes.append(f"{runtime} image inspect {image}: {exc}")
    elif serving.provenance_command:
        ok, output = probe.command_output(serving.provenance_command, serving.provenance_timeout_s)
        if ok:
            facts = dataclasses.replace(facts, provenance_output=output_text(output))
        else:
            notes.append(f"provenance_command: {output}")
    version, why = version_of(base_url)
    if why:
        notes.append(why)
    return dataclasses.replace(facts, engine_version=version, notes=tuple(notes))


def run_mark(pid: object, since: object) -> str:
    """One engine run's mark (the canaries use the same: ``pid@since``)."""
    return f"{pid}@{since}"


class BuildTracker:
    """The build of the engine run serving now (thread-safe)."""

    def __init__(
        self,
        store: Store,
        engine: EngineService,
        probe: BuildProbe,
        serving: ServingSettings,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._engine = engine
        self._probe = probe
        self._serving = serving
        self._clock = clock
        self._lock = threading.Condition()
        self._builds: dict[str, BuildRow | None] = {}  # run mark -> its build (None: failed)
        self._capturing: str | None = None
        self._touched_s = float("-inf")

    def poll(self) -> None:
        """Each poll: capture a new ready run's build (on its own thread); keep last_seen."""
        status = self._engine.supervisor.status()
        if status.state is not ServingState.READY or not status.url:
            return
        mark = run_mark(status.pid, status.since.isoformat())
        with self._lock:
            known = mark in self._builds
            if not known and self._capturing is None:
                self._capturing = mark
                url, pid = status.url, status.pid
                run_in_thread("build-capture", lambda: self._capture(mark, url, pid), log=log)
            build = self._builds.get(mark)
        if build is not None and self._clock() - self._touched_s >= TOUCH_EVERY_S:
            self._touched_s = self._clock()
            try:
                self._store.touch_build(build.id, datetime.now(UTC))
            except StoreError as exc:
                log.warning("build %s: last seen not stored: %s", build.build_key[:8], exc)

    def _capture(self, mark: str, url: str, pid: int | None) -> None:
        build: BuildRow | None = None
        try:
            recipe = self._engine.recipe
            latest = self._engine.latest_launch
            spec = build_launch(recipe)
            recipe_hash = (
                latest[1].recipe_hash if latest and latest[1].pid == pid else spec.recipe_hash
            )
            facts = capture_build(
                recipe,
                recipe_hash,
                url,
                self._probe,
                self._serving,
                container_name=spec.container_name,
                simulated=is_simulated_engine(recipe),
                pinned=self._engine.pinned_image,
            )
            build = self._store.record_build(
                facts.as_dict(), datetime.now(UTC), engine=self._engine.engine_key
            )
            if latest is not None and latest[1].pid == pid:
                self._store.set_launch_build(latest[0], build.id)
            log.info("engine build %s: %s", build.build_key[:8], _summary(facts))
        except StoreError as exc:  # the store's own fault: said in one line (its check pages)
            log.error("the engine's build could not be recorded: %s", exc)
        except Exception:  # a failed capture leaves the run without a build, never the daemon
            log.exception("the engine's build could not be captured")
        finally:
            with self._lock:
                self._builds = {mark: build}  # only the run serving now matters
                self._capturing = None
                self._touched_s = self._clock()
                self._lock.notify_all()

    def build_for(self, mark: str, wait_s: float = 0.0) -> BuildRow | None:
        """The build of run ``mark``, waiting up to ``wait_s`` for its capture."""
        deadline = self._clock() + wait_s
        with self._lock:
            while mark not in self._builds and (left := deadline - self._clock()) > 0:
                self._lock.wait(left)
            return self._builds.get(mark)

    def current(self, wait_s: float = 0.0) -> BuildRow | None:
        """The build of the run serving now, if captured (waiting up to ``wait_s`` for it)."""
        status = self._engine.supervisor.status()
        return self.build_for(run_mark(status.pid, status.since.isoformat()), wait_s)


def _summary(facts: BuildFacts) -> str:
    parts = [f"recipe {facts.recipe_hash[:12]}"]
    if facts.image_digest:
        parts.append(facts.image_digest)
    if facts.engine_version:
        parts.append(f"version {facts.engine_version}")
    parts += [f"{name}={value}" for name, value in facts.labels.items()]
    parts += facts.notes
    return ", ".join(parts)
