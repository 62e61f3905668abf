"""Building a ``Daemon`` from settings: the state dir, the host (real or simulated)."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Mapping
from pathlib import Path

from daemon.config import ENV_PREFIX, Settings
from daemon.profiles import profiles_for
from daemon.runtime import Daemon
from daemon.sdnotify import Notifier
from daemon.statedir import StateDir
from daemon.store import StoreError
from hwcheck.host import HostSources
from hwcheck.sim.rig import SimulatedRig
from hwcheck.sim.scenario import ScenarioError, load_scenario
from hwcheck.sim.state import SimStateError
from serving.recipe.recipe import RecipeError
from serving.sim.scenario import EngineScenario, EngineScenarioError, parse_engine_scenario

STORE_URL_VARIABLE = f"{ENV_PREFIX}STORE_URL"


class StartupError(Exception):
    """fleetd cannot start; the message is the one line to print."""


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


# What SQLite says about a file that is not (or no longer) a database.
DAMAGED_DB_WORDS = ("file is not a database", "database disk image is malformed")


def _damaged_hint(message: str, state_dir: Path) -> str:
    """The way out when ``fleet.db`` is damaged; fleetd itself never moves or rewrites it."""
    if not any(words in message for words in DAMAGED_DB_WORDS):
        return ""
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
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def build_host(
    settings: Settings, state_dir: Path, simulate: str | None
) -> tuple[HostSources, SimulatedRig | None, EngineScenario | None]:
    """The simulated rig (every host source replaced) and its engine, or the real host."""
    if simulate is not None:
        try:
            scenario = load_scenario(simulate)
            engine = parse_engine_scenario(scenario.engine, scenario.source)
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
    prepare_state_dir(state_dir)
    lock_state_dir(state_dir)  # held (fd kept open) until the process ends
    host, rig, sim_engine = build_host(settings, state_dir, simulate)
    try:
        profiles = profiles_for(settings, config_path, sim_engine)
        return Daemon(settings, state_dir, host, rig, Notifier(), profiles=profiles)
    except StoreError as exc:
        host.close()
        if settings.store.url is None:  # the default file in the state dir, named by exc
            raise StartupError(f"{exc}{_damaged_hint(str(exc), state_dir)}") from None
        source = store_url_source(config_path, os.environ if environ is None else environ)
        raise StartupError(f"{source}: {exc}") from None
    except RecipeError as exc:
        host.close()
        raise StartupError(str(exc)) from None
