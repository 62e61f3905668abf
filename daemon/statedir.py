"""Every file fleetd keeps under its state dir, named in one place.

The state dir (``/var/lib/cmpfleet`` by default) holds the history database, the API
token, the lock that keeps one fleetd per dir, the engine's adoption record and log, the
supervisor's restart count and, under ``--simulate``, the simulated host's boot id,
state and kernel log. ``StateDir`` is the one owner of those names: the daemon asks it
for a path and hands the path down. Where a lower package must name its own file (the
engine record and log in ``serving``, the simulated host's files in ``hwcheck.sim``,
which are also used without a daemon), this module imports that package's constant, so
each name is still written once. Everything is created 0600 (dirs 0700) whatever the
umask: the dir holds a secret and the engine log can hold users' prompts.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from daemon.defaults import TOKEN_FILE
from hwcheck.atomic import NotARegularFile, kind_of
from hwcheck.hostfacts.baseline import BASELINE_FILE
from hwcheck.sim.power_model import POWER_FILE
from hwcheck.sim.rig import KMSG_FILE, KMSG_ROTATED_FILE
from hwcheck.sim.state import BOOT_ID_FILE, STATE_FILE
from serving.evidence.bundles import CRASHES_DIR
from serving.runtime.engine_record import ENGINE_LOG_NAME, ENGINE_RECORD_NAME
from serving.runtime.supervisor_state import SUPERVISOR_STATE_NAME
from serving.sim.checkpoint import CHECKPOINT_DIR as SIM_CHECKPOINT_DIR
from serving.sim.crash_depth import CARDS_FILE as SIM_CARDS_FILE
from serving.sim.images import IMAGES_FILE
from serving.sim.perf import LOAD_FILE

DB_FILE = "fleet.db"
LOCK_FILE = "fleetd.lock"
ENGINE_PORT_FILE = "engine-port"
LATCH_FILE = "latch.json"
ACTIVE_PROFILE_FILE = "profile.json"
BENCH_SWEEP_FILE = "bench-sweep.json"

DIR_MODE = 0o700
FILE_MODE = 0o600


@dataclass(frozen=True, slots=True)
class StateDir:
    """The paths of one state dir (a value: it creates nothing by itself)."""

    root: Path

    @property
    def db(self) -> Path:
        """The SQLite history (WAL mode: ``-wal``/``-shm`` siblings appear beside it)."""
        return self.root / DB_FILE

    @property
    def db_url(self) -> str:
        """The SQLAlchemy URL of :attr:`db`, the store's default."""
        return f"sqlite:///{self.db}"

    @property
    def token(self) -> Path:
        """The API token, created at first start."""
        return self.root / TOKEN_FILE

    @property
    def lock(self) -> Path:
        """fleetd's exclusive lock (holds the holder's pid): one fleetd per state dir."""
        return self.root / LOCK_FILE

    @property
    def engine_port(self) -> Path:
        """The loopback port chosen for a ``port = 0`` recipe, kept across restarts."""
        return self.root / ENGINE_PORT_FILE

    @property
    def latch(self) -> Path:
        """``latch.json``: this boot's reboot latch, readable without the store."""
        return self.root / LATCH_FILE

    @property
    def active_profile(self) -> Path:
        """The launch profile in force (``fleetctl serve`` switches it; kept across restarts)."""
        return self.root / ACTIVE_PROFILE_FILE

    @property
    def engine_record(self) -> Path:
        """``engine.pid``: the adoption record (JSON) of the engine fleetd launched."""
        return self.root / ENGINE_RECORD_NAME

    @property
    def engine_log(self) -> Path:
        """The engine's stdout and stderr (rotated copies ``engine.log.N`` beside it)."""
        return self.root / ENGINE_LOG_NAME

    @property
    def supervisor_state(self) -> Path:
        """The supervisor's running restart total."""
        return self.root / SUPERVISOR_STATE_NAME

    @property
    def sim_boot_id(self) -> Path:
        """Under ``--simulate``: the simulated host's boot id."""
        return self.root / BOOT_ID_FILE

    @property
    def sim_images(self) -> Path:
        """The simulated container runtime's images (IDs, digests, rebuilds)."""
        return self.root / IMAGES_FILE

    @property
    def sim_cards(self) -> Path:
        """Under ``--simulate``: each simulated card's memory, for the engine's KV pool line."""
        return self.root / SIM_CARDS_FILE

    @property
    def sim_checkpoint(self) -> Path:
        """Under ``--simulate``: the scenario's sparse checkpoint (``serving.sim.checkpoint``)."""
        return self.root / SIM_CHECKPOINT_DIR

    @property
    def crashes(self) -> Path:
        """The crash bundles (a directory per event) and the boot fingerprints."""
        return self.root / CRASHES_DIR

    @property
    def sim_state(self) -> Path:
        """Under ``--simulate``: the simulated host's state (fired steps, card overrides)."""
        return self.root / STATE_FILE

    @property
    def sim_kernel_log(self) -> Path:
        """Under ``--simulate``: the simulated kernel log (``/dev/kmsg`` record format)."""
        return self.root / KMSG_FILE

    @property
    def sim_kernel_log_rotated(self) -> Path:
        """Under ``--simulate``: the previous boot's simulated kernel log."""
        return self.root / KMSG_ROTATED_FILE

    @property
    def sim_engine_power(self) -> Path:
        """Under ``--simulate``: what the caps do to the simulated engine's speed."""
        return self.root / POWER_FILE

    @property
    def sim_engine_load(self) -> Path:
        """Under ``--simulate``: the requests the simulated engine runs (its cards' draw)."""
        return self.root / LOAD_FILE

    @property
    def bench_sweep(self) -> Path:
        """A cap sweep in progress: the caps to put back if fleetd dies before its end."""
        return self.root / BENCH_SWEEP_FILE

    @property
    def host_baseline(self) -> Path:
        """The host baseline fleetd recorded at its first start (``[host]``-table TOML)."""
        return self.root / BASELINE_FILE

    def files(self) -> tuple[Path, ...]:
        """Every file named here (not all exist: some only under ``--simulate``)."""
        return (
            self.db,
            self.token,
            self.lock,
            self.engine_port,
            self.latch,
            self.active_profile,
            self.engine_record,
            self.engine_log,
            self.supervisor_state,
            self.sim_boot_id,
            self.sim_images,
            self.sim_state,
            self.sim_kernel_log,
            self.sim_kernel_log_rotated,
            self.sim_engine_power,
            self.sim_engine_load,
            self.bench_sweep,
            self.host_baseline,
            self.crashes,
            self.sim_cards,
            self.sim_checkpoint,
        )

    def create_private_file(self, path: Path) -> None:
        """Create ``path`` empty and 0600 if absent, so a later opener cannot widen it.

        For files another library creates with its own mode (SQLite makes the database
        0644 minus the umask, and its ``-wal``/``-shm`` files copy the database's mode).
        """
        # Non-blocking: a FIFO put there must refuse the start, not hang it.
        flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
        fd = os.open(path, flags, FILE_MODE)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise NotARegularFile(path, kind_of(info.st_mode), "not a regular file")
            os.fchmod(fd, FILE_MODE)
        finally:
            os.close(fd)
