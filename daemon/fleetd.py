"""``fleetd``: the cmpfleet daemon (foreground; systemd ``Type=notify``).

Flags override ``CMPFLEET_*`` environment variables, which override the config file.
A bad config exits 2 with one line before anything starts; so does a start-up failure a
person must fix (``daemon.startup``: a state dir in use, the listen address taken). The first SIGTERM/SIGINT
shuts down gracefully; a second exits at once. Neither stops the engine unless
``[serving] stop_on_exit = true``.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn

from daemon.config import (
    DEFAULT_CONFIG_PATH,
    DEFAULT_LISTEN,
    DEFAULT_STATE_DIR,
    ConfigError,
    Settings,
    load_settings,
)
from daemon.signals import StopSignals
from web.version import __version__

log = logging.getLogger("fleetd")
EXIT_CONFIG = 2  # a bad config or flag: the unit's RestartPreventExitStatus
EXIT_STARTUP = 1  # an unforeseen failure once everything was built: systemd retries it
INSTALL_COMMANDS = ("install", "uninstall")


def _state_dir(text: str) -> Path:
    """A state dir given by a person: never empty.

    ``Path("")`` is the current directory, which fleetd would then narrow to 0700 (under
    systemd, ``/``): an empty ``--state-dir`` or ``CMPFLEET_STATE_DIR`` is refused (issue 36).
    """
    if not text.strip():
        raise argparse.ArgumentTypeError(
            f"the state dir is empty: give a directory (default {DEFAULT_STATE_DIR})"
        )
    return Path(text)


def example_config_path() -> Path:
    """The packaged example config (what ``--simulate`` uses without ``--config``)."""
    return Path(str(resources.files("daemon") / "examples" / "fleet.toml"))


class _OneLineParser(argparse.ArgumentParser):
    """A usage error is one line with a hint, not the usage block above the error."""

    def error(self, message: str) -> NoReturn:
        """Print ``fleetd: MESSAGE (see fleetd --help)`` and exit 2, as argparse does."""
        self.exit(EXIT_CONFIG, f"fleetd: {message} (see fleetd --help)\n")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """fleetd's flags (docs/reference.md "fleetd")."""
    parser = _OneLineParser(
        prog="fleetd",
        description=__doc__.splitlines()[0],
        epilog="fleetd install [--root DIR] [--dry-run] sets up the system service (the unit, "
        "the example config, the state dir); fleetd uninstall [--root DIR] removes the unit.",
    )
    parser.add_argument("--config", type=Path, help=f"config file (default {DEFAULT_CONFIG_PATH})")
    parser.add_argument("--simulate", metavar="SCENARIO", help="built-in scenario or file")
    parser.add_argument(
        "--state-dir", type=_state_dir, help=f"state directory (default {DEFAULT_STATE_DIR})"
    )
    parser.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help=f"API/dashboard address (default [web] listen, else {DEFAULT_LISTEN})",
    )
    parser.add_argument("--version", action="version", version=f"fleetd {__version__}")
    parser.add_argument(
        "--log-level",
        default=os.environ.get("CMPFLEET_LOG_LEVEL", "info"),
        choices=["debug", "info", "warning", "error"],
    )
    return parser.parse_args(argv)


def resolve_settings(args: argparse.Namespace) -> tuple[Settings, Path | None]:
    """Load the config: the given file, else the default (absent is fine)."""
    overrides: dict[str, Any] = {}
    if args.listen:
        overrides["web"] = {"listen": args.listen}
    if args.config is not None:
        path: Path | None = args.config
        return load_settings(args.config, overrides=overrides), path
    if args.simulate is not None:
        path = example_config_path()
        return load_settings(path, overrides=overrides), path
    path = DEFAULT_CONFIG_PATH
    return load_settings(path, overrides=overrides, missing_ok=True), path


def check_configured_recipe(
    settings: Settings, config_path: Path | None, simulate: str | None = None
) -> None:
    """A configured recipe or profile that cannot be read is a config error (exit 2, one line).

    Every profile is checked, not only the one in force: a switch must not be the moment
    a typo in another profile's table is found.
    """
    serving = settings.serving
    if serving.recipe is None and not serving.profiles and serving.profile is None:
        return
    from daemon.engine.profiles import SIM_PRESET, resolve_profiles
    from serving.recipe.recipe import RecipeError, preset_recipe

    simulated = preset_recipe(SIM_PRESET) if simulate is not None else None
    try:
        resolve_profiles(settings, config_path.parent if config_path else None, simulated)
    except RecipeError as exc:
        raise ConfigError(f"{config_path or 'config'}: {exc}") from None


def setup_logging(level: str) -> None:
    """One line per event on stderr; journald adds the timestamp under systemd."""
    fmt = "%(levelname)s %(name)s: %(message)s"
    if "INVOCATION_ID" not in os.environ:  # not under systemd: add our own time
        fmt = "%(asctime)s " + fmt
    logging.basicConfig(level=level.upper(), format=fmt, stream=sys.stderr)
    for noisy in ("apscheduler.scheduler", "apscheduler.executors.default", "httpx", "uvicorn"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))
    # A stuck poll makes APScheduler warn at every skipped run; status and the one
    # "status is UNKNOWN" line say it instead of a line per interval.
    logging.getLogger("apscheduler.scheduler").setLevel(logging.ERROR)


def main(argv: list[str] | None = None) -> None:
    """Run fleetd until a signal stops it (``fleetd install|uninstall``: the system service)."""
    words = sys.argv[1:] if argv is None else argv
    if words and words[0] in INSTALL_COMMANDS:
        from daemon.install.installer import main as install_main

        sys.exit(install_main(words))
    args = parse_args(argv)
    setup_logging(args.log_level)
    # Imported here, not at the top: `fleetd install` needs neither (nor the store below).
    from daemon.alerts.sinks import build_sinks
    from daemon.config_secrets import exposed_secrets
    from daemon.ports.reboot import missing_host_programs

    try:
        settings, config_path = resolve_settings(args)
        check_configured_recipe(settings, config_path, args.simulate)
        if args.simulate is None:  # under --simulate no host command ever runs
            for missing in missing_host_programs(settings):
                # Degraded, not refused: the rig is watched; the reboot_command check warns.
                log.warning("%s: %s", config_path or "config", missing)
        build_sinks(settings.alerts)  # a webhook secret_file that cannot be read: exit 2
    except ConfigError as exc:
        sys.stderr.write(f"fleetd: {exc}\n")
        sys.exit(EXIT_CONFIG)
    profile_recipes = [table.get("recipe") for table in settings.serving.profiles.values()]
    exposed = (
        []
        if config_path is None
        else exposed_secrets(config_path, settings.serving.recipe, profile_recipes)
    )
    for path, keys in exposed:
        log.warning(
            "%s holds secrets (%s) and others can read it: chmod 600 it", path, ", ".join(keys)
        )
    state_dir = args.state_dir
    if state_dir is None:
        try:
            state_dir = _state_dir(os.environ.get("CMPFLEET_STATE_DIR", str(DEFAULT_STATE_DIR)))
        except argparse.ArgumentTypeError as exc:
            sys.stderr.write(f"fleetd: CMPFLEET_STATE_DIR: {exc}\n")
            sys.exit(EXIT_CONFIG)
    from daemon.startup import StartupError, build_daemon

    try:
        daemon = build_daemon(settings, state_dir, args.simulate, config_path)
    except StartupError as exc:
        sys.stderr.write(f"fleetd: {exc}\n")
        sys.exit(exc.exit_code)

    # SIGTERM or SIGINT: the first a clean stop, a second exits now (daemon/signals.py).
    StopSignals(daemon.request_stop).install()
    try:
        daemon.start()
    except Exception as exc:  # one line, not a traceback: what failed and nothing else
        sys.stderr.write(f"fleetd: start-up failed: {exc}\n")
        try:
            daemon.shutdown(announce=False)
        except Exception as again:  # a full disk fails the clean-up too: one line, no more
            log.debug("the clean-up after the failed start failed too: %s", again)
        sys.exit(EXIT_STARTUP)
    # Everything built so far (modules, the app, the scenario) lives as long as fleetd:
    # out of the collector's sight, a full collection walks only what came after it
    # (without this one took about 100 ms, a pause every API reader and the poll felt).
    gc.freeze()
    try:
        daemon.run()
    finally:
        daemon.shutdown()


if __name__ == "__main__":
    main()
