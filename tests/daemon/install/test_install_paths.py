"""``fleetd install``/``uninstall`` write and remove only what belongs to them (issue 33).

In-process under a temporary ``--root`` (the wheel-based runs are in ``test_install``):
a device node where the unit goes is refused and left as it was; a symbolic link is
written through; a dangling link where a directory goes refuses the install before
anything is written; a state dir reached through a link is narrowed to 0700; uninstall
removes only a unit ``install`` wrote, recognised by its content.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from daemon.install.installer import (
    STATE_DIR_MODE,
    UNIT_NAME,
    InstallError,
    install,
    is_our_unit,
    main,
    uninstall,
    unit_text,
)
from hwcheck.atomic import NotARegularFile
from tests.support.nodes import make_node, snapshot

UNIT = Path("etc/systemd/system") / UNIT_NAME
WANTS = Path("etc/systemd/system/multi-user.target.wants") / UNIT_NAME
CONFIG = Path("etc/cmpfleet/fleet.toml")
STATE = Path("var/lib/cmpfleet")
FLEETD = Path("/opt/cmpfleet/venv/bin/fleetd")


def test_a_device_where_the_unit_goes_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    unit = tmp_path / UNIT
    unit.parent.mkdir(parents=True)
    make_node("char-device", unit)
    before = snapshot(unit)
    with pytest.raises(NotARegularFile, match="a character device"):
        install(tmp_path, FLEETD, dry_run=False)
    assert snapshot(unit) == before
    assert not (tmp_path / CONFIG).exists() and not (tmp_path / STATE).exists()


def test_a_masked_unit_is_refused_with_the_way_out(tmp_path: Path) -> None:
    unit = tmp_path / UNIT
    unit.parent.mkdir(parents=True)
    unit.symlink_to(os.devnull)
    with pytest.raises(InstallError, match=r"is masked .* systemctl unmask fleetd\.service"):
        install(tmp_path, FLEETD, dry_run=False)
    assert os.readlink(unit) == os.devnull


def test_a_linked_unit_is_written_through_its_link(tmp_path: Path) -> None:
    unit = tmp_path / UNIT
    unit.parent.mkdir(parents=True)
    real = tmp_path / "lib" / UNIT_NAME
    real.parent.mkdir()
    real.write_text("old\n")
    unit.symlink_to(real)
    steps = install(tmp_path, FLEETD, dry_run=False)
    assert steps[0].verb == "update"
    assert unit.is_symlink() and real.read_text() == unit_text(FLEETD)


def test_a_dangling_link_where_a_directory_goes_leaves_no_partial_install(
    tmp_path: Path,
) -> None:
    config_dir = tmp_path / CONFIG.parent
    config_dir.parent.mkdir(parents=True)
    config_dir.symlink_to(tmp_path / "not-mounted" / "cmpfleet")
    with pytest.raises(InstallError) as caught:
        install(tmp_path, FLEETD, dry_run=False)
    assert "does not exist: create its target or remove the link" in str(caught.value)
    assert not (tmp_path / UNIT).exists() and not (tmp_path / STATE).exists()


def test_a_linked_state_dir_is_narrowed_not_kept_open(tmp_path: Path) -> None:
    target = tmp_path / "data" / "cmpfleet"
    target.mkdir(parents=True)
    target.chmod(0o755)
    state = tmp_path / STATE
    state.parent.mkdir(parents=True)
    state.symlink_to(target)
    steps = install(tmp_path, FLEETD, dry_run=False)
    step = next(s for s in steps if s.path == state)
    assert step.verb == "update" and "was 0755" in step.note
    assert stat.S_IMODE(target.stat().st_mode) == STATE_DIR_MODE
    assert install(tmp_path, FLEETD, dry_run=False)[2].verb == "keep"


def test_uninstall_removes_only_a_unit_install_wrote(tmp_path: Path) -> None:
    install(tmp_path, FLEETD, dry_run=False)
    unit = tmp_path / UNIT
    assert is_our_unit(unit)
    unit.write_text("[Unit]\nDescription=someone else's fleetd\n[Service]\nExecStart=/bin/true\n")
    steps = uninstall(tmp_path, dry_run=False)
    assert unit.exists() and steps[0].verb == "keep" and "not a unit" in steps[0].note
    unit.unlink()
    make_node("fifo", unit)
    uninstall(tmp_path, dry_run=False)
    assert stat.S_ISFIFO(os.lstat(unit).st_mode)  # whatever sits there that is not ours stays
    unit.unlink()
    install(tmp_path, FLEETD, dry_run=False)
    wants = tmp_path / WANTS
    wants.parent.mkdir()
    wants.symlink_to(Path("/etc/systemd/system") / UNIT_NAME)  # as `systemctl enable` makes it
    assert [s.verb for s in uninstall(tmp_path, dry_run=False)][:2] == ["remove", "remove"]
    assert not os.path.lexists(unit) and not os.path.lexists(wants)
    assert (tmp_path / CONFIG).exists() and (tmp_path / STATE).is_dir()


def test_a_refusal_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    unit = tmp_path / UNIT
    unit.parent.mkdir(parents=True)
    make_node("fifo", unit)
    assert main(["install", "--root", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"fleetd install: cannot write {unit}: a FIFO (named pipe), not a")
