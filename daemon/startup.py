"""Building a ``Daemon`` from settings: the state dir, the listener, the host, the store.

Each step that a person must fix (a state dir that is a file or in use, a listen address
taken, a damaged database) refuses with one line and exit 2 before anything later has
started: the listener is bound right after the state dir is locked, so a taken port
stops fleetd before the store, the host sources or the engine are touched. A database
server that does not answer yet exits 1: systemd retries that one.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import math
import os
import socket
import stat
from collections.abc import Mapping
from pathlib import Path

from sqlalchemy.exc import OperationalError

from daemon.api.server import ApiServer
from daemon.config import ENV_PREFIX, Settings
from daemon.engine.guard import GuardBindError, bind_guard_sockets
from daemon.engine.profiles import profiles_for
from daemon.runtime import Daemon
from daemon.sdnotify import Notifier
from daemon.statedir import DIR_MODE, StateDir
from daemon.store import StoreError
from hwcheck.host import HostSources
from hwcheck.sim.rig import SimulatedRig
from hwcheck.sim.scenario import ScenarioError, load_scenario
from hwcheck.sim.state import SimStateError
from serving.recipe.recipe import RecipeError
from serving.sim.scenario import (
    EngineScenario,
    EngineScenarioError,
    parse_engine_scenario,
    simulated_engine_args,
)

STORE_URL_VARIABLE = f"{ENV_PREFIX}STORE_URL"
EXIT_PERSON = 2  # a person must fix it: the unit's RestartPreventExitStatus
EXIT_RETRY = 1  # may pass by itself (a database server still starting): systemd retries

log = logging.getLogger("fleetd")


class StartupError(Exception):
    """fleetd cannot start; the message is the one line to print, ``exit_code`` its status."""

    def __init__(self, message: str, exit_code: int = EXIT_PERSON) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def prepare_state_dir(state_dir: Path) -> None:
    """Create the state dir (0700: it holds the API token) or explain why not."""
    if state_dir.exists() and not state_dir.is_dir():
        raise StartupError(f"state dir {state_dir} is a file, not a directory: see --state-dir")
    try:
        state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise StartupError(f"cannot create state dir {state_dir}: {exc.strerror}") from None
    if not os.access(state_dir, os.W_OK):
        raise StartupError(f"state dir {state_dir} is not writable (run as root or --state-dir)")
    narrow_state_dir(state_dir)


def narrow_state_dir(state_dir: Path) -> None:
    """A state dir others can enter is narrowed to 0700, with a warning (as the token file).

    It holds the API token, the history and the engine log (users' prompts): a dir made by
    hand or unpacked from a backup with a loose umask has already been open to others.
    """
    mode = stat.S_IMODE(state_dir.stat().st_mode)
    if not mode & (stat.S_IRWXG | stat.S_IRWXO):
        return
    try:
        os.chmod(state_dir, DIR_MODE)
    except OSError as exc:
        raise StartupError(
            f"state dir {state_dir} is mode {mode:04o} and cannot be narrowed to "
            f"{DIR_MODE:04o}: {exc.strerror} (chmod 700 it)"
        ) from None
    log.warning(
        "state dir %s was mode %04o (others could read the history and the engine log): "
        "now %04o; replace the API token if others may have read it (delete %s and restart)",
        state_dir,
        mode,
        DIR_MODE,
        StateDir(state_dir).token,
    )


# What SQLite says about a file that is not (or no longer) a database.
DAMAGED_DB_WORDS = ("file is not a database", "database disk image is malformed")


def _damaged_hint(message: str, state_dir: Path) -> str:
    """The way out when ``fleet.db`` is damaged; fleetd itself never moves or rewrites it."""
    if "move it aside" in message or not any(words in message for words in DAMAGED_DB_WORDS):
        return ""  # the store's integrity check said it already
    db = StateDir(state_dir).db
    return (
        f" ({db} is damaged or not cmpfleet's; it was left untouched: move it aside, "
        f"e.g. mv {db} {db}.bad, and fleetd starts a fresh history)"
    )


def lock_state_dir(state_dir: Path) -> int:
    """Hold an exclusive lock on the state dir for fleetd's lifetime; its fd.

    Two fleetd on one state dir would share one engine and one database and undo each
    other's decisions (an operator's stop restarted by the other): the second refuses.
    The lock dies with the process, kill -9 included, so it never goes stale.
    """
    path = StateDir(state_dir).lock
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise StartupError(
            f"state dir {state_dir} is in use by fleetd pid {holder}: one fleetd per state dir"
        ) from None
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
    except OSError as exc:  # a full disk: the lock holds, the pid is only a courtesy
        log.debug("cannot write fleetd's pid into %s: %s", path, exc.strerror or exc)
    return fd


SIM_ENGINE_READY_VARIABLE = "CMPFLEET_SIM_ENGINE_READY_AFTER_S"
SIM_ENGINE_READY_MAX_S = 3600.0


def sim_engine_table(
    table: Mapping[str, object], environ: Mapping[str, str]
) -> Mapping[str, object]:
    """The scenario's ``[engine]`` table, with the load time from the environment when set.

    ``CMPFLEET_SIM_ENGINE_READY_AFTER_S`` shortens (or lengthens) the simulated engine's
    checkpoint loading for a scenario that does not set ``ready_after_s`` itself: a demo or
    a test suite need not wait the 5 s a built-in scenario takes each start.
    """
    raw = environ.get(SIM_ENGINE_READY_VARIABLE)
    if raw is None or "ready_after_s" in table:
        return table
    try:
        ready_s = float(raw)
    except ValueError:
        ready_s = math.nan
    if not 0 <= ready_s <= SIM_ENGINE_READY_MAX_S:  # NaN and inf fail here too
        raise StartupError(
            f"environment {SIM_ENGINE_READY_VARIABLE}: seconds from 0 to "
            f"{SIM_ENGINE_READY_MAX_S:g}, got {raw!r}"
        )
    return {**table, "ready_after_s": ready_s}


def check_simulation(simulate: str, environ: Mapping[str, str]) -> None:
    """``StartupError`` for a scenario (or its ``[engine]``) that does not load; reads no state."""
    try:
        scenario = load_scenario(simulate)
        parse_engine_scenario(sim_engine_table(scenario.engine, environ), scenario.source)
    except (ScenarioError, EngineScenarioError) as exc:
        raise StartupError(str(exc)) from None


def build_host(
    settings: Settings,
    state_dir: Path,
    simulate: str | None,
    environ: Mapping[str, str] | None = None,
) -> tuple[HostSources, SimulatedRig | None, EngineScenario | None]:
    """The simulated rig (every host source replaced) and its engine, or the real host."""
    if simulate is not None:
        try:
            scenario = load_scenario(simulate)
            engine_table = sim_engine_table(
                scenario.engine, os.environ if environ is None else environ
            )
            engine = parse_engine_scenario(engine_table, scenario.source)
            rig = SimulatedRig(scenario, state_dir)
        except (ScenarioError, EngineScenarioError, SimStateError) as exc:
            raise StartupError(str(exc)) from None
        return rig.host_sources(nvml_timeout_s=settings.poll.nvml_timeout_s), rig, engine
    from hwcheck.realhost import real_host_sources

    return (
        real_host_sources(
            nvml_timeout_s=settings.poll.nvml_timeout_s,
            kernel_log=settings.poll.kernel_log,
            kernel_log_file=settings.poll.kernel_log_file,
        ),
        None,
        None,
    )


def store_url_source(config_path: Path | None, environ: Mapping[str, str]) -> str:
    """Who set ``[store] url``, in the words of a config error (``FILE: store.url``)."""
    if STORE_URL_VARIABLE in environ:
        return f"environment {STORE_URL_VARIABLE}: store.url"
    return f"{config_path or 'config'}: store.url"


def guard_address_clash(guard_listen: str | None, api_listen: str) -> str | None:
    """The line to refuse with when ``[guard] listen`` is fleetd's own API address.

    Both sockets are bound with ``SO_REUSEADDR`` before either listens, so the second bind
    succeeded and the API's ``listen`` failed later, blaming "another program", exit 1
    (which systemd retries) (issue 36). A person's mistake: one line, exit 2, before
    anything is bound. Port 0 (any free port) never clashes.
    """
    if guard_listen is None:
        return None
    guard_host, _, guard_port = guard_listen.rpartition(":")
    api_host, _, api_port = api_listen.rpartition(":")
    if guard_port != api_port or guard_port in ("", "0"):
        return None
    hosts = {guard_host.strip("[]"), api_host.strip("[]")}
    if len(hosts) == 1 or hosts & {"0.0.0.0", "::", ""}:  # noqa: S104 (a comparison)
        return (
            f"guard.listen {guard_listen}: that is fleetd's own API address "
            f"({api_listen}, [web] listen or --listen): give the guard another port"
        )
    return None


def build_daemon(
    settings: Settings,
    state_dir: Path,
    simulate: str | None,
    config_path: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Daemon:
    """Everything fleetd needs, opened but not started.

    A configured store URL passes the config check when it parses, yet the database can
    still be unreachable (a closed port, a path SQLite cannot open): that failure names the
    file and key, or the variable, that set the URL.
    """
    if simulate is not None:
        # A bad scenario name refuses before the state dir is touched (no chmod, no lock).
        check_simulation(simulate, os.environ if environ is None else environ)
    clash = guard_address_clash(settings.guard.listen, settings.web.listen)
    if clash is not None:
        raise StartupError(clash)
    prepare_state_dir(state_dir)
    lock_state_dir(state_dir)  # held (fd kept open) until the process ends
    api = ApiServer(settings.web.listen)
    try:
        api.bind()  # a taken address refuses before anything else is opened
    except RuntimeError as exc:
        raise StartupError(str(exc)) from None
    guard_sockets = None
    if settings.guard.enabled:
        try:
            guard_sockets = bind_guard_sockets(settings.guard)
        except GuardBindError as exc:
            api.close()
            raise StartupError(str(exc)) from None
    try:
        host, rig, sim_engine = build_host(settings, state_dir, simulate, environ)
    except StartupError:
        api.close()
        _close_all(guard_sockets)
        raise
    try:
        build_file = None if rig is None else StateDir(state_dir).sim_images
        sim_dir = None if rig is None else state_dir
        profiles = profiles_for(settings, config_path, sim_engine, build_file, sim_dir)
        engine_args = () if sim_engine is None else simulated_engine_args(sim_engine)
        return Daemon(
            settings,
            state_dir,
            host,
            rig,
            Notifier(),
            profiles=profiles,
            api=api,
            guard_sockets=guard_sockets,
            sim_engine_args=engine_args,
        )
    except StoreError as exc:
        host.close()
        api.close()
        _close_all(guard_sockets)
        if settings.store.url is None:  # the default file in the state dir, named by exc
            raise StartupError(f"{exc}{_damaged_hint(str(exc), state_dir)}") from None
        source = store_url_source(config_path, os.environ if environ is None else environ)
        raise StartupError(f"{source}: {exc}", _store_exit(settings.store.url, exc)) from None
    except RecipeError as exc:
        host.close()
        api.close()
        _close_all(guard_sockets)
        raise StartupError(str(exc)) from None
    except OSError as exc:  # a state file that cannot be written (a full disk, a FIFO)
        host.close()
        api.close()
        raise StartupError(f"cannot start: {file_problem(exc)}") from None


def file_problem(exc: OSError) -> str:
    """One line for a file that could not be written or read: which file, and why."""
    where = f"{exc.filename}: " if exc.filename else ""
    why = exc.strerror or str(exc)
    if exc.errno == errno.ENOSPC:
        why += " (free disk space there: df -h)"
    return f"{where}{why}"


def _close_all(sockets: tuple[socket.socket, ...] | None) -> None:
    for sock in sockets or ():
        sock.close()


def _store_exit(url: str, exc: StoreError) -> int:
    """A database server that does not answer (yet) may come up: let systemd retry."""
    cause = exc.__cause__ or exc.__context__  # the driver's error, however it was raised
    unreachable = isinstance(cause, OperationalError) and not url.startswith("sqlite")
    return EXIT_RETRY if unreachable else EXIT_PERSON
