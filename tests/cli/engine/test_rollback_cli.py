"""``fleetctl rollback``'s answers and exit codes against a scripted daemon: a bare process
prints what to run and exits 1 (nothing moved), a build already serving exits 0, an
unknown build 2 and a refusal 4 with fleetd's one line (the live story is in
tests/daemon/engine/test_rollback_e2e.py)."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
import typer

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.engine.rollback import rollback
from daemon.cli.output import Output

BUILD = {"id": 1, "build_key": "a" * 64, "name": "build aaaaaaaa (repo@sha256:111111111111)"}


class ScriptedDaemon:
    """Answers the rollback POST with one document, or raises one client error."""

    def __init__(self, answer: dict[str, Any] | ClientError) -> None:
        self.answer = answer
        self.posts: list[tuple[str, Any]] = []

    def post(self, path: str, body: Any = None) -> dict[str, Any]:
        self.posts.append((path, body))
        if isinstance(self.answer, ClientError):
            raise self.answer
        return self.answer


def run(daemon: ScriptedDaemon, json_mode: bool = False, to: str | None = None) -> int:
    return rollback(Output(json_mode=json_mode), cast(FleetClient, daemon), to, True, 5)


def test_a_bare_process_prints_what_to_run_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    daemon = ScriptedDaemon(
        {
            "accepted": False,
            "manual": True,
            "profile": "glm",
            "build": BUILD,
            "instructions": "profile glm runs a bare process: ... then run: fleetctl serve glm",
        }
    )
    assert run(daemon, to="aaaa") == 1
    assert daemon.posts == [("/api/v1/builds/rollback", {"to": "aaaa", "stop_foreign": False})]
    out = capsys.readouterr().out
    assert out.startswith(f"rollback to {BUILD['name']}: profile glm runs a bare process")
    assert run(daemon, json_mode=True) == 1
    assert json.loads(capsys.readouterr().out)["manual"] is True


def test_a_build_already_serving_is_done(capsys: pytest.CaptureFixture[str]) -> None:
    daemon = ScriptedDaemon(
        {
            "accepted": True,
            "already_active": True,
            "profile": "dsv4",
            "build": BUILD,
            "image": "repo@sha256:" + "1" * 64,
            "serving": {"state": "ready"},
        }
    )
    assert run(daemon) == 0
    assert capsys.readouterr().out.strip() == f"{BUILD['name']} already serving: engine ready"


@pytest.mark.parametrize(
    ("status", "code", "shown"),
    [
        (404, 2, "rollback: no build 'zz' (known: aaaaaaaa)"),
        (409, 4, "rollback refused: no earlier build whose canaries passed"),
        (503, 1, "fleetd is shutting down"),
    ],
)
def test_refusals_exit_like_serve(
    capsys: pytest.CaptureFixture[str], status: int, code: int, shown: str
) -> None:
    message = shown.split(": ", 1)[1] if status != 503 else shown
    daemon = ScriptedDaemon(ClientError(message, status=status))
    with pytest.raises(typer.Exit) as ended:
        run(daemon)
    assert ended.value.exit_code == code
    assert f"fleetctl: {shown}" in capsys.readouterr().err
