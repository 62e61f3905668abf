"""The simulated host's persistent state: boot id, boot time, fired steps, card overrides.

It lives in the daemon's state dir, not in the scenario, because a simulated host is a
host: restarting fleetd (with any scenario) is not a reboot, a timeline step that fired
stays fired, and a card that was lost stays lost until the simulated reboot. Every write
goes through ``hwcheck.atomic.atomic_write`` (temporary file, fsync, rename), so a
``kill -9`` at any moment leaves either the old state or the new one, never half of one.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from hwcheck.atomic import atomic_write
from hwcheck.sim.fields import CardValue, FieldError, check_card_field

BOOT_ID_FILE = "sim-boot-id"
STATE_FILE = "sim-state.json"
STATE_VERSION = 1


class SimStateError(ValueError):
    """The state files are unreadable or damaged; the message names the file."""


@dataclass
class HostState:
    """What the simulated host remembers for the current boot (mutable, under the rig's lock).

    ``card_overrides`` maps a card index to the fields changed at runtime (fault API,
    timeline steps, power limits set through the backend); a reboot clears it.
    ``booted_kernel``: the kernel a simulated reboot booted (the default entry then); None
    before the first reboot, when the scenario's running kernel is it.
    """

    boot_id: str
    booted_at: datetime
    fired_steps: list[str] = field(default_factory=list)
    card_overrides: dict[int, dict[str, CardValue]] = field(default_factory=dict)
    booted_kernel: str | None = None

    def to_json(self) -> dict[str, object]:
        """The ``sim-state.json`` document."""
        return {
            "version": STATE_VERSION,
            "boot_id": self.boot_id,
            "booted_at": self.booted_at.isoformat(),
            "fired_steps": list(self.fired_steps),
            "card_overrides": {
                str(index): dict(fields) for index, fields in sorted(self.card_overrides.items())
            },
            **({} if self.booted_kernel is None else {"booted_kernel": self.booted_kernel}),
        }

    @classmethod
    def from_json(cls, document: object, where: str) -> HostState:
        """Parse a ``sim-state.json`` document; ``SimStateError`` naming ``where`` if bad."""
        try:
            if not isinstance(document, dict):
                raise FieldError("", "expected a JSON object")
            version = document.get("version")
            if version != STATE_VERSION:
                raise FieldError("version", f"expected {STATE_VERSION}, got {version!r}")
            boot_id = document.get("boot_id")
            if not isinstance(boot_id, str):
                raise FieldError("boot_id", "expected a string")
            booted_raw = document.get("booted_at")
            if not isinstance(booted_raw, str):
                raise FieldError("booted_at", "expected an ISO 8601 time")
            try:
                booted_at = datetime.fromisoformat(booted_raw)
            except ValueError:
                raise FieldError("booted_at", f"not an ISO 8601 time: {booted_raw!r}") from None
            if booted_at.tzinfo is None:
                raise FieldError("booted_at", "has no UTC offset")
            fired = document.get("fired_steps", [])
            if not isinstance(fired, list) or not all(isinstance(k, str) for k in fired):
                raise FieldError("fired_steps", "expected a list of strings")
            raw_overrides = document.get("card_overrides", {})
            if not isinstance(raw_overrides, dict):
                raise FieldError("card_overrides", "expected an object")
            overrides: dict[int, dict[str, CardValue]] = {}
            for key, fields in raw_overrides.items():
                if not str(key).isdecimal() or not isinstance(fields, dict):
                    raise FieldError(f"card_overrides.{key}", "expected a card index and an object")
                overrides[int(key)] = {
                    name: check_card_field(f"card_overrides.{key}", name, value)
                    for name, value in fields.items()
                }
            booted_kernel = document.get("booted_kernel")
            if booted_kernel is not None and not isinstance(booted_kernel, str):
                raise FieldError("booted_kernel", "expected a string")
        except FieldError as exc:
            raise SimStateError(f"simulated host state {where}: {exc}") from None
        return cls(boot_id, booted_at, list(fired), overrides, booted_kernel)


class StateFiles:
    """Reads and writes ``sim-boot-id`` and ``sim-state.json`` in one state dir."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.boot_id_path = state_dir / BOOT_ID_FILE
        self.state_path = state_dir / STATE_FILE

    def prepare_dir(self) -> None:
        """Create the state dir (mode 0700) if it does not exist yet."""
        if self.state_dir.is_dir():
            return
        try:
            self.state_dir.mkdir(mode=0o700, parents=True)
            self.state_dir.chmod(0o700)  # mkdir's mode is masked by the umask
        except OSError as exc:
            raise SimStateError(
                f"simulated host state dir {self.state_dir}: cannot create it: "
                f"{exc.strerror or exc}"
            ) from None

    def _write(self, path: Path, text: str) -> None:
        try:
            atomic_write(path, text)
        except OSError as exc:
            raise SimStateError(
                f"simulated host state {path}: cannot write it: {exc.strerror or exc}"
            ) from None

    def read_boot_id(self) -> str | None:
        """The stored boot id, or ``None`` on a fresh state dir."""
        try:
            text = self.boot_id_path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise SimStateError(f"simulated boot id {self.boot_id_path}: {exc}") from None
        try:
            return str(uuid.UUID(text))
        except ValueError:
            raise SimStateError(
                f"simulated boot id {self.boot_id_path}: not a UUID: {text[:60]!r}"
            ) from None

    def write_boot_id(self, boot_id: str) -> None:
        """Store a new boot id (the simulated reboot, or the first start)."""
        self._write(self.boot_id_path, boot_id + "\n")

    def read_state(self) -> HostState | None:
        """The stored state, or ``None`` when there is none yet."""
        try:
            text = self.state_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise SimStateError(f"simulated host state {self.state_path}: {exc}") from None
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SimStateError(
                f"simulated host state {self.state_path}: not JSON: {exc}"
            ) from None
        return HostState.from_json(document, str(self.state_path))

    def write_state(self, state: HostState) -> None:
        """Store ``state`` atomically."""
        self._write(self.state_path, json.dumps(state.to_json(), indent=2) + "\n")
