"""A check is declared once: in ``hwcheck/checks/<id>.py``, as its ``SPEC``.

Every check module is named after its id and registered; every table keyed by a check id
derives from the specs; and no other product module writes a check id as a string
literal (it imports ``CHECK_ID``), except where the same word names something else: a
card field, a config key, a metric, a reading, an error code (and the one view that may
not import the checks). Those are listed below, each with what the word is there, so a
new copy of an id fails here.
"""

from __future__ import annotations

import ast
import functools
import importlib
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import hwcheck.checks
from daemon.alerts.rules import CHECK_TITLES, SKIPPED_CHECKS
from hwcheck.causes import EXPLAINS, TAGS
from hwcheck.check_texts import CHECK_TEXTS
from hwcheck.checks import CHECKS, KNOWN_CHECK_IDS
from hwcheck.checks.spec import CheckSpec, DrawnAt
from recovery.settings import DEFAULT_GATE_CHECKS
from web.routes.checks import checks_document

ROOT = Path(__file__).resolve().parents[3]
PRODUCT = ("daemon", "web", "recovery", "serving", "hwcheck")
# (module, word): what the word names there, other than the check.
HOMONYMS: dict[tuple[str, str], str] = {
    ("daemon/cli/setup/init.py", "card_count"): "the [rig] card_count config key",
    ("hwcheck/sim/scenario.py", "card_count"): "a scenario's card_count field",
    ("daemon/canaries/diag.py", "memtest"): "the diag event's details key",
    ("daemon/canaries/card_diag.py", "card_lost"): "the Conflict error's code",
    ("daemon/bench/service.py", "card_lost"): "the Refused error's code",
    ("daemon/bench/service.py", "temperature"): "the bench's sampling temperature axis",
    ("daemon/bench/report_html.py", "temperature"): "the bench's sampling temperature axis",
    ("daemon/cli/engine/bench_view.py", "temperature"): "the bench's sampling temperature axis",
    ("serving/bench/load.py", "temperature"): "a request's sampling temperature",
    ("daemon/bench/api.py", "memtest"): "the report's memory-test section",
    ("daemon/bench/report_html.py", "memtest"): "the report's memory-test section",
    ("daemon/bench/api.py", "driver_version"): "the report's hardware field",
    ("daemon/bench/report_html.py", "driver_version"): "the report's hardware field",
    ("daemon/bench/wiring.py", "driver_version"): "the snapshot's field",
    ("daemon/rig/passport.py", "memtest"): "the diag event's details key and kind",
    ("hwcheck/sim/scenario_host.py", "cuda_probe"): "a scenario's cuda_probe field",
    ("hwcheck/nvml/calls.py", "driver_version"): "the NVML call's name",
    ("daemon/evidence/boot_watch.py", "driver_version"): "the boot fingerprint's field",
    ("daemon/evidence/wiring.py", "driver_version"): "the boot fingerprint's field",
    ("serving/evidence/kvpool.py", "driver_version"): "the boot fingerprint's field",
    ("hwcheck/sim/scenario.py", "driver_version"): "a scenario's driver_version field",
    ("recovery/actions.py", "foreign_gpu_processes"): "RefusalCode's value",
    ("recovery/actions.py", "reboot_command"): "RefusalCode's value",
    ("daemon/rig/readings.py", "kernel_log"): "the reading's name",
    ("daemon/rig/readings.py", "store"): "the reading's name",
    ("daemon/rig/readings.py", "memtest"): "the reading's name",
    ("daemon/cli/app.py", "memtest"): "the fleetctl diag memtest command",
    ("hwcheck/memtest/results.py", "memtest"): "a thread name prefix",
    ("hwcheck/nvml/backend.py", "nvml"): "the backend's name",
    ("hwcheck/hostfacts/document.py", "p2p"): "the host facts' p2p field",
    ("hwcheck/sim/scenario_hostfacts.py", "p2p"): "a scenario's p2p field",
    ("hwcheck/report.py", "persistence_mode"): "the card document's field",
    ("hwcheck/report.py", "xid_since_boot"): "the card document's field",
    ("hwcheck/nvml/cards.py", "persistence_mode"): "the card snapshot's field",
    ("hwcheck/sim/scenario.py", "persistence_mode"): "a scenario's field",
    ("daemon/ports/reboot.py", "reboot_command"): "the [recovery] reboot_command config key",
    ("recovery/settings.py", "reboot_command"): "the [recovery] reboot_command config key",
    ("daemon/config.py", "store"): "the [store] config section",
    ("daemon/config_secrets.py", "store"): "the [store] config section",
    ("daemon/rig/history.py", "store"): "the history's source",
    ("serving/sim/core.py", "temperature"): "the sampling parameter",
    ("serving/canary/toolcall.py", "temperature"): "the sampling parameter",
    ("serving/canary/recall.py", "temperature"): "the sampling parameter",
    ("serving/canary/loop.py", "temperature"): "the sampling parameter",
    ("serving/canary/suite.py", "temperature"): "the sampling parameter",
    ("serving/canary/throughput.py", "temperature"): "the sampling parameter",
    ("serving/canary/deep.py", "temperature"): "the sampling parameter",
    ("serving/canary/determinism.py", "temperature"): "the sampling parameter",
    ("serving/canary/reasoning.py", "temperature"): "the sampling parameter",
    ("hwcheck/model.py", "temperature"): "the clock event reason's word",
    ("hwcheck/nvml/calls.py", "temperature"): "the NVML call's name",
    ("web/metrics_cards.py", "vbios"): "the info metric's label",
    ("web/metrics_cards.py", "vram_unlocked"): "the cmpfleet_gpu_vram_unlocked metric and field",
    ("daemon/cli/views/rigview.py", "xid_since_boot"): "the card document's field",
    # The status into a pipe loads no library (tests/cli/test_startup.py): it reads the
    # check id from the status document without importing the checks.
    ("daemon/cli/views/rigview.py", "vram_unlocked"): "the status document's check id",
    ("daemon/cli/fleet/top.py", "xid_since_boot"): "the card document's field",
}
DASHBOARD = ROOT / "web" / "dashboard"
# (dashboard file, word): what the word names there, other than the check.
JS_HOMONYMS: dict[tuple[str, str], str] = {
    ("host.js", "bar1"): "the Host table's BAR1 column class",
    ("render.js", "temperature"): "the tile's temperature metric name (data-metric)",
}


def check_modules() -> Iterator[str]:
    for info in pkgutil.iter_modules(hwcheck.checks.__path__):
        module = importlib.import_module(f"hwcheck.checks.{info.name}")
        if hasattr(module, "CHECK_ID"):
            yield info.name


def test_each_check_module_is_named_after_its_id_and_registered() -> None:
    registered = {spec.id: spec for spec in CHECKS}
    names = list(check_modules())
    assert sorted(names) == sorted(registered)
    for name in names:
        module = importlib.import_module(f"hwcheck.checks.{name}")
        assert name == module.CHECK_ID
        assert isinstance(module.SPEC, CheckSpec) and module.SPEC is registered[name]
        assert module.SPEC.run is module.check


def test_every_table_keyed_by_a_check_id_derives_from_the_specs() -> None:
    assert list(CHECK_TEXTS) == [spec.id for spec in CHECKS]
    assert all(CHECK_TEXTS[s.id] is s.text and s.title and s.meaning and s.remedy for s in CHECKS)
    assert {s.id: (s.alert.name, s.alert.title) for s in CHECKS if s.alert} == CHECK_TITLES
    assert {s.id for s in CHECKS if s.alert is None} == SKIPPED_CHECKS
    assert {s.id: s.tag for s in CHECKS if s.tag} == TAGS
    assert {s.id: s.explains for s in CHECKS if s.explains} == EXPLAINS
    assert set(DEFAULT_GATE_CHECKS) == {s.id for s in CHECKS if s.gate}
    for spec in CHECKS:
        assert spec.explains <= KNOWN_CHECK_IDS - {spec.id}
    answer = checks_document().checks
    assert [(c.id, c.gate_default, c.host_panel, c.drawn_at) for c in answer] == [
        (s.id, s.gate, s.host_panel, s.drawn_at) for s in CHECKS
    ]


@functools.cache
def dashboard_literals() -> dict[str, frozenset[str]]:
    """Each dashboard script's quoted words, comments left out (no parser: ids are words)."""
    comment = re.compile(r"(^|\s)//.*$", re.MULTILINE)
    quoted = re.compile(r"([\"'`])([A-Za-z0-9_]+)\1")
    return {
        path.name: frozenset(m[1] for m in quoted.findall(comment.sub("", path.read_text())))
        for path in sorted(DASHBOARD.glob("*.js"))
        if not path.name.startswith("uPlot")
    }


@pytest.mark.parametrize("check_id", sorted(KNOWN_CHECK_IDS))
def test_the_dashboard_writes_no_check_id(check_id: str) -> None:
    found = {name for name, words in dashboard_literals().items() if check_id in words}
    allowed = {name for (name, word) in JS_HOMONYMS if word == check_id}
    assert found - allowed == set(), f"{check_id} written in the dashboard: ask GET /api/v1/checks"
    assert allowed <= found, "a JS_HOMONYMS row that no longer holds: remove it"


@pytest.mark.parametrize("place", list(DrawnAt))
def test_each_dashboard_place_shows_one_check_and_the_dashboard_draws_it(place: DrawnAt) -> None:
    assert [s.id for s in CHECKS if s.drawn_at is place] != [], f"no check is drawn at {place}"
    assert len([s for s in CHECKS if s.drawn_at is place]) == 1, f"{place} shows one check"
    drawn = {name for name, words in dashboard_literals().items() if place.value in words}
    assert drawn, f"no dashboard script draws {place.value}: add its place or drop the member"


@functools.cache
def product_literals() -> dict[str, frozenset[str]]:
    """Each product module's string literals (parsed once for every test here)."""
    found: dict[str, frozenset[str]] = {}
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            words = frozenset(
                node.value
                for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.Constant) and isinstance(node.value, str)
            )
            found[path.relative_to(ROOT).as_posix()] = words
    return found


@pytest.mark.parametrize("check_id", sorted(KNOWN_CHECK_IDS))
def test_a_check_id_is_a_string_literal_in_its_own_module_only(check_id: str) -> None:
    own = f"hwcheck/checks/{check_id}.py"
    found = {name for name, words in product_literals().items() if check_id in words} - {own}
    allowed = {module for (module, word) in HOMONYMS if word == check_id}
    assert found - allowed == set(), f"{check_id} written outside {own}: import its CHECK_ID"
    assert allowed <= found, "a HOMONYMS row that no longer holds: remove it"


def test_power_brake_is_written_in_its_own_module_only() -> None:
    found = [name for name, words in product_literals().items() if "power_brake" in words]
    assert found == ["hwcheck/checks/power_brake.py"]
