"""Lay out (or remove) the system service under a root: the unit, the config, the state dir.

``fleetd install [--root DIR] [--dry-run]`` writes, under DIR (default ``/``):

- ``etc/systemd/system/fleetd.service``: the packaged unit with ``ExecStart`` pointing at
  the fleetd that runs the install (a venv's or pipx's ``bin/fleetd``), replaced when it
  differs (an upgrade moves the unit with the package);
- ``etc/cmpfleet/fleet.toml``: the documented example config, only when there is none
  (a rig's own config is never overwritten);
- ``var/lib/cmpfleet``: the state dir, 0700 (it will hold the API token);

then says the next two commands. ``fleetd uninstall`` removes the unit (and its
enablement link) and nothing else: the config, the history and the token stay, and so
does the engine (it outlives fleetd by design). Paths inside the unit are the target
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
from hwcheck.atomic import atomic_write

UNIT_NAME = "fleetd.service"
UNIT_DIR = Path("/etc/systemd/system")
WANTS_DIR = UNIT_DIR / "multi-user.target.wants"
# The program the packaged unit names; an install puts its own fleetd there.
PACKAGED_FLEETD = "/opt/cmpfleet/venv/bin/fleetd"
UNIT_MODE, CONFIG_DIR_MODE, CONFIG_MODE, STATE_DIR_MODE = 0o644, 0o750, 0o640, 0o700
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


def install(root: Path, fleetd: Path, dry_run: bool) -> list[Step]:
    """Write the unit, the config (if absent) and the state dir under ``root``."""
    steps: list[Step] = []
    unit = under(root, UNIT_DIR / UNIT_NAME)
    text = unit_text(fleetd)
    current = unit.read_text(encoding="utf-8") if unit.is_file() else None
    verb = "write" if current is None else ("keep" if current == text else "update")
    if verb != "keep" and not dry_run:
        unit.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(unit, text, mode=UNIT_MODE)
    steps.append(Step(verb, unit, f"ExecStart={fleetd}"))
    config = under(root, DEFAULT_CONFIG_PATH)
    if config.exists():
        steps.append(Step("keep", config, "a config is never overwritten"))
    else:
        if not dry_run:
            _make_dir(config.parent, CONFIG_DIR_MODE)
            _create_new(config, example_config(), CONFIG_MODE)
        steps.append(Step("write", config, "the documented example: every key, commented"))
    state = under(root, DEFAULT_STATE_DIR)
    if state.is_dir():
        steps.append(Step("keep", state))
    else:
        if not dry_run:
            _make_dir(state, STATE_DIR_MODE)
        steps.append(Step("create", state, "0700: it will hold the API token"))
    return steps


def uninstall(root: Path, dry_run: bool) -> list[Step]:
    """Remove the unit and its enablement link; the config and the state dir stay."""
    steps: list[Step] = []
    for path in (under(root, WANTS_DIR / UNIT_NAME), under(root, UNIT_DIR / UNIT_NAME)):
        if path.is_symlink() or path.exists():
            if not dry_run:
                path.unlink()
            steps.append(Step("remove", path))
    if not steps:
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
            if live and under(root, UNIT_DIR / UNIT_NAME).exists():
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
