"""The state dir: every file fleetd creates there is private (0600, dirs 0700), whatever the umask.

A real fleetd under ``umask 0`` (which would leave files created with default modes
world-writable) runs the simulated rig and engine through a simulated reboot; then every
entry under its state dir is checked.
"""

from __future__ import annotations

import logging
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.startup import prepare_state_dir
from daemon.statedir import StateDir
from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until


@pytest.fixture
def daemons() -> Iterator[list[Fleetd]]:
    started: list[Fleetd] = []
    yield started
    stop_all(started)  # the engine included: it outlives fleetd by design


def _engine_state(daemon: Fleetd) -> str:
    return str(daemon.get("/api/v1/status").json()["serving"]["state"])


def test_every_state_dir_file_is_private_under_umask_0(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    state = tmp_path / "state"
    config = tmp_path / "fleet.toml"
    config.write_text("[serving]\nprobe_interval_s = 0.3\nstop_timeout_s = 5\n")
    daemon = start_fleetd(tmp_path, state, config=config, umask=0)
    daemons.append(daemon)
    wait_until(lambda: _engine_state(daemon) == "ready", 60, "engine ready")
    first_pid = daemon.get("/api/v1/status").json()["serving"]["pid"]
    booted = daemon.post("/api/v1/sim/reboot")
    assert booted.status_code == 200, booted.text
    files = StateDir(state)
    wait_until(files.sim_kernel_log_rotated.exists, 60, "the previous boot's kernel log")

    def new_engine_ready() -> bool:  # the reboot ended the first engine; the bring-up starts one
        serving = daemon.get("/api/v1/status").json()["serving"]
        return bool(serving["state"] == "ready" and serving["pid"] != first_pid)

    wait_until(new_engine_ready, 60, "a new engine ready after the reboot")
    # The simulated image store is written by the build capture, a moment after an engine
    # is ready: on a loaded machine it came before or after the listing below, which did
    # not name it. StateDir names it now; wait for it like the rotated kernel log.
    wait_until(files.sim_images.exists, 60, "the simulated image store")

    # The restart total: written on crash restarts only; latch.json: only while latched;
    # the sweep marker: only while a cap sweep runs; the simulated checkpoint: only for a
    # scenario with ``[engine] checkpoint``.
    expected = set(files.files()) - {
        files.supervisor_state,
        files.latch,
        files.bench_sweep,
        files.sim_checkpoint,
    }
    missing = sorted(str(path) for path in expected if not path.exists())
    assert not missing, f"StateDir names files fleetd never wrote: {missing}"
    assert Path(f"{files.db}-wal").exists(), "the store is expected in WAL mode"
    sqlite_siblings = {f"{files.db.name}-wal", f"{files.db.name}-shm"}
    # The simulated image file is written when a build is captured (a poll after a ready):
    # named, but it may not be there yet.
    named = {path.name for path in files.files()} | sqlite_siblings | {files.sim_images.name}
    # The one writer's temporary of a named file (``.NAME.xxxx.tmp``, renamed into place a
    # moment later: hwcheck.atomic) may be caught in flight; it is that file, and private too.
    in_flight = re.compile(r"\.(?P<name>.+)\.\w+\.tmp")

    def is_named(name: str) -> bool:
        match = in_flight.fullmatch(name)
        return name in named or (match is not None and match["name"] in named)

    unnamed = sorted(path.name for path in state.iterdir() if not is_named(path.name))
    assert not unnamed, f"files in the state dir that StateDir does not name: {unnamed}"
    modes: dict[str, int] = {}
    for path in [state, *state.rglob("*")]:
        try:
            modes[str(path.relative_to(state))] = stat.S_IMODE(path.lstat().st_mode)
        except FileNotFoundError:
            continue  # a temporary renamed into place meanwhile: its target is listed
    wide = {name: oct(mode) for name, mode in modes.items() if mode & 0o077}
    assert not wide, f"readable or writable by others under umask 0: {wide}"
    assert modes["."] == 0o700
    assert modes[files.token.name] == 0o600
    assert modes[files.db.name] == 0o600


def test_a_token_file_others_can_read_is_narrowed_and_kept(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    """A token restored from a backup as 0644: fleetd keeps it, makes it 0600 and says so."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    token = StateDir(state).token
    token.write_text("restored-token\n")
    token.chmod(0o644)
    config = tmp_path / "fleet.toml"
    config.write_text("[serving]\nautostart = false\n")
    daemon = start_fleetd(tmp_path, state, config=config)
    daemons.append(daemon)
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert "mode 0644 (others could read the API token): now 0600" in daemon.log()
    assert daemon.post("/api/v1/events/999999/ack", token="restored-token").status_code == 404


def test_a_state_dir_others_can_enter_is_narrowed_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o755)  # made by hand, or unpacked from a backup with a loose umask
    with caplog.at_level(logging.WARNING, logger="fleetd"):
        prepare_state_dir(state)
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    (warning,) = [record.getMessage() for record in caplog.records]
    assert warning.startswith(f"state dir {state} was mode 0755 (others could read")
    caplog.clear()
    prepare_state_dir(state)  # private already: nothing to say
    assert caplog.records == []
