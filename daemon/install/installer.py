"""Lay out (or remove) the system service under a root: the unit, the config, the state dir.

``fleetd install [--root DIR] [--dry-run]`` writes, under DIR (default ``/``):

- ``etc/systemd/system/fleetd.service``: the packaged unit with ``ExecStart`` pointing at
  the fleetd that runs the install (a venv's or pipx's ``bin/fleetd``), replaced when it
  differs (an upgrade moves the unit with the package);
- ``etc/cmpfleet/fleet.toml``: the documented example config, only when there is none
  (a rig's own config is never overwritten);
- ``var/lib/cmpfleet``: the state dir, 0700 (it will hold the API token);

then says the next two commands. Every file goes through ``hwcheck.atomic`` (a link is
written through, a device, FIFO or directory refused) and every path is checked before
the first write, so a refusal never leaves half an install. ``fleetd uninstall`` removes
the unit it wrote (recognised by its content: never another file of that name, a mask or
a node) and its enablement link, and nothing else: the config, the history and the token
stay, and so does the engine (it outlives fleetd by design). Paths inside the unit are the target
system's (``/etc/...``), whatever ``--root`` is.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import stat
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import NoReturn

from daemon.config import DEFAULT_CONFIG_PATH, DEFAULT_STATE_DIR
from daemon.install.systemctl import systemctl, systemd_runs
from hwcheck.atomic import atomic_write, writable_target
from hwcheck.regular_file import read_regular

UNIT_NAME = "fleetd.service"
UNIT_DIR = Path("/etc/systemd/system")
WANTS_DIR = UNIT_DIR / "multi-user.target.wants"
# The program the packaged unit names; an install puts its own fleetd there.
PACKAGED_FLEETD = "/opt/cmpfleet/venv/bin/fleetd"
UNIT_MODE, CONFIG_DIR_MODE, CONFIG_MODE, STATE_DIR_MODE = 0o644, 0o750, 0o640, 0o700
# How ``uninstall`` knows a unit at the path as the one ``install`` wrote.
UNIT_DESCRIPTION = "Description=cmpfleet rig supervisor"
EXIT_FAILED, EXIT_USAGE = 1, 2


class InstallError(Exception):
    """A step could not be done; the message is the one line to print."""


def packaged_unit() -> str:
    """The unit file shipped in the package."""
    return (resources.files("daemon.install") / UNIT_NAME).read_text(encoding="utf-8")


def example_config() -> str:
    """The documented example config shipped in the package."""
    return (resources.files("daemon") / "examples" / "fleet.toml").read_text(encoding="utf-8")


def this_fleetd() -> Path:
    """The ``fleetd`` of the environment running now (the venv's ``bin``, not a symlink's)."""
    beside = Path(sys.executable).with_name("fleetd")
    if beside.is_file():
        return beside.absolute()
    found = shutil.which("fleetd")
    return Path(found).absolute() if found else Path(sys.argv[0]).absolute()


def unit_text(fleetd: Path) -> str:
    """The packaged unit with ``ExecStart`` running ``fleetd`` (quoted when it must be)."""
    program = str(fleetd)
    quoted = f'"{program}"' if any(c.isspace() or c in "\"'\\" for c in program) else program
    text = packaged_unit()
    if f"ExecStart={PACKAGED_FLEETD} " not in text:
        raise InstallError(f"the packaged unit has no ExecStart={PACKAGED_FLEETD}: a broken build")
    return text.replace(f"ExecStart={PACKAGED_FLEETD} ", f"ExecStart={quoted} ", 1)


def under(root: Path, path: Path) -> Path:
    """``path`` (absolute, on the target system) inside ``root``."""
    return root / path.relative_to("/")


_DONE = {"write": "wrote", "update": "updated", "create": "created", "remove": "removed"}


@dataclass(frozen=True)
class Step:
    """One thing done (or, in a dry run, that would be done).

    ``verb`` is ``write``, ``update``, ``create``, ``remove`` or ``keep``.
    """

    verb: str
    path: Path
    note: str = ""

    def line(self, dry_run: bool) -> str:
        """``wrote PATH (note)``, or ``would write PATH (note)`` in a dry run."""
        if self.verb == "keep":
            verb = "kept"
        else:
            verb = f"would {self.verb}" if dry_run else _DONE[self.verb]
        return f"{verb} {self.path}" + (f" ({self.note})" if self.note else "")


def _create_new(path: Path, text: str, mode: int) -> bool:
    """Create ``path`` with ``text`` unless it exists (never replaced, even in a race)."""
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
        os.close(fd)
        try:
            os.link(temp, path)
        except FileExistsError:
            return False
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)


def _make_dir(path: Path, mode: int) -> bool:
    """Create ``path`` (and parents) with ``mode``; False when it was there."""
    if path.is_dir():
        return False
    path.mkdir(parents=True, mode=mode)
    os.chmod(path, mode)  # mkdir's mode passes through the umask
    return True


def _usable_dir(path: Path) -> None:
    """Raise ``InstallError`` when ``path`` cannot be (or hold) a directory of ours.

    Checked for every path before anything is written, so a refusal never leaves half an
    install: a dangling symbolic link (``etc/cmpfleet`` pointing at a disk not mounted)
    or a file where a directory belongs is named, with what to do.
    """
    if path.is_symlink() and not path.exists():
        raise InstallError(
            f"{path} is a symbolic link to {os.readlink(path)}, which does not exist: "
            "create its target or remove the link, then install again"
        )
    if path.exists() and not path.is_dir():
        raise InstallError(f"{path} is not a directory: move it aside, then install again")


def _unit_step(unit: Path, text: str, fleetd: Path) -> Step:
    """What to do with the unit file (checked, nothing written yet)."""
    if unit.is_symlink() and os.path.realpath(unit) == os.devnull:
        raise InstallError(
            f"{unit} is masked (a link to {os.devnull}): run systemctl unmask {UNIT_NAME} first"
        )
    _target, existing = writable_target(unit)  # a device, FIFO or directory: refused
    current = read_regular(unit).decode("utf-8", "replace") if existing is not None else None
    verb = "write" if current is None else ("keep" if current == text else "update")
    return Step(verb, unit, f"ExecStart={fleetd}")


def _state_step(state: Path) -> Step:
    """What to do with the state dir: create it, narrow it to 0700, or keep it."""
    if not state.is_dir():
        return Step("create", state, f"{STATE_DIR_MODE:04o}: it will hold the API token")
    where = f" (a link to {os.path.realpath(state)})" if state.is_symlink() else ""
    mode = stat.S_IMODE(state.stat().st_mode)
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        note = f"was {mode:04o}{where}: narrowed to {STATE_DIR_MODE:04o}, it holds the API token"
        return Step("update", state, note)
    return Step("keep", state, where.strip(" ()"))


def install(root: Path, fleetd: Path, dry_run: bool) -> list[Step]:
    """Write the unit, the config (if absent) and the state dir under ``root``.

    Every path is checked first (a device, FIFO or directory where the unit goes, a
    dangling symbolic link where a directory goes): a refusal changes nothing.
    """
    unit = under(root, UNIT_DIR / UNIT_NAME)
    config = under(root, DEFAULT_CONFIG_PATH)
    state = under(root, DEFAULT_STATE_DIR)
    for directory in (unit.parent, config.parent, state):
        _usable_dir(directory)
    text = unit_text(fleetd)
    unit_step = _unit_step(unit, text, fleetd)
    config_kept = os.path.lexists(config)
    state_step = _state_step(state)
    if not dry_run:
        if unit_step.verb != "keep":
            unit.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(unit, text, mode=UNIT_MODE)
        if not config_kept:
            _make_dir(config.parent, CONFIG_DIR_MODE)
            _create_new(config, example_config(), CONFIG_MODE)
        if state_step.verb == "create":
            _make_dir(state, STATE_DIR_MODE)
        elif state_step.verb == "update":
            os.chmod(state, STATE_DIR_MODE)
    config_step = (
        Step("keep", config, "a config is never overwritten")
        if config_kept
        else Step("write", config, "the documented example: every key, commented")
    )
    return [unit_step, config_step, state_step]


def is_our_unit(path: Path) -> bool:
    """True when ``path`` is a unit ``fleetd install`` wrote (a regular file, by its content).

    Its description line and an ``ExecStart`` running a ``fleetd``: a unit a person or a
    package put there under the same name (or a mask, a link to /dev/null) is not ours.
    """
    if path.is_symlink():
        return False
    try:
        text = read_regular(path).decode("utf-8", "replace")
    except OSError:
        return False
    lines = text.splitlines()
    described = any(line.startswith(UNIT_DESCRIPTION) for line in lines)
    program = next(
        (line[len("ExecStart=") :] for line in lines if line.startswith("ExecStart=")), ""
    )
    words = program.strip('"').split()
    return described and bool(words) and Path(words[0].strip('"')).name == "fleetd"


def uninstall(root: Path, dry_run: bool) -> list[Step]:
    """Remove the unit ``install`` wrote and its enablement link; nothing else.

    A file at the unit's path that is not ours (by content), or is not a regular file, is
    left in place and said so; the config and the state dir always stay.
    """
    steps: list[Step] = []
    unit = under(root, UNIT_DIR / UNIT_NAME)
    wants = under(root, WANTS_DIR / UNIT_NAME)
    if wants.is_symlink() and Path(os.readlink(wants)).name == UNIT_NAME:
        if not dry_run:
            wants.unlink()
        steps.append(Step("remove", wants))
    if is_our_unit(unit):
        if not dry_run:
            unit.unlink()
        steps.append(Step("remove", unit))
    elif os.path.lexists(unit):
        steps.append(Step("keep", unit, "not a unit fleetd install wrote: left in place"))
    else:
        steps.append(Step("keep", under(root, UNIT_DIR), f"no {UNIT_NAME} there"))
    steps.append(Step("keep", under(root, DEFAULT_CONFIG_PATH), "the config"))
    steps.append(Step("keep", under(root, DEFAULT_STATE_DIR), "the history and the API token"))
    return steps


def writable_by_others(program: Path) -> str | None:
    """Who besides root could change what the unit runs as root, or None."""
    for path in (program, *program.parents):
        try:
            info = path.stat()
        except OSError:
            continue
        if info.st_uid != 0:
            return f"{path} belongs to uid {info.st_uid}"
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not info.st_mode & stat.S_ISVTX:
            return f"{path} is writable by group or others"
    return None


def next_commands(fleetd: Path) -> list[str]:
    """What to run after an install: record the baseline, then enable the service."""
    fleetctl = fleetd.with_name("fleetctl")
    on_path = shutil.which("fleetctl")
    program = (
        "fleetctl"
        if on_path and Path(on_path).resolve() == fleetctl.resolve()
        else shlex.quote(str(fleetctl))
    )
    return [
        f"{program} init --force      # record this rig's baseline into {DEFAULT_CONFIG_PATH}",
        "systemctl enable --now fleetd",
    ]


def _parser(command: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"fleetd {command}",
        description=(
            "write the systemd unit (ExecStart = this fleetd), the example config (never "
            "over one) and the state dir"
            if command == "install"
            else "remove the systemd unit (never the config, the history or the engine)"
        ),
    )
    parser.add_argument(
        "--root", type=Path, default=Path("/"), help="install under DIR (default /)"
    )
    parser.add_argument("--dry-run", action="store_true", help="say what would be done, do nothing")
    parser.error = lambda message: _usage(command, message)  # type: ignore[method-assign]
    return parser


def _usage(command: str, message: str) -> NoReturn:
    sys.stderr.write(f"fleetd {command}: {message} (see fleetd {command} --help)\n")
    sys.exit(EXIT_USAGE)


def main(argv: Sequence[str]) -> int:
    """``fleetd install ...`` / ``fleetd uninstall ...``; the exit status."""
    command, *rest = argv
    args = _parser(command).parse_args(rest)
    root: Path = args.root.absolute()
    live = systemd_runs(root) and not args.dry_run
    try:
        if command == "install":
            fleetd = this_fleetd()
            steps = install(root, fleetd, args.dry_run)
        else:
            if live and is_our_unit(under(root, UNIT_DIR / UNIT_NAME)):
                problem = systemctl("disable", "--now", UNIT_NAME)  # the engine keeps running
                if problem:
                    sys.stderr.write(f"fleetd uninstall: warning: {problem}\n")
            steps = uninstall(root, args.dry_run)
    except (OSError, InstallError) as exc:
        where = f" {exc.filename}" if isinstance(exc, OSError) and exc.filename else ""
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        hint = (
            " (run it as root: sudo fleetd ..., or --root DIR)"
            if isinstance(exc, PermissionError)
            else ""
        )
        sys.stderr.write(f"fleetd {command}: cannot write{where}: {reason}{hint}\n")
        return EXIT_FAILED
    for step in steps:
        print(step.line(args.dry_run))
    if live:
        problem = systemctl("daemon-reload")
        if problem:
            sys.stderr.write(f"fleetd {command}: warning: {problem}\n")
    if command == "install":
        exposed = writable_by_others(fleetd) if root == Path("/") else None
        if exposed:
            sys.stderr.write(
                f"fleetd install: warning: the unit runs {fleetd} as root, but {exposed}: "
                "install cmpfleet where only root can write (e.g. a venv under /opt)\n"
            )
        if not args.dry_run:
            print("next:")
            for line in next_commands(fleetd):
                print(f"  {line}")
    elif not args.dry_run:
        print("the engine, if one runs, was left running (it outlives fleetd by design)")
    return 0
