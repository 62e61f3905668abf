"""What identifies a launched engine across fleetd restarts: the adoption record.

``engine.pid`` in the state dir holds JSON (pid, the process's start time, argv, spec hash,
port, mode, container name and id) written atomically. A restarted fleetd reads it and
checks that the pid still runs *with the recorded start time*, so a reused pid is never
taken for the engine. No process is started here (that is the launchers' job).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import psutil

from hwcheck.atomic import atomic_write
from serving.recipe.masking import mask_argv
from serving.recipe.spec import LaunchMode, LaunchSpec, reach_host
from serving.runtime.logcapture import launch_marker

log = logging.getLogger("fleetd.engine")

ENGINE_LOG_NAME = "engine.log"
ENGINE_RECORD_NAME = "engine.pid"

# Two readings of one process's start time agree to the clock tick; a reused pid does not.
_CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
_START_TIME_TOLERANCE_S = 0.05


class RecordError(Exception):
    """``engine.pid`` exists but cannot be used; the message names the file and the fault."""


@dataclass(frozen=True)
class EngineRecord:
    """What a restarted fleetd needs to find, verify and probe a running engine."""

    pid: int
    start_time: float
    argv: tuple[str, ...]
    spec_hash: str
    port: int
    mode: LaunchMode
    container_name: str | None
    host: str
    served_model_name: str
    recipe_hash: str
    launched_at: str
    container_id: str | None = None

    @property
    def base_url(self) -> str:
        """``http://host:port`` of the engine this record describes (wildcards on loopback)."""
        return f"http://{reach_host(self.host)}:{self.port}"

    def to_json(self) -> str:
        """The record as written to ``engine.pid``."""
        data = asdict(self)
        data["argv"] = list(self.argv)
        data["mode"] = str(self.mode)
        return json.dumps(data, indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, source: str) -> EngineRecord:
        """Parse a record; raises :class:`RecordError` naming ``source`` and the fault."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RecordError(f"{source}: not valid JSON ({exc})") from exc
        if not isinstance(data, dict):
            raise RecordError(f"{source}: expected a JSON object")
        try:
            return cls(
                pid=int(data["pid"]),
                start_time=float(data["start_time"]),
                argv=tuple(str(a) for a in data["argv"]),
                spec_hash=str(data["spec_hash"]),
                port=int(data["port"]),
                mode=LaunchMode(data["mode"]),
                container_name=(
                    None if data.get("container_name") is None else str(data["container_name"])
                ),
                host=str(data.get("host", "127.0.0.1")),
                served_model_name=str(data.get("served_model_name", "")),
                recipe_hash=str(data.get("recipe_hash", "")),
                launched_at=str(data.get("launched_at", "")),
                container_id=(
                    None if data.get("container_id") is None else str(data["container_id"])
                ),
            )
        except KeyError as exc:
            raise RecordError(f"{source}: missing key {exc.args[0]!r}") from exc
        except (TypeError, ValueError) as exc:
            raise RecordError(f"{source}: bad value ({exc})") from exc


def spec_hash(spec: LaunchSpec) -> str:
    """A digest of everything that makes one launch differ from another."""
    data = {
        "mode": str(spec.mode),
        "argv": list(spec.argv),
        "env": dict(sorted(spec.env.items())),
        "host": spec.host,
        "port": spec.port,
        "served_model_name": spec.served_model_name,
        "container_name": spec.container_name,
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def now_iso() -> str:
    """Wall-clock now, UTC, ISO 8601 to the second (for records people read)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def process_start_time(pid: int, proc_root: Path = Path("/proc")) -> float | None:
    """Seconds after boot at which ``pid`` started (``/proc/<pid>/stat`` field 22).

    Not psutil's ``create_time()``: that adds ``/proc/stat``'s ``btime``, a wall-clock
    figure that moves whenever the clock is stepped (NTP at boot), which would make a
    restarted fleetd take its own engine for a stranger and start a second one.
    """
    try:
        text = (proc_root / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ")".
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return int(fields[19]) / _CLOCK_TICKS_PER_S
    except (IndexError, ValueError):
        return None


def runs_as(pid: int, start_time: float) -> bool:
    """True when ``pid`` is a live (not zombie) process started at ``start_time``."""
    started = process_start_time(pid)
    if started is None or abs(started - start_time) > _START_TIME_TOLERANCE_S:
        return False
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


class RecordFile:
    """``engine.pid`` and ``engine.log`` in one state dir."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.record_path = state_dir / ENGINE_RECORD_NAME
        self.log_path = state_dir / ENGINE_LOG_NAME

    def read(self) -> EngineRecord | None:
        """The record; None if absent; :class:`RecordError` if unreadable or malformed."""
        try:
            text = self.record_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise RecordError(f"{self.record_path}: cannot read ({exc.strerror})") from exc
        return EngineRecord.from_json(text, str(self.record_path))

    def write(self, record: EngineRecord) -> None:
        """Atomically: a reader sees the old record or the new one, never half of one."""
        self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write(self.record_path, record.to_json())

    def remove_if(self, record: EngineRecord) -> None:
        """Remove the record only if it still describes ``record``'s engine."""
        try:
            current = self.read()
        except RecordError:
            current = None
        if current is not None and (current.pid, current.container_id) != (
            record.pid,
            record.container_id,
        ):
            return
        try:
            self.record_path.unlink(missing_ok=True)
        except OSError as exc:
            # A read-only or failing state dir must not keep the engine "stopping": the
            # record left behind is harmless, as adoption checks the pid's start time.
            log.warning("%s could not be removed (%s): left behind", self.record_path, exc)

    def open_log(self) -> int:
        """An append-mode descriptor on ``engine.log`` (created 0600 if missing: prompts)."""
        self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        return os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def write_marker(self, fd: int, argv: tuple[str, ...]) -> None:
        """Note the launch in the log, so a restarted fleetd knows where its lines begin."""
        os.write(fd, (launch_marker(datetime.now(UTC), argv) + "\n").encode())


def record_for(
    spec: LaunchSpec, pid: int, start_time: float, container_id: str | None = None
) -> EngineRecord:
    """The record of a fresh launch of ``spec``."""
    return EngineRecord(
        pid=pid,
        start_time=start_time,
        argv=tuple(mask_argv(spec.argv)),  # the record is a file: no secrets in it
        spec_hash=spec_hash(spec),
        port=spec.port,
        mode=spec.mode,
        container_name=spec.container_name,
        host=spec.host,
        served_model_name=spec.served_model_name,
        recipe_hash=spec.recipe_hash,
        launched_at=now_iso(),
        container_id=container_id,
    )
