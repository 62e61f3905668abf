"""``serve NAME`` checks before it stops (issue 33), with fakes at the engine's edges.

The switcher is real; the engine it drives records every move in order. What holds
NAME's port or cards refuses at once with the engine still serving; with
``--stop-foreign`` the foreign containers are stopped before the running engine, and one
that will not stop leaves that engine serving.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import pytest

from daemon.engine.switch import ProfileSwitcher, SwitchedEngine
from daemon.rig.monitor import RigMonitor
from hwcheck.model import RigProfile
from recovery.decisions import Reason, Start, Stop
from recovery.executors import Outcome
from recovery.facts import Trigger
from recovery.starts import StartAnswer
from recovery.stops import StopAnswer
from serving.errors import Refused
from serving.runtime.states import ServingState
from tests.support.waiting import wait_until

PORT_HELD = Reason("port_in_use", "port 8200 on 127.0.0.1 is taken: pid 777 (nc -l) holds it")


@dataclass
class FakeSupervisor:
    moves: list[str]
    running: bool = True

    def status(self) -> Any:
        return SimpleNamespace(drift=None, state=ServingState.READY, pid=4321)

    def stop(self) -> None:
        """Recovery's stop path carried out (``FakeStarts.request_stop``)."""
        self.moves.append("stop engine a")
        self.running = False


@dataclass
class FakeEngine:
    """The engine service as the switcher drives it: every move noted, in order."""

    held: tuple[Reason, ...] = ()
    container_stops: bool = True
    moves: list[str] = field(default_factory=list)
    profile: str = "a"
    pinned_image: str | None = None

    def __post_init__(self) -> None:
        self.supervisor = FakeSupervisor(self.moves)
        recipes = {"a": SimpleNamespace(recipe="recipe-a"), "b": SimpleNamespace(recipe="recipe-b")}
        self.profiles = SimpleNamespace(get=recipes.__getitem__, matching=lambda _digest: [])

    def state(self) -> tuple[ServingState, int | None]:
        return (
            (ServingState.READY, 4321) if self.supervisor.running else (ServingState.STOPPED, None)
        )

    def recipe_cards(self, recipe: object) -> frozenset[int] | None:
        return None

    def lint_errors(self, recipe: object) -> tuple[str, ...]:
        return ()

    def held_for(self, recipe: object, stop_foreign: bool) -> tuple[Reason, ...]:
        self.moves.append(f"scan {recipe} (stop_foreign={stop_foreign})")
        return () if stop_foreign else self.held

    def refused(self, action: str, refusals: tuple[Reason, ...], actor: str) -> Refused:
        return Refused("; ".join(reason.line for reason in refusals), refusals[0].code)

    def stop_foreign(self, actor: str, recipe: object = None) -> list[dict[str, Any]]:
        self.moves.append(f"stop foreign holders of {recipe}")
        return [
            {
                "container": "squatter",
                "image": "nginx:1",
                "runtime": "docker",
                "commands": [
                    ["docker", "kill", "--signal", "SIGINT", "squatter"],
                    ["docker", "kill", "--signal", "SIGTERM", "squatter"],
                ],
                "detail": "still running after SIGINT then SIGTERM",
                "stopped": self.container_stops,
            }
        ]

    def activate(self, name: str, actor: str, image: str | None = None) -> str:
        self.moves.append(f"activate {name}" + (f" @ {image}" if image else ""))
        previous, self.profile, self.pinned_image = self.profile, name, image
        return previous

    def status_document(self) -> dict[str, Any]:
        return {"state": "ready" if self.supervisor.running else "stopped"}


class FakeStarts:
    """Recovery's start and stop paths: the gate refuses what the engine says holds the recipe."""

    def __init__(self, moves: list[str], supervisor: FakeSupervisor) -> None:
        self.moves = moves
        self.supervisor = supervisor

    def request_stop(self, trigger: Trigger, actor: str, reason: str = "") -> StopAnswer:
        self.supervisor.stop()
        return StopAnswer(Stop(reason), Outcome(True, "engine stopped"))

    def start_refusals(
        self,
        recipe_cards: frozenset[int] | None = None,
        recipe_errors: tuple[str, ...] | None = None,
        held_elsewhere: tuple[Reason, ...] = (),
    ) -> tuple[Reason, ...]:
        return held_elsewhere

    def request_start(self, trigger: Trigger, actor: str, restart: bool) -> StartAnswer:
        self.moves.append("start b")
        return StartAnswer(Start("a person's serve"), Outcome(True, "started"))


def switcher(engine: FakeEngine) -> ProfileSwitcher:
    return ProfileSwitcher(
        cast(SwitchedEngine, engine),
        cast(RigMonitor, None),
        RigProfile(),
        FakeStarts(engine.moves, engine.supervisor),
    )


def finished(switch: ProfileSwitcher) -> dict[str, Any]:
    wait_until(
        lambda: (switch.progress() or {}).get("ended_at") is not None, 10, "the switch's end"
    )
    return switch.progress() or {}


def test_a_held_port_refuses_before_anything_stops() -> None:
    engine = FakeEngine(held=(PORT_HELD,))
    with pytest.raises(Refused) as refused:
        switcher(engine).switch("b", "operator")
    assert "pid 777 (nc -l) holds it" in refused.value.message
    assert engine.moves == ["scan recipe-b (stop_foreign=False)"]  # nothing stopped
    assert engine.supervisor.running and engine.profile == "a"


def test_stop_foreign_stops_the_holders_before_the_engine() -> None:
    engine = FakeEngine(held=(PORT_HELD,))
    switch = switcher(engine)
    switch.switch("b", "operator", stop_foreign=True)
    assert finished(switch)["phase"] == "done"
    assert engine.moves == [
        "scan recipe-b (stop_foreign=True)",
        "stop foreign holders of recipe-b",
        "stop engine a",
        "activate b",
        "start b",
    ]


def test_a_holder_that_will_not_stop_leaves_the_engine_serving() -> None:
    engine = FakeEngine(held=(PORT_HELD,), container_stops=False)
    switch = switcher(engine)
    switch.switch("b", "operator", stop_foreign=True)
    progress = finished(switch)
    assert progress["phase"] == "failed"
    assert "foreign container not stopped: container squatter" in progress["message"]
    assert "stop engine a" not in engine.moves and engine.supervisor.running
    assert engine.profile == "a"


def test_a_pinned_image_moves_the_profile_in_force_and_serve_ends_the_pin() -> None:
    """A rollback is a switch to the profile in force with an image pinned; serving the
    same profile without one is a move too (back to its recipe's tag), not 'already'."""
    engine = FakeEngine()
    switch = switcher(engine)
    digest = "dsv4-a100@sha256:" + "a" * 64
    answer = switch.switch("a", "operator", image=digest)
    assert answer["in_progress"] and answer["switch"]["image"] == digest
    assert finished(switch)["phase"] == "done"
    assert engine.moves[-3:] == ["stop engine a", f"activate a @ {digest}", "start b"]
    engine.supervisor.running = True
    assert switch.switch("a", "operator", image=digest)["already_active"] is True
    back = switch.switch("a", "operator")
    assert back["in_progress"] and back["switch"]["previous_image"] == digest
    assert finished(switch)["phase"] == "done" and engine.pinned_image is None
