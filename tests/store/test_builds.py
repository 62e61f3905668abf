"""Engine builds in the store: one row per set of facts, verdicts per build, first bad time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from daemon.canaries.builds_view import builds_document
from daemon.store import Store
from serving.runtime.provenance import BuildFacts

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def facts(digest: str) -> dict[str, object]:
    return BuildFacts("sha256:r", "img:tag", f"sha256:id{digest}", f"img@sha256:{digest}", "0.11",
                      {"p": digest}).as_dict()  # fmt: skip


def result(name: str, outcome: str, figure: float, build: int, at: datetime) -> dict[str, object]:
    return {"name": name, "result": outcome, "figure": figure, "unit": "ratio", "ts": at,
            "build_id": build, "details": {}}  # fmt: skip


def test_the_same_facts_are_one_build_and_a_rebuild_another(store: Store) -> None:
    first = store.record_build(facts("aa"), T0)
    again = store.record_build(facts("aa"), T0 + timedelta(hours=1))
    assert again.id == first.id and again.first_seen == T0
    assert again.last_seen == T0 + timedelta(hours=1)
    rebuilt = store.record_build(facts("bb"), T0 + timedelta(days=2))
    assert rebuilt.id != first.id
    store.touch_build(first.id, T0 + timedelta(days=1))
    assert [b.id for b in store.list_builds()] == [rebuilt.id, first.id]
    launch = store.record_launch(["vllm"], {}, "sha256:r", T0)
    store.set_launch_build(launch, rebuilt.id)
    row = store.get_launch(launch)
    assert row is not None and row.build_id == rebuilt.id


def test_verdicts_per_build_and_the_regression_document(store: Store) -> None:
    a = store.record_build(facts("aa"), T0)
    b = store.record_build(facts("bb"), T0 + timedelta(days=2))
    store.record_canary_results([result("copy_fidelity", "pass", 1.0, a.id, T0)])
    store.record_canary_results(
        [
            result("copy_fidelity", "fail", 0.5, b.id, T0 + timedelta(days=2)),
            result("copy_fidelity", "skipped", 0.0, b.id, T0 + timedelta(days=2, hours=1)),
            result("copy_fidelity", "fail", 0.4, b.id, T0 + timedelta(days=3)),
        ]
    )
    verdicts = {(v.build_id, v.name): v for v in store.build_verdicts([a.id, b.id])}
    newest = verdicts[(b.id, "copy_fidelity")]
    assert (newest.result, newest.figure) == ("fail", 0.4)  # skipped judges nothing
    assert newest.first_bad_ts == T0 + timedelta(days=2)
    assert verdicts[(a.id, "copy_fidelity")].first_bad_ts is None
    document = builds_document(store, current_id=b.id)
    assert [(x["id"], x["current"]) for x in document["builds"]] == [(b.id, True), (a.id, False)]
    assert document["builds"][0]["canaries"]["copy_fidelity"]["result"] == "fail"
    (regression,) = document["regressions"]
    assert regression["text"] == (
        f"copy_fidelity: 100% on {document['builds'][1]['name']}, 40% on "
        f"{document['builds'][0]['name']} since {(T0 + timedelta(days=2)).isoformat()}"
    )
