"""``fleetctl fleet status`` against live simulated rigs, a dead port and a rig that hangs."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from serving.runtime.states import ServingState
from tests.support.cli import run_fleetctl_here
from tests.support.fleet_rigs import TwoRigs, write_fleet_file
from tests.support.fleetd import free_port
from tests.support.token_peer import Recorder

SERVING_STATES = {state.value for state in ServingState}


@pytest.fixture(scope="module")
def hanging_url() -> Iterator[str]:
    """A port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def dead_url() -> str:
    """A loopback port nothing listens on."""
    return f"http://127.0.0.1:{free_port()}"


def rows_by_rig(document: dict[str, object]) -> dict[str, dict[str, object]]:
    rigs = document["rigs"]
    assert isinstance(rigs, list)
    return {row["rig"]: row for row in rigs}


def test_every_rig_is_one_row_and_the_exit_code_is_the_worst(
    two_rigs: TwoRigs, hanging_url: str, tmp_path: Path
) -> None:
    fleet = write_fleet_file(
        tmp_path / "rigs.toml",
        {
            "alpha": two_rigs.healthy.url,
            "bravo": two_rigs.xid.url,
            "gone": dead_url(),
            "hung": hanging_url,
        },
    )
    started = time.monotonic()
    # 3 s: the live rigs answer well within it even on a loaded 2-core machine.
    result = run_fleetctl_here("fleet", "status", "--fleet", str(fleet), "--timeout", "3", "--json")
    elapsed_s = time.monotonic() - started

    assert result.returncode == 2, result.stderr  # critical outranks the rigs with no answer
    document = json.loads(result.stdout)
    assert document["overall"] == "critical"
    rows = rows_by_rig(document)
    assert list(rows) == ["alpha", "bravo", "gone", "hung"]  # the fleet file's order

    alpha, bravo = rows["alpha"], rows["bravo"]
    assert (alpha["overall"], alpha["cards_ok"], alpha["cards_total"]) == ("ok", 4, 4)
    assert alpha["engine_state"] in SERVING_STATES
    assert alpha["reboot_required"] is False and alpha["error"] is None
    assert alpha["status"]["cards"][0]["index"] == 0  # the rig's whole status document
    assert (bravo["overall"], bravo["cards_ok"], bravo["cards_total"]) == ("critical", 3, 4)
    assert alpha["detail"] == ""
    # Why bravo is critical: its latch when the Xid set it, else the critical check itself.
    why = "reboot required: " if bravo["reboot_required"] else "xid_since_boot: "
    assert str(bravo["detail"]).startswith(why), bravo["detail"]

    assert rows["gone"]["overall"] == "unknown"
    assert "cannot reach fleetd" in str(rows["gone"]["error"])
    assert rows["hung"]["overall"] == "unknown"
    assert rows["hung"]["error"] == f"no answer from {hanging_url} within 3 s"
    # The hung rig costs one timeout, not the command: rigs are asked concurrently.
    assert elapsed_s < 10, f"fleet status took {elapsed_s:.1f} s with a 3 s timeout"


def test_an_unreachable_rig_makes_the_fleet_unknown_without_failing(
    two_rigs: TwoRigs, tmp_path: Path
) -> None:
    gone = dead_url()
    fleet = write_fleet_file(tmp_path / "rigs.toml", {"alpha": two_rigs.healthy.url, "gone": gone})
    result = run_fleetctl_here("fleet", "status", "--fleet", str(fleet))
    assert result.returncode == 3, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    alpha = next(line for line in lines if line.startswith("alpha "))
    assert " ok " in alpha and " 4/4 " in alpha
    gone_row = next(line for line in lines if line.startswith("gone "))
    assert " unknown " in gone_row and f"cannot reach fleetd at {gone}" in gone_row
    assert lines[-1] == "fleet: UNKNOWN (2 rigs: 1 unknown, 1 ok)"


def test_a_healthy_fleet_exits_0_and_json_may_come_first(two_rigs: TwoRigs, tmp_path: Path) -> None:
    fleet = write_fleet_file(tmp_path / "rigs.toml", {"alpha": two_rigs.healthy.url})
    result = run_fleetctl_here("--json", "--fleet", str(fleet), "fleet", "status")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["overall"] == "ok"


def test_rig_picks_one_rig_of_the_fleet_file(two_rigs: TwoRigs, tmp_path: Path) -> None:
    fleet = write_fleet_file(
        tmp_path / "rigs.toml", {"alpha": two_rigs.healthy.url, "bravo": two_rigs.xid.url}
    )
    bravo = run_fleetctl_here("--fleet", str(fleet), "--rig", "bravo", "status", "--json")
    assert bravo.returncode == 2, bravo.stderr
    assert json.loads(bravo.stdout)["overall"] == "critical"
    nosuch = run_fleetctl_here("--fleet", str(fleet), "--rig", "charlie", "status")
    assert nosuch.returncode == 3
    assert nosuch.stderr == f"fleetctl: {fleet}: no rig 'charlie' (known: alpha, bravo)\n"
    typo = run_fleetctl_here("--fleet", str(fleet), "--rig", "bravoo", "status")
    assert typo.returncode == 3
    assert (
        typo.stderr
        == f"fleetctl: {fleet}: no rig 'bravoo' (did you mean 'bravo'? known: alpha, bravo)\n"
    )


# test_token's loopback peer, here always wanting a token (401 until a request has one).
wants_a_token = pytest.mark.parametrize("peer", [True], indirect=True, ids=["token-rig"])


@wants_a_token
def test_a_rig_token_file_is_sent_only_when_the_rig_asks(peer: Recorder, tmp_path: Path) -> None:
    (tmp_path / "rig9.token").write_text("rig9-secret\n")
    url = f"http://127.0.0.1:{peer.server_address[1]}"
    # A relative token_file is read next to the fleet file, wherever fleetctl runs.
    fleet = write_fleet_file(tmp_path / "rigs.toml", {"rig9": url}, rig9="rig9.token")
    result = run_fleetctl_here("fleet", "status", "--fleet", str(fleet), "--json")
    assert result.returncode == 0, result.stdout
    assert peer.seen == [("GET", None), ("GET", "Bearer rig9-secret")]


@wants_a_token
def test_a_rig_asking_for_a_token_it_was_not_given_says_where_to_put_one(
    peer: Recorder, tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{peer.server_address[1]}"
    fleet = write_fleet_file(tmp_path / "rigs.toml", {"rig9": url})
    no_token = {"FLEETCTL_TOKEN": "", "CMPFLEET_STATE_DIR": str(tmp_path)}
    result = run_fleetctl_here("fleet", "status", "--fleet", str(fleet), "--json", env=no_token)
    assert result.returncode == 3
    row = rows_by_rig(json.loads(result.stdout))["rig9"]
    assert row["error"] == "fleetd wants a token: set rigs.rig9.token_file"
