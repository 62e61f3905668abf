"""The Grafana dashboard and the rules speak the daemon's language: every name they use is
one a live fleetd exposes, and the dashboard has the shape the README promises."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support import loopback
from tests.support.deploy import RULES, dashboard, dashboard_queries, metric_names
from tests.support.fleet_rigs import TwoRigs
from web.metrics_guard import guard_metrics
from web.metrics_model import GuardMetrics

PROMETHEUS_OWN = {"up"}


@pytest.fixture(scope="module")
def exposed(two_rigs: TwoRigs) -> set[str]:
    """Every sample name of both rigs' live /metrics (the Xid rig adds the Xid counter)."""
    names: set[str] = set()
    for daemon in (two_rigs.healthy, two_rigs.xid):
        text = loopback.get(daemon.url + "/metrics", timeout=10).text
        for family in text_string_to_metric_families(text):
            names.add(family.name)  # HELP/TYPE: a gauge with no reading yet has no sample
            names.update(sample.name for sample in family.samples)
    return names


def panels(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in document["panels"]:
        yield panel
        yield from panel.get("panels", [])


def test_the_dashboard_uses_only_names_fleetd_exposes(exposed: set[str]) -> None:
    used: set[str] = set()
    for query in dashboard_queries(dashboard()):
        used |= metric_names(query)
    assert used, "no cmpfleet_ metric in the dashboard"
    assert used - exposed == set()


def guard_names() -> set[str]:
    """The traffic guard's sample names: exposed only by a fleetd with ``[guard]`` configured
    (these two rigs run none; ``tests/guard`` scrapes one that does)."""
    guard = GuardMetrics(
        up=True,
        restarts=0,
        counters={},
        signs={"dsml_markup": 1.0},
        tokens={("laptop", "prompt"): 1.0},
        sessions=1,
        deepest_session_tokens=1,
    )
    names: set[str] = set()
    for family in guard_metrics(guard):
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
    return names


def test_the_rules_use_only_names_fleetd_exposes(exposed: set[str]) -> None:
    used = metric_names(RULES.read_text())
    assert used - exposed - guard_names() == set()
    assert used & guard_names()  # the guard's rules are checked against its real names


def test_every_card_metric_has_a_panel_and_tokens_per_second_too(exposed: set[str]) -> None:
    used: set[str] = set()
    for panel in panels(dashboard()):
        for target in panel.get("targets", []):
            used |= metric_names(target["expr"])
    card_metrics = {  # a counter's family name (without _total) is not a series of its own
        name
        for name in exposed
        if name.startswith("cmpfleet_gpu_") and f"{name}_total" not in exposed
    }
    assert card_metrics - used == set()
    assert "cmpfleet_serving_generation_tokens_per_second" in used


def test_one_row_per_rig_and_xid_annotations() -> None:
    document = dashboard()
    variables = {v["name"]: v for v in document["templating"]["list"]}
    assert variables["rig"]["includeAll"] and variables["rig"]["multi"]
    rows = [p for p in document["panels"] if p["type"] == "row"]
    assert [r.get("repeat") for r in rows].count("rig") == 1
    # Every panel after the repeated row belongs to one rig: its queries name $rig.
    repeated_at = next(i for i, p in enumerate(document["panels"]) if p.get("repeat") == "rig")
    for panel in document["panels"][repeated_at + 1 :]:
        for target in panel["targets"]:
            assert 'rig=~"$rig"' in target["expr"], (panel["title"], target["expr"])
    annotations = {a["name"]: a for a in document["annotations"]["list"]}
    assert "cmpfleet_gpu_xid_errors_total" in annotations["Xid errors"]["expr"]
    ids = [p["id"] for p in panels(document)]
    assert len(ids) == len(set(ids))
    for panel in panels(document):
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
