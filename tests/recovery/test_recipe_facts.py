"""The recipe's facts are read for a start only: an Xid latches while the model's disk hangs.

The recipe's lint errors are the real lint's (``daemon.engine.preflight.lint_refusals``,
as fleetd's engine service gives them): it reads the model directory's ``config.json``,
lists it and stats every weight file. Here ``config.json`` is a FIFO: opening it blocks
until a writer comes, as a read on a hung NFS mount or a dying disk would. The real
controller (policy, start path, executors) runs over the memory ports and the recording
engine of ``tests.recovery.test_controller``.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from daemon.engine.preflight import lint_refusals
from hwcheck.kernellog.catalogue import XidCatalogue
from hwcheck.kernellog.parser import parse_xid
from hwcheck.model import ClassifiedXid, LostKind, RigSnapshot
from recovery.controller import RecoveryController
from recovery.facts import EngineExit, Trigger
from recovery.settings import RecoverySettings
from recovery.starts import StartAnswer
from serving.recipe.lint_context import RigCards
from serving.recipe.recipe import Recipe, preset_recipe
from serving.runtime.classify import CrashClass
from tests.support.cards import BOOT_AT, make_card
from tests.support.recovery_fakes import Engine, Ports, drain
from tests.support.recovery_ports import standalone_recovery
from tests.support.waiting import wait_until

PRESET = "sim-engine"
WAIT_S = 30.0


@dataclass
class LintingEngine(Engine):
    """An engine whose recipe errors are the real lint's over ``recipe``, counted."""

    recipe: Recipe | None = None
    linting: threading.Event = field(default_factory=threading.Event)
    lints: int = 0

    def recipe_errors(self) -> tuple[str, ...]:
        assert self.recipe is not None
        self.lints += 1
        self.linting.set()
        refusals = lint_refusals(self.recipe, RigCards(count=4))
        return tuple(refusal.message for refusal in refusals)


@dataclass
class Rig:
    controller: RecoveryController
    ports: Ports
    engine: LintingEngine


def model_dir(tmp_path: Path, *, blocking: bool) -> Path:
    """A model directory with one weight shard; ``config.json`` a FIFO when ``blocking``."""
    directory = tmp_path / "model"
    directory.mkdir()
    (directory / "model-00001-of-00001.safetensors").write_bytes(b"\0" * 64)
    config = directory / "config.json"
    if blocking:
        os.mkfifo(config)
    else:
        config.write_text(json.dumps({"num_hidden_layers": 43}))
    return directory


def make_rig(directory: Path) -> Rig:
    ports = Ports(rig_cards=tuple(make_card(i) for i in range(4)))
    controller, _ = standalone_recovery(RecoverySettings(backoff_base_s=5), ports)
    recipe = preset_recipe(PRESET).model_copy(update={"model": str(directory)})
    engine = LintingEngine(recipe=recipe)
    controller.attach_engine(engine)
    return Rig(controller, ports, engine)


@pytest.fixture
def hung_disk(tmp_path: Path) -> Iterator[tuple[Rig, Path]]:
    directory = model_dir(tmp_path, blocking=True)
    rig = make_rig(directory)
    try:
        yield rig, directory / "config.json"
    finally:
        _open_for_a_writer(directory / "config.json")  # never leave a reader hung
        rig.controller.close()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    made = make_rig(model_dir(tmp_path, blocking=False))
    yield made
    made.controller.close()


def xid(number: int, card: int) -> ClassifiedXid:
    event = parse_xid(f"NVRM: Xid (PCI:0000:{card + 1:02x}:00): {number}, pid=7, name=python3")
    assert event is not None
    return ClassifiedXid(event, XidCatalogue().classify(event))


def _open_for_a_writer(fifo: Path) -> bool:
    """Write a config into ``fifo`` if a reader has it open (True); False when none has."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            return False
        raise
    with os.fdopen(fd, "w") as writer:
        writer.write(json.dumps({"num_hidden_layers": 43}))
    return True


@pytest.mark.parametrize("restart", [False, True], ids=["start", "restart"])
def test_an_xid_latches_while_a_start_is_stuck_reading_the_model(
    hung_disk: tuple[Rig, Path], restart: bool
) -> None:
    """A start probes after the disk (and reads the latch again after the probe); a
    restart beside a running engine probes nothing: the latch is read after the disk."""
    rig, fifo = hung_disk
    controller, ports, engine = rig.controller, rig.ports, rig.engine
    engine.running = restart
    answers: list[StartAnswer] = []
    start = threading.Thread(
        target=lambda: answers.append(
            controller.request_start(Trigger.START_REQUEST, "alice", restart)
        ),
        daemon=True,
    )
    start.start()
    assert engine.linting.wait(WAIT_S)
    # The start is stuck in the model's config.json (a reader holds the FIFO open, and
    # nobody writes): the Xid still decides and latches, on its own thread, at once.
    latched = threading.Thread(target=lambda: controller.on_xid(xid(79, 1), 1), daemon=True)
    latched.start()
    wait_until(lambda: ports.latched is not None, WAIT_S, "the Xid's latch, the disk hung")
    latched.join(WAIT_S)
    assert not latched.is_alive()
    assert ports.latched is not None and "Xid 79" in ports.latched.reason
    assert engine.lints == 1 and start.is_alive()  # only the start read the recipe
    # The disk answers: the start decides on the facts after it, the latch among them.
    wait_until(lambda: _open_for_a_writer(fifo), WAIT_S, "the start's reader")
    start.join(WAIT_S)
    (answer,) = answers
    assert not answer.started
    assert [reason.code for reason in answer.refusals] == ["reboot_latch"]
    assert not [call for call in engine.calls if call.startswith(("start", "restart"))]


def test_faults_decide_without_the_recipe_and_starts_read_it(rig: Rig) -> None:
    controller, engine = rig.controller, rig.engine
    engine.running = True
    controller.on_xid(xid(13, 0), 0)  # application class: no latch, no probe (engine runs)
    lost = make_card(2, lost=True, lost_kind=LostKind.GPU_IS_LOST, lost_reason="NVML 15")
    controller.on_snapshot(RigSnapshot(BOOT_AT, 0.0, (make_card(0), lost)))
    controller.on_engine_exit(
        EngineExit(CrashClass.DRIVER_POISONED, 1, None, "engine exited with code 1")
    )
    drain(controller)
    rig.ports.wedged = frozenset({3})
    engine.running = False
    controller.probe("after an Xid", [3])
    drain(controller)
    assert engine.lints == 0  # an Xid, a card fault, a latching exit, a probe: no disk
    assert controller.request_stop(Trigger.STOP_REQUEST, "alice").stopped
    assert engine.lints == 0  # nor a stop
    assert controller.request_start(Trigger.START_REQUEST, "alice").refusals
    assert engine.lints == 1  # a start does (refused here: the latch)
    controller.start_refusals()
    assert engine.lints == 2  # and so does the gate asked before a switch


def test_an_exit_reads_the_recipe_only_to_restart(rig: Rig) -> None:
    controller, engine = rig.controller, rig.engine
    controller.on_engine_exit(EngineExit(CrashClass.UNKNOWN, 1, None, "engine exited"))
    drain(controller)
    assert engine.calls == ["restart_after 5"]
    assert engine.lints == 1  # the restart's gate: a broken recipe is not restarted
