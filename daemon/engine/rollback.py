"""``fleetctl rollback [--to BUILD]``: back to the last build whose canaries passed.

Images are rebuilt under the same tag (``dsv4-a100:devel``), so "the previous image" is
not a tag anyone can name: it is the digest a build recorded (``daemon.engine.builds``).
The way back is the build's own facts: the profile whose recipe hashes to the build's
recipe hash, and the image by its digest (``repo@sha256:...``, else its image ID). The
move itself is a switch (``engine_switch``): the same gate and preflight as ``serve``, the
stop and the start through recovery, with the profile's image pinned to that digest
(``EngineService.activate``); the pin is kept with the profile in force across fleetd
restarts, and a ``fleetctl serve`` of any profile ends it.

A bare process has no image to pin: the answer says what that build ran (its provenance
output, its ``/version``) and what to do; nothing moves.

"Good": at least one canary verdict on the build, and none of its canaries' newest
verdicts a warning or a failure. The default target is the newest good build other than
the one serving now (newest by first seen, as ``fleetctl builds`` lists them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from daemon.store import BuildRow, BuildVerdict
from serving.errors import Conflict, NotFound
from serving.profiles import ProfileSet
from serving.runtime.provenance import build_name

BAD_RESULTS = frozenset({"warn", "fail"})
MIN_KEY_CHARS = 4


def display(build: BuildRow) -> str:
    """``build 3f2a9c1d (repo@sha256:0123456789ab, 0.11.0)``."""
    return build_name(build.build_key, build.image_digest, build.engine_version)


def good_builds(builds: Sequence[BuildRow], verdicts: Sequence[BuildVerdict]) -> list[BuildRow]:
    """The builds whose canaries all passed (newest first seen first)."""
    results: dict[int, list[str]] = {}
    for verdict in verdicts:
        results.setdefault(verdict.build_id, []).append(verdict.result)
    good = [
        build
        for build in builds
        if "pass" in results.get(build.id, []) and not BAD_RESULTS & set(results[build.id])
    ]
    return sorted(good, key=lambda b: (b.first_seen, b.id), reverse=True)


def last_good(
    builds: Sequence[BuildRow], verdicts: Sequence[BuildVerdict], current_id: int | None
) -> BuildRow | None:
    """The newest good build other than the one serving now."""
    return next((b for b in good_builds(builds, verdicts) if b.id != current_id), None)


def named_build(builds: Sequence[BuildRow], to: str) -> BuildRow:
    """The build ``to`` names: its key (or a prefix of 4+ characters), or its row id.

    ``NotFound`` naming the known builds when none (or more than one) matches.
    """
    wanted = to.strip().lower().removeprefix("build ").strip()
    if wanted.isdecimal() and len(wanted) < MIN_KEY_CHARS:
        matches = [b for b in builds if b.id == int(wanted)]
    elif len(wanted) >= MIN_KEY_CHARS:
        matches = [b for b in builds if b.build_key.startswith(wanted)]
    else:
        matches = []
    if len(matches) == 1:
        return matches[0]
    known = ", ".join(b.build_key[:8] for b in builds) or "none recorded yet"
    what = "more than one build" if matches else "no build"
    raise NotFound(f"{what} {to!r} (known: {known})", "unknown_build")


@dataclass(frozen=True)
class RollbackTarget:
    """Where a rollback goes: the build, the profile that launched it, the image reference.

    ``image`` None: the profile runs a bare process (nothing to pin; ``instructions``).
    """

    build: BuildRow
    profile: str
    image: str | None

    def instructions(self) -> str:
        """What a person runs to go back to a bare process's build (from its provenance)."""
        build = self.build
        facts = []
        if build.provenance_output:
            facts.append(f"provenance: {build.provenance_output.splitlines()[0][:200]}")
        else:
            facts.append("no provenance recorded (set [serving] provenance_command)")
        if build.engine_version:
            facts.append(f"engine version {build.engine_version}")
        return (
            f"profile {self.profile} runs a bare process: fleetd cannot pin its build. "
            f"Put the engine's installation back to {display(build)} ({'; '.join(facts)}), "
            f"then run: fleetctl serve {self.profile} (or fleetctl restart when it is in force)"
        )


def rollback_target(
    builds: Sequence[BuildRow],
    verdicts: Sequence[BuildVerdict],
    current_id: int | None,
    profiles: ProfileSet,
    to: str | None,
) -> RollbackTarget:
    """The build a rollback serves and how, or why there is none (``NotFound``, ``Conflict``)."""
    if to is not None:
        build = named_build(builds, to)
    else:
        found = last_good(builds, verdicts, current_id)
        if found is None:
            raise Conflict(
                "no earlier build whose canaries passed (fleetctl builds lists their verdicts; "
                "--to BUILD names one)",
                "no_good_build",
            )
        build = found
    names = profiles.matching(build.recipe_hash)
    if not names:
        raise Conflict(
            f"{display(build)} was launched from a recipe no profile has now (recipe hash "
            f"{build.recipe_hash[:12]}): fleetd cannot launch it again",
            "build_recipe_gone",
        )
    name = names[0]
    recipe = profiles.get(name).recipe
    if not recipe.is_container:
        return RollbackTarget(build, name, None)
    image = build.image_digest or build.image_id
    if image is None:
        raise Conflict(
            f"{display(build)}: its image's digest was never recorded (image inspect gave "
            "no answer when it ran): there is nothing to pin",
            "build_digest_unknown",
        )
    return RollbackTarget(build, name, image)
