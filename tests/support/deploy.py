"""Where the shipped deploy files live, and the names they use (for the fleet tests)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
PROMETHEUS = DEPLOY / "prometheus"
RULES = PROMETHEUS / "cmpfleet.rules.yml"
RULE_TESTS = sorted((PROMETHEUS / "tests").glob("*.yml"))
ALERTMANAGER = DEPLOY / "alertmanager" / "alertmanager.yml"
DASHBOARD = DEPLOY / "grafana" / "cmpfleet-rigs.json"

METRIC_NAME = re.compile(r"\bcmpfleet_[a-z0-9_]+\b")


def alert_names() -> list[str]:
    """Every ``- alert: NAME`` of the shipped rules file."""
    return re.findall(r"^\s*- alert: (\w+)\s*$", RULES.read_text(), flags=re.MULTILINE)


def metric_names(text: str) -> set[str]:
    """Every ``cmpfleet_...`` name used in a PromQL text (rules or dashboard)."""
    return set(METRIC_NAME.findall(text))


def dashboard() -> dict[str, Any]:
    """The shipped Grafana dashboard, parsed."""
    document = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def dashboard_queries(document: dict[str, Any]) -> list[str]:
    """Every PromQL text of the dashboard: panel targets, annotations, variable queries."""
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("expr", "definition") and isinstance(value, str):
                    found.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(document)
    return found


def as_instant_query(expr: str) -> str:
    """A dashboard expression Prometheus can run: every rig, a fixed range."""
    return expr.replace("$rig", ".*").replace("$__rate_interval", "1m")
