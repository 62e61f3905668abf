"""One short answer per fault: a headline and one step everywhere, the long text once.

A real fleetd under ``--simulate healthy`` given the ``xid31`` scenario's Xid 31 once its
simulated engine is ready (recovery stops it when the Xid latches) is read by every surface: the status document holds the Xid 31
explanation exactly once, its events and its log lines carry the headline only, and the
step is worded for the stopped engine. The table's wording per state is a table test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from hwcheck.advice import ACTION_STEPS, ADVICE_STEPS, RigNow
from hwcheck.explain import of_xid
from hwcheck.kernellog.catalogue import XidCatalogue
from hwcheck.model import Advice, XidAction
from tests.support.cli import run_fleetctl_here
from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until

XID31 = XidCatalogue().info(31)
# The xid31 scenario's own Xid 31 (hwcheck/sim/scenarios/xid31.toml).
XID31_MESSAGE = (
    "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_10 faulted @ "
    "0x7fd7_90743000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ"
)
HEADLINE = "Xid 31 (MMU page fault) on card 1"
RUNNING, STOPPED = RigNow(engine_running=True), RigNow(engine_running=False)
LATCHED_STOPPED = RigNow(engine_running=False, latched=True)


def status_of(daemon: Fleetd) -> dict[str, Any]:
    document: dict[str, Any] = daemon.get("/api/v1/status").json()
    return document


def xid_check(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["checks"] if c["id"] == "xid_since_boot" and c["card"] == 1)


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleetd]:
    """The xid31 rig once recovery has latched and stopped the engine (read only below).

    The Xid comes once the engine is ready, not at a time after fleetd's start: on a
    loaded machine a timed Xid came before the autostart, which the latch then refused
    (one more decision, whose reasons were long), so the path under test depended on load.
    """
    tmp = tmp_path_factory.mktemp("one-answer")
    config = tmp / "fleet.toml"
    config.write_text(
        "[serving]\nprobe_interval_s = 0.3\nstop_timeout_s = 5\n[poll]\ninterval_s = 0.5\n"
    )
    daemon = start_fleetd(tmp, tmp / "state", simulate="healthy", config=config)
    try:
        wait_until(lambda: status_of(daemon)["serving"]["state"] == "ready", 90, "the engine")
        xid = {"card": 1, "xid": 31, "message": XID31_MESSAGE}
        assert daemon.post("/api/v1/sim/xid", xid).status_code == 200
        wait_until(lambda: status_of(daemon)["recovery"]["reboot_required"], 90, "the Xid 31 latch")
        wait_until(
            lambda: status_of(daemon)["serving"]["state"] == "stopped", 60, "the engine stopped"
        )
        # The checks are judged at each poll: the next one words the step for the stop.
        wait_until(
            lambda: (
                xid_check(status_of(daemon))["remedy"]
                == ACTION_STEPS[XidAction.REBOOT].text(LATCHED_STOPPED)
            ),
            30,
            "the xid check's step for the stopped engine",
        )
        yield daemon
    finally:
        stop_all([daemon])


def test_the_status_document_holds_the_explanation_exactly_once(rig: Fleetd) -> None:
    status = status_of(rig)
    assert json.dumps(status).count(XID31.explanation) == 1
    assert of_xid(XID31).as_dict() in status["explanations"]
    assert of_xid(XID31).text.startswith(XID31.explanation)
    assert "NVIDIA's resolution: ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT" in of_xid(XID31).text
    assert status["recovery"]["reason"] == HEADLINE
    assert xid_check(status)["message"].endswith("; Xid 31 (MMU page fault)")
    long_reasons = [d["reason"] for d in status["recovery"]["decisions"] if len(d["reason"]) > 80]
    assert long_reasons == []


def test_events_and_log_lines_carry_the_headline_only(rig: Fleetd) -> None:
    rows = rig.get("/api/v1/events?limit=200").json()
    assert any(r["kind"] == "xid" and r["message"] == HEADLINE for r in rows)
    assert sum(HEADLINE in r["message"] for r in rows) >= 3  # the Xid, recovery, the stop
    lead = XID31.explanation.split(": ", 1)[1][:40]  # the text after the title
    assert not [r["message"] for r in rows if lead in r["message"]]
    log = rig.log()
    assert HEADLINE in log
    assert lead not in log


def test_the_step_is_worded_for_the_stopped_engine(rig: Fleetd) -> None:
    status = status_of(rig)
    warm = ADVICE_STEPS[Advice.WARM_REBOOT]
    assert status["recovery"]["advice"] == warm.text(LATCHED_STOPPED) == warm.stopped
    assert warm.stopped != warm.running
    assert "already stopped" in xid_check(status)["remedy"]


def test_status_verbose_shows_the_explanation_once_and_plain_status_names_explain(
    rig: Fleetd,
) -> None:
    plain = run_fleetctl_here("--url", rig.url, "status")
    verbose = run_fleetctl_here("--url", rig.url, "status", "--verbose")
    assert plain.returncode == verbose.returncode == 2
    assert XID31.explanation not in plain.stdout
    assert "fleetctl explain xid 31" in plain.stdout
    assert verbose.stdout.count(XID31.explanation) == 1  # into a pipe: never wrapped


def test_explain_xid_31_prints_the_long_text_without_a_daemon() -> None:
    shown = run_fleetctl_here("--url", "http://127.0.0.1:9", "explain", "xid", "31")
    assert shown.returncode == 0, shown.stderr
    words = " ".join(shown.stdout.split())  # wrapped for reading
    assert XID31.explanation in words
    assert "fleetctl explain advice warm_reboot" in words
    advice = run_fleetctl_here("explain", "advice", "cold_power_cycle")
    assert ADVICE_STEPS[Advice.COLD_POWER_CYCLE].why in " ".join(advice.stdout.split())
    bad = run_fleetctl_here("explain", "xid", "thirty-one")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("step", "differs"),
    [
        (ADVICE_STEPS[Advice.WARM_REBOOT], True),
        (ADVICE_STEPS[Advice.COLD_POWER_CYCLE], True),
        (ACTION_STEPS[XidAction.RESTART_ENGINE], True),
        (ACTION_STEPS[XidAction.INSPECT], False),
        (ACTION_STEPS[XidAction.NONE], False),
    ],
)
def test_the_table_words_a_step_for_the_engine_running_or_stopped(step: Any, differs: bool) -> None:
    assert (step.text(RUNNING) != step.text(STOPPED)) is differs
    assert "stop" not in step.text(STOPPED).replace("already stopped", "")
