"""docs/architecture.md's "where does a new X go" recipes stay true.

Each recipe below is a list of (file, symbol) pairs it names: the recipe must still name
both, the file must exist, and the file must still hold the symbol (a table, a function,
a class). A rename that leaves a recipe pointing at nothing fails here, not a newcomer.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
RECIPES: dict[str, list[tuple[str, str]]] = {
    "A new health check": [
        ("hwcheck/checks/spec.py", "CheckSpec"),
        ("hwcheck/checks/base.py", "CheckInput"),
        ("hwcheck/checks/registry.py", "HARDWARE_CHECKS"),
        ("hwcheck/check_texts.py", "CHECK_TEXTS"),
        ("daemon/alerts/rules.py", "CHECK_TITLES"),
        ("hwcheck/causes.py", "EXPLAINS"),
        ("hwcheck/causes.py", "TAGS"),
        ("recovery/settings.py", "DEFAULT_GATE_CHECKS"),
        ("web/routes/checks.py", "/api/v1/checks"),
        ("daemon/examples/fleet.toml", "gate_checks"),
    ],
    "A new recovery action": [
        ("recovery/decisions.py", "Decision"),
        ("recovery/policy.py", "decide"),
        ("recovery/actions.py", "ACTIONS"),
        ("recovery/actions.py", "RefusalCode"),
        ("recovery/actions.py", "REFUSALS"),
        ("recovery/executors.py", "describe"),
        ("recovery/executors.py", "carry_out"),
        ("recovery/ports.py", "EnginePort"),
    ],
    "A new card reading": [
        ("hwcheck/model.py", "GpuSnapshot"),
        ("hwcheck/readings.py", "READINGS"),
        ("hwcheck/readings.py", "Reading"),
        ("hwcheck/sim/backend.py", "_LOAD_FIELDS"),
        ("hwcheck/report.py", "card_document"),
        ("web/models.py", "CardDocument"),
        ("daemon/store/models.py", "Sample"),
        ("daemon/store/samples.py", "SAMPLE_COLUMNS"),
        ("daemon/store/rollups.py", "METRICS"),
        ("daemon/store/rollups.py", "ChartPoint"),
        ("daemon/store/models.py", "Rollup1m"),
        ("daemon/rig/history.py", "CARD_METRICS"),
        ("web/metrics_cards.py", "CardsCollector"),
        ("web/metrics_model.py", "CardMetrics"),
        ("serving/runtime/engine_metrics.py", "EngineFigures"),
        ("serving/runtime/engine_figures.py", "FIGURES"),
    ],
    "A new /metrics family": [
        ("web/metrics_cards.py", "CardsCollector"),
        ("web/metrics_rig.py", "RigCollector"),
        ("web/metrics_engine.py", "EngineCollector"),
        ("web/metrics_guard.py", "GuardCollector"),
        ("web/metrics_model.py", "RigState"),
        ("serving/guard/counters.py", "GUARD_COUNTERS"),
        ("daemon/runtime.py", "_metrics_collectors"),
        ("tests/support/metrics.py", "every_collector"),
        ("web/metrics_rig.py", "poll_duration_histogram"),
    ],
    "A new store table and its migration": [
        ("daemon/store/models.py", "Base"),
        ("daemon/store/migrations.py", "MIGRATIONS"),
        ("daemon/store/migrations.py", "Migration"),
        ("daemon/store/xids.py", "XidQueries"),
        ("daemon/store/store.py", "Store"),
    ],
    "A new guard behaviour": [
        ("serving/guard/app.py", "GuardApp"),
        ("serving/guard/settings.py", "GuardSettings"),
        ("serving/guard/counters.py", "GuardCounter"),
        ("serving/guard/counters.py", "GUARD_COUNTERS"),
    ],
    "A new reaction to another wing's news": [
        ("daemon/rig/poller.py", "add_polled_listener"),
        ("daemon/rig/poller.py", "Rejudge"),
        ("daemon/ports/parts.py", "add_change_listener"),
        ("daemon/rig/xidpath.py", "add_health_listener"),
        ("daemon/rig/judge.py", "latch_changed"),
        ("daemon/alerts/engine.py", "latch_changed"),
        ("daemon/rig/kernellog_health.py", "put_kernel_log_result"),
        ("daemon/service_loop.py", "StatusLine"),
        ("daemon/ports/new_boot.py", "NewBoot"),
        ("daemon/runtime.py", "Daemon"),
    ],
    "A new API route": [
        ("web/app.py", "create_app"),
        ("web/services.py", "WebServices"),
        ("web/routes/canaries.py", "CanaryControl"),
    ],
    "A new recipe lint rule": [
        ("serving/recipe/rules_generic.py", "GENERIC_RULES"),
        ("serving/recipe/rules_generic.py", "GENERIC_RULE_IDS"),
        ("serving/recipe/families.py", "Family"),
        ("serving/recipe/rulesets.py", "RULE_SETS"),
        ("serving/recipe/lint.py", "HOST_RULE_IDS"),
    ],
    "A new alert rule": [
        ("daemon/alerts/rules.py", "event_signals"),
        ("daemon/alerts/inhibit.py", "INHIBITS"),
    ],
    "A new scenario": [
        ("hwcheck/sim/scenario.py", "_ACTIONS"),
    ],
    "A new fleetctl command": [
        ("daemon/cli/output.py", "Output"),
        ("daemon/cli/client.py", "FleetClient"),
        ("daemon/cli/views/listview.py", "ListColumn"),
    ],
}


def recipe_text(title: str) -> str:
    """The recipe's section: from its heading to the next heading."""
    text = ARCHITECTURE.read_text()
    match = re.search(rf"^### {re.escape(title)}\n(.*?)(?=^##)", text, re.M | re.S)
    assert match, f"docs/architecture.md has no recipe {title!r}"
    return match.group(1)


def test_every_recipe_of_the_docs_is_checked_here() -> None:
    text = ARCHITECTURE.read_text()
    section = text.split("## Where does a new X go", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"^### (.+)$", section, re.M)) == set(RECIPES)


@pytest.mark.parametrize("title", sorted(RECIPES))
def test_each_named_file_still_holds_the_named_symbol(title: str) -> None:
    text = recipe_text(title)
    for path, symbol in RECIPES[title]:
        assert path in text or path.rsplit("/", 1)[-1] in text, f"{title}: names {path}"
        assert symbol in text, f"{title}: names {symbol}"
        source = (ROOT / path).read_text()
        assert re.search(rf"(?<![\w.]){re.escape(symbol)}(?!\w)", source), (
            f"{title}: {path} no longer holds {symbol}"
        )
