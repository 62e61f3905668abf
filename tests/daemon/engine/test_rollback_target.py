"""Where ``fleetctl rollback`` goes: the newest build other than the serving one whose
canaries all passed, its profile by recipe hash, its image by digest; the refusals and the
bare process's instructions. Builds and verdicts are plain rows (no daemon)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from daemon.engine.profiles import ActiveProfile
from daemon.engine.rollback import good_builds, last_good, named_build, rollback_target
from daemon.store import BuildRow, BuildVerdict
from serving.errors import Conflict, NotFound
from serving.profiles import Profile, ProfileSet
from serving.recipe.build import recipe_hash
from serving.recipe.recipe import preset_recipe, recipe_from_table
from serving.sim.images import ImageStore, ImageStoreError, build_of

T0 = datetime(2026, 12, 1, tzinfo=UTC)
DOCKER = preset_recipe("dsv4-flash-pp4-dspark")
PROCESS = recipe_from_table({"model": "/models/glm"}, "glm")
PROFILES = ProfileSet([Profile("dsv4", DOCKER, "[x]"), Profile("glm", PROCESS, "[y]")], "dsv4")


def build(
    id_: int,
    key: str,
    *,
    recipe: str = "",
    digest: str | None = None,
    image_id: str | None = None,
    provenance: str | None = None,
) -> BuildRow:
    return BuildRow(
        id=id_, build_key=key * 8, recipe_hash=recipe or recipe_hash(DOCKER), image="dsv4-a100:devel",
        image_id=image_id, image_digest=digest, engine_version="0.11.0", labels={},
        provenance_output=provenance, notes=None, first_seen=T0 + timedelta(days=id_),
        last_seen=T0 + timedelta(days=id_),
    )  # fmt: skip


def verdict(build_id: int, name: str, result: str) -> BuildVerdict:
    return BuildVerdict(build_id, name, result, None, "ratio", T0, None, None)


A = build(1, "a", digest="dsv4-a100@sha256:" + "1" * 64)
B = build(2, "b", digest="dsv4-a100@sha256:" + "2" * 64)
C = build(3, "c", digest="dsv4-a100@sha256:" + "3" * 64)
VERDICTS = [
    verdict(1, "copy_fidelity", "pass"),
    verdict(1, "throughput", "pass"),
    verdict(2, "copy_fidelity", "pass"),
    verdict(2, "throughput", "warn"),
    verdict(3, "copy_fidelity", "fail"),
]


def test_the_last_good_build_is_the_newest_all_pass_one_not_serving() -> None:
    assert [b.id for b in good_builds([A, B, C], VERDICTS)] == [1]
    assert last_good([A, B, C], VERDICTS, current_id=3) == A
    assert last_good([A, B, C], VERDICTS, current_id=1) is None  # it serves already
    assert last_good([A, B, C], [], current_id=3) is None  # never judged: not good


def test_rollback_pins_the_good_builds_digest_on_its_profile() -> None:
    target = rollback_target([A, B, C], VERDICTS, 3, PROFILES, None)
    assert (target.build, target.profile, target.image) == (A, "dsv4", A.image_digest)
    chosen = rollback_target([A, B, C], VERDICTS, 3, PROFILES, "bbbb")
    assert chosen.build == B  # --to may name a build whose canaries did not all pass
    no_digest = build(4, "d", image_id="sha256:" + "4" * 64)
    assert rollback_target([no_digest], [], None, PROFILES, "4").image == no_digest.image_id


@pytest.mark.parametrize("to", ["zzzz", "a", "", "build 9"])
def test_an_unknown_build_names_the_known_ones(to: str) -> None:
    with pytest.raises(NotFound) as missing:
        named_build([A, B], to)
    assert "known: aaaaaaaa, bbbbbbbb" in missing.value.message


def test_no_good_build_a_gone_recipe_or_no_digest_is_refused() -> None:
    with pytest.raises(Conflict, match="no earlier build whose canaries passed"):
        rollback_target([A, C], VERDICTS, 1, PROFILES, None)
    gone = build(5, "e", recipe="sha256:gone", digest="x@sha256:" + "5" * 64)
    with pytest.raises(Conflict, match="no profile has now"):
        rollback_target([gone], [verdict(5, "copy_fidelity", "pass")], None, PROFILES, None)
    blind = build(6, "f")
    with pytest.raises(Conflict, match="digest was never recorded"):
        rollback_target([blind], [], None, PROFILES, "ffff")


def test_a_bare_process_gets_what_to_run_from_its_provenance() -> None:
    bare = build(7, "g", recipe=recipe_hash(PROCESS), provenance="v0.11.0-42-gdeadbee-dirty\n")
    target = rollback_target([bare], [verdict(7, "copy_fidelity", "pass")], None, PROFILES, None)
    assert (target.profile, target.image) == ("glm", None)
    text = target.instructions()
    assert "bare process" in text and "v0.11.0-42-gdeadbee-dirty" in text
    assert "fleetctl serve glm" in text and "0.11.0" in text


def test_the_simulated_registry_keeps_every_build_by_digest(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "sim-images.json")
    first = store.facts("dsv4-a100:devel")
    second = store.rebuild("dsv4-a100:devel", args=["--sim-corrupt-identifiers-pct", "60"])
    assert store.facts("dsv4-a100:devel")["digest"] == second["digest"]
    assert store.facts(first["digest"])["id"] == first["id"]  # the old digest still pulls
    with pytest.raises(ImageStoreError, match="no such image"):
        store.facts("dsv4-a100@sha256:" + "0" * 64)
    path = str(store.path)
    assert (build_of(path, first["digest"]) or {}).get("args") == []
    assert (build_of(path, "dsv4-a100:devel") or {}).get("args") == second["args"]


def test_the_pin_is_kept_with_the_profile_in_force_across_restarts(tmp_path: Path) -> None:
    """``profile.json`` keeps a rollback's image with its profile; a switch without one
    (``serve``) drops it, and a pin never applies to another profile."""
    digest = "dsv4-a100@sha256:" + "1" * 64
    saved = ActiveProfile(tmp_path)
    saved.save("dsv4", PROFILES, digest)
    again = ActiveProfile(tmp_path)  # a fleetd restart reads the same file
    assert again.choose(PROFILES) == "dsv4"
    assert again.pinned_image("dsv4") == digest
    assert again.pinned_image("glm") is None
    again.save("dsv4", PROFILES)
    assert ActiveProfile(tmp_path).pinned_image("dsv4") is None
