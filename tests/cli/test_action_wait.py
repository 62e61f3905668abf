"""How ``start``/``restart``/``stop`` decide the engine got there: against a scripted daemon.

The states come from a fake of the one thing the wait reads (fleetd's status, as the
client returns it), so a start or restart that is over before the first poll, the case a
real warm engine hits, is shown exactly; the end-to-end runs are in test_contract_surface.
"""

from __future__ import annotations

import time
from typing import Any, cast

import pytest
import typer

from daemon.cli.client import FleetClient
from daemon.cli.engine.serving import wait_for
from daemon.cli.output import Output


class ScriptedDaemon:
    """Answers ``status`` with the next serving block of a script (the last one repeats)."""

    def __init__(self, *blocks: dict[str, Any]) -> None:
        self.blocks = list(blocks)
        self.reads = 0

    def status(self, with_log_text: bool = False) -> dict[str, Any]:
        self.reads += 1
        block = self.blocks.pop(0) if len(self.blocks) > 1 else self.blocks[0]
        return {"serving": block}


def serving(state: str, since: str, **extra: Any) -> dict[str, Any]:
    return {"state": state, "since": since, "pid": 10, "reason": None, **extra}


def as_client(daemon: ScriptedDaemon) -> FleetClient:
    """The wait reads only ``status`` of the client."""
    return cast(FleetClient, daemon)


BEFORE = "2026-12-04T10:00:00.000001+00:00"
AFTER = "2026-12-04T10:00:01.500000+00:00"


@pytest.mark.parametrize("action", ["start", "restart"])
def test_a_ready_entered_after_the_request_is_done_even_when_no_poll_saw_the_way(
    action: str,
) -> None:
    daemon = ScriptedDaemon(serving("ready", AFTER))
    done = wait_for(
        Output(json_mode=True),
        as_client(daemon),
        action,
        5,
        sleep=lambda _s: None,
        since_before=BEFORE,
    )
    assert done["state"] == "ready"
    assert daemon.reads == 1


def test_the_ready_from_before_the_request_is_not_taken_for_the_restarts() -> None:
    daemon = ScriptedDaemon(
        serving("ready", BEFORE), serving("stopping", AFTER), serving("ready", AFTER)
    )
    done = wait_for(
        Output(json_mode=True),
        as_client(daemon),
        "restart",
        5,
        sleep=lambda _s: None,
        since_before=BEFORE,
    )
    assert done["state"] == "ready"
    assert daemon.reads == 3


def test_a_start_that_failed_before_the_first_poll_is_a_failure_not_a_wait(
    capsys: pytest.CaptureFixture[str],
) -> None:
    daemon = ScriptedDaemon(serving("stopped", AFTER, reason="engine exited with code 1"))
    with pytest.raises(typer.Exit) as ended:
        wait_for(
            Output(json_mode=False),
            as_client(daemon),
            "start",
            5,
            sleep=lambda _s: None,
            since_before=BEFORE,
        )
    assert ended.value.exit_code == 1
    assert "engine stopped: engine exited with code 1" in capsys.readouterr().err


def test_without_news_it_still_times_out_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    daemon = ScriptedDaemon(serving("ready", BEFORE))
    with pytest.raises(typer.Exit):
        wait_for(
            Output(json_mode=False),
            as_client(daemon),
            "restart",
            0.01,
            sleep=lambda _s: time.sleep(0.005),
            since_before=BEFORE,
        )
    assert "engine still ready after 0 s" in capsys.readouterr().err
