"""Where the shipped deploy files live, and the names they use (for the fleet tests)."""

from __future__ import annotations

import re
from pathlib import Path

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
PROMETHEUS = DEPLOY / "prometheus"
RULES = PROMETHEUS / "cmpfleet.rules.yml"
RULE_TESTS = sorted((PROMETHEUS / "tests").glob("*.yml"))
DASHBOARD = DEPLOY / "grafana" / "cmpfleet-fleet.json"

METRIC_NAME = re.compile(r"\bcmpfleet_[a-z0-9_]+\b")


def alert_names() -> list[str]:
    """Every ``- alert: NAME`` of the shipped rules file."""
    return re.findall(r"^\s*- alert: (\w+)\s*$", RULES.read_text(), flags=re.MULTILINE)


def metric_names(text: str) -> set[str]:
    """Every ``cmpfleet_...`` name used in a PromQL text (rules or dashboard)."""
    return set(METRIC_NAME.findall(text))
