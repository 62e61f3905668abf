"""The NVML backend: reads every card and sets power limits through nvidia-ml-py.

This is the only module that touches ``pynvml`` (ruff's banned-api keeps it that way). It
follows nvitop's ``libnvml.py`` gateway (one place that loads and initialises the library,
lazily, under a lock, and through which every call goes), but instead of returning "N/A" it
tells three outcomes apart, because the daemon must react to them differently:

- *not available* (``NotSupported`` and kin): normal on CMP cards, the field is ``None``;
- *lost* (``GpuIsLost``, ``ResetRequired``, ``Unknown``, a call that does not return): an
  incident, the card comes back with ``lost=True`` and a reason; the rest of the rig is
  still read;
- *unavailable* (no library, driver not loaded, NVML not answering at all): the backend
  raises ``BackendUnavailable`` with one line saying what to do.

Every call runs on a worker thread with a time limit (see ``hwcheck.timed_calls``): a sick
GPU can block NVML for 45 s and a call into C cannot be cancelled, so the caller stops
waiting, the card is marked lost, and that card is not called again until the stuck call
has returned.
"""

from __future__ import annotations

import atexit
import enum
import importlib
import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

from hwcheck.backend import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    CardLostError,
    PowerLimitError,
)
from hwcheck.model import GpuSnapshot, RigSnapshot, normalize_pci_bus_id
from hwcheck.nvml_errors import NvmlDown, nvml_unavailable
from hwcheck.timed_calls import CallTimedOut, TimedCaller, TooManyStuckCalls

logger = logging.getLogger(__name__)

# Every ``pynvml`` attribute this module reads; a test checks it against the source (an
# ``ast`` scan) and against the installed nvidia-ml-py, so a typo or an unlisted call fails.
NVML_NAMES_USED: tuple[str, ...] = (
    "NVMLError",
    "NVMLError_DriverNotLoaded",
    "NVMLError_FunctionNotFound",
    "NVMLError_GpuIsLost",
    "NVMLError_InvalidArgument",
    "NVMLError_LibRmVersionMismatch",
    "NVMLError_LibraryNotFound",
    "NVMLError_NoData",
    "NVMLError_NoPermission",
    "NVMLError_NotFound",
    "NVMLError_NotSupported",
    "NVMLError_ResetRequired",
    "NVMLError_Timeout",
    "NVMLError_Unknown",
    "NVML_CLOCK_MEM",
    "NVML_CLOCK_SM",
    "NVML_FEATURE_ENABLED",
    "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION",
    "NVML_FI_DEV_MEMORY_TEMP",
    "NVML_SUCCESS",
    "NVML_TEMPERATURE_GPU",
    "NVML_VALUE_TYPE_DOUBLE",
    "NVML_VALUE_TYPE_SIGNED_INT",
    "NVML_VALUE_TYPE_SIGNED_LONG_LONG",
    "NVML_VALUE_TYPE_UNSIGNED_INT",
    "NVML_VALUE_TYPE_UNSIGNED_LONG",
    "NVML_VALUE_TYPE_UNSIGNED_LONG_LONG",
    "NVML_VALUE_TYPE_UNSIGNED_SHORT",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetCount",
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
    "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetFanSpeed",
    "nvmlDeviceGetFieldValues",
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkWidth",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetName",
    "nvmlDeviceGetPciInfo",
    "nvmlDeviceGetPersistenceMode",
    "nvmlDeviceGetPowerManagementDefaultLimit",
    "nvmlDeviceGetPowerManagementLimit",
    "nvmlDeviceGetPowerManagementLimitConstraints",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetSerial",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetTemperatureV",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetVbiosVersion",
    "nvmlDeviceSetPowerManagementLimit",
    "nvmlInit",
    "nvmlShutdown",
    "nvmlSystemGetDriverVersion",
    "nvmlSystemGetNVMLVersion",
)

MIB = 1024 * 1024
GPU_RECOVERY_ACTION_FIELD_ID = 230  # NVML_FI_DEV_GET_GPU_RECOVERY_ACTION in R565+ headers
MODULE_MISSING_MESSAGE = (
    "NVML library not found: install nvidia-ml-py and the NVIDIA driver (libnvidia-ml.so.1)"
)
MODULE_MISSING_REMEDY = "pip install nvidia-ml-py in fleetd's environment; install the driver"


class _Kind(enum.Enum):
    """What an NVML error on one reading means for the card."""

    ABSENT = "absent"  # the card or driver cannot report it: the field is None
    LOST = "lost"  # the card stopped answering: an incident
    OTHER = "other"  # unexpected for a read: the field is None and a warning is logged


class _CardLost(Exception):
    """Internal: stop reading this card, it is lost (never leaves this module)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class _Identity:
    """What a card was last known as, so a lost card still says which one it is."""

    pci_bus_id: str = ""
    uuid: str = ""
    name: str = ""
    serial: str | None = None


@dataclass(frozen=True, slots=True)
class _StuckCall:
    """A call on a card that timed out and whose worker has not returned yet."""

    call: str
    timeout_s: float
    pending: Future[Any]

    def reason(self) -> str:
        return f"NVML call {self.call} timed out after {self.timeout_s:g} s"


class NvmlBackend:
    """``GpuBackend`` over NVML. ``nvml`` is the ``pynvml`` module (a fake in tests).

    ``import_module`` loads ``pynvml`` when ``nvml`` is None, at first use; it is a
    parameter so the "module missing" path is testable without patching.
    """

    name = "nvml"

    def __init__(
        self,
        nvml: ModuleType | None = None,
        call_timeout_s: float = 10.0,
        import_module: Callable[[str], ModuleType] = importlib.import_module,
        max_stuck_calls: int = 16,
    ) -> None:
        if not (isinstance(call_timeout_s, int | float) and call_timeout_s > 0):
            raise ValueError(f"call_timeout_s must be a positive number, got {call_timeout_s!r}")
        self._given = nvml
        self._import_module = import_module
        self._call_timeout_s = float(call_timeout_s)
        self._caller = TimedCaller("nvml-call", max_stuck=max_stuck_calls)
        self._init_lock = threading.Lock()
        self._ready: ModuleType | None = None
        self._closed = False
        self._state_lock = threading.Lock()
        self._identities: dict[int, _Identity] = {}
        self._stuck: dict[int, _StuckCall] = {}
        self._warned: set[tuple[int, str, int]] = set()

    # -- the gateway -------------------------------------------------------------------

    def _ensure_ready(self) -> ModuleType:
        """Load and initialise NVML once (first caller wins, the others wait on the lock)."""
        with self._init_lock:
            if self._closed:
                raise BackendUnavailable("the NVML backend was closed")
            if self._ready is not None:
                return self._ready
            nvml = self._load_module()
            try:
                self._call(None, nvml.nvmlInit)
            except BackendTimeout as exc:
                raise nvml_unavailable(NvmlDown.NOT_ANSWERING, str(exc)) from exc
            except nvml.NVMLError as exc:
                raise _init_failure(nvml, exc) from exc
            atexit.register(self.close)
            self._ready = nvml
            return nvml

    def _load_module(self) -> ModuleType:
        if self._given is not None:
            return self._given
        try:
            return self._import_module("pynvml")
        except ImportError as exc:
            raise BackendUnavailable(MODULE_MISSING_MESSAGE, remedy=MODULE_MISSING_REMEDY) from exc

    def _call(self, card: int | None, fn: Callable[..., Any], *args: Any) -> Any:
        """Run one NVML call on the worker with the time limit (the only way to call)."""
        call = _call_name(fn)
        try:
            return self._caller.call(lambda: fn(*args), self._call_timeout_s)
        except CallTimedOut as exc:
            where = "" if card is None else f" on card {card}"
            if card is not None:
                stuck = _StuckCall(call, exc.timeout_s, exc.pending)
                with self._state_lock:
                    self._stuck[card] = stuck
            raise BackendTimeout(
                f"NVML call {call}{where} timed out after {exc.timeout_s:g} s"
            ) from exc
        except TooManyStuckCalls as exc:
            raise nvml_unavailable(NvmlDown.NOT_ANSWERING, str(exc)) from exc

    def _still_stuck(self, card: int) -> _StuckCall | None:
        """The earlier call on ``card`` that has still not returned, if any."""
        with self._state_lock:
            stuck = self._stuck.get(card)
            if stuck is not None and stuck.pending.done():
                del self._stuck[card]
                return None
            return stuck

    # -- the protocol ------------------------------------------------------------------

    def device_count(self) -> int:
        """How many cards NVML sees; raises ``BackendUnavailable`` when it cannot say."""
        nvml = self._ensure_ready()
        return int(self._rig_call(nvml, nvml.nvmlDeviceGetCount))

    def snapshot(self) -> RigSnapshot:
        """Read every card once; a lost card is reported, never raised."""
        nvml = self._ensure_ready()
        taken_at = datetime.now(UTC)
        monotonic_s = time.monotonic()
        count = int(self._rig_call(nvml, nvml.nvmlDeviceGetCount))
        driver_version = _text(self._rig_optional(nvml, nvml.nvmlSystemGetDriverVersion))
        nvml_version = _text(self._rig_optional(nvml, nvml.nvmlSystemGetNVMLVersion))
        cards = tuple(self._read_card(nvml, index, driver_version) for index in range(count))
        return RigSnapshot(
            taken_at=taken_at,
            monotonic_s=monotonic_s,
            cards=cards,
            driver_version=driver_version,
            nvml_version=nvml_version,
        )

    def set_power_limit(self, index: int, watts: float) -> None:
        """Set card ``index``'s power limit in W (root; lost at reboot and GPU reset)."""
        if isinstance(watts, bool) or not isinstance(watts, int | float):
            raise PowerLimitError(f"power limit must be a number of watts, got {watts!r}")
        if not (math.isfinite(watts) and watts > 0):
            raise PowerLimitError(f"power limit must be a positive number of watts, got {watts}")
        if index < 0:
            raise PowerLimitError(f"card index must be 0 or more, got {index}")
        nvml = self._ensure_ready()
        stuck = self._still_stuck(index)
        if stuck is not None:
            raise CardLostError(index, f"{stuck.reason()} and has not returned")
        handle = self._power_handle(nvml, index)
        try:
            self._call(index, nvml.nvmlDeviceSetPowerManagementLimit, handle, round(watts * 1000))
        except nvml.NVMLError as exc:
            raise self._power_error(nvml, index, watts, handle, exc) from exc

    def close(self) -> None:
        """Shut NVML down once; later calls raise ``BackendUnavailable``."""
        with self._init_lock:
            if self._closed:
                return
            self._closed = True
            nvml, self._ready = self._ready, None
        atexit.unregister(self.close)
        if nvml is not None:
            try:
                self._call(None, nvml.nvmlShutdown)
            except BackendError as exc:
                logger.warning("NVML shutdown did not complete: %s", exc)
            except nvml.NVMLError as exc:
                logger.warning("NVML shutdown failed: %s", _error_text(exc))
        self._caller.close()

    # -- rig-wide readings -------------------------------------------------------------

    def _rig_call(self, nvml: ModuleType, fn: Callable[..., Any]) -> Any:
        """A reading without which nothing can be read: any failure is ``BackendUnavailable``."""
        try:
            return self._call(None, fn)
        except BackendTimeout as exc:
            raise nvml_unavailable(NvmlDown.NOT_ANSWERING, str(exc)) from exc
        except nvml.NVMLError as exc:
            raise BackendUnavailable(
                f"NVML call {_call_name(fn)} failed: {_error_text(exc)}",
                remedy=_remedy(NvmlDown.OTHER),
            ) from exc

    def _rig_optional(self, nvml: ModuleType, fn: Callable[..., Any]) -> Any:
        """A rig-wide reading that may be missing (None), but not stuck."""
        try:
            return self._call(None, fn)
        except BackendTimeout as exc:
            raise nvml_unavailable(NvmlDown.NOT_ANSWERING, str(exc)) from exc
        except nvml.NVMLError as exc:
            if _classify(nvml, exc) is not _Kind.ABSENT:
                logger.warning("NVML call %s failed: %s", _call_name(fn), _error_text(exc))
            return None

    # -- one card ----------------------------------------------------------------------

    def _read_card(self, nvml: ModuleType, index: int, driver_version: str | None) -> GpuSnapshot:
        stuck = self._still_stuck(index)
        if stuck is not None:
            return self._lost_card(index, f"{stuck.reason()} and has not returned")
        try:
            handle = self._card_handle(nvml, index)
            return GpuSnapshot(
                index=index,
                driver_version=driver_version,
                **self._read_identity(nvml, index, handle),
                **self._read_memory(nvml, index, handle),
                **self._read_power(nvml, index, handle),
                **self._read_clocks(nvml, index, handle),
                **self._read_thermal(nvml, index, handle),
                **self._read_pcie(nvml, index, handle),
                recovery_action=self._read_recovery_action(nvml, index, handle),
            )
        except _CardLost as lost:
            logger.warning("card %d is lost: %s", index, lost.reason)
            return self._lost_card(index, lost.reason)

    def _lost_card(self, index: int, reason: str) -> GpuSnapshot:
        with self._state_lock:
            known = self._identities.get(index, _Identity())
        return GpuSnapshot(
            index=index,
            pci_bus_id=known.pci_bus_id,
            uuid=known.uuid,
            name=known.name,
            serial=known.serial,
            lost=True,
            lost_reason=reason,
        )

    def _card_handle(self, nvml: ModuleType, index: int) -> Any:
        """The card's handle; a card NVML will not hand out cannot be read at all."""
        try:
            return self._call(index, nvml.nvmlDeviceGetHandleByIndex, index)
        except BackendTimeout as exc:
            raise _CardLost(self._timeout_reason(index, exc)) from exc
        except nvml.NVMLError as exc:
            raise _CardLost(_error_text(exc)) from exc

    def _read(self, nvml: ModuleType, index: int, fn: Callable[..., Any], *args: Any) -> Any:
        """One reading of card ``index``: its value, or None when it is not available."""
        return self._read_first(nvml, index, (fn,), *args)

    def _read_first(
        self,
        nvml: ModuleType,
        index: int,
        fns: tuple[Callable[..., Any] | None, ...],
        *args: Any,
    ) -> Any:
        """Like ``_read``, trying each function in turn while the driver lacks it.

        Covers renamed calls (clock *event* vs *throttle* reasons, ``GetTemperature`` vs
        ``GetTemperatureV``): ``None`` entries are functions this ``pynvml`` does not have.
        """
        available = [fn for fn in fns if fn is not None]
        for position, fn in enumerate(available):
            try:
                return self._call(index, fn, *args)
            except BackendTimeout as exc:
                raise _CardLost(self._timeout_reason(index, exc)) from exc
            except nvml.NVMLError as exc:
                last = position == len(available) - 1
                if isinstance(exc, nvml.NVMLError_FunctionNotFound) and not last:
                    continue
                kind = _classify(nvml, exc)
                if kind is _Kind.LOST:
                    raise _CardLost(_error_text(exc)) from exc
                if kind is _Kind.OTHER:
                    self._warn_once(index, _call_name(fn), exc)
                return None
        return None

    def _timeout_reason(self, index: int, exc: BackendTimeout) -> str:
        with self._state_lock:
            stuck = self._stuck.get(index)
        return stuck.reason() if stuck is not None else str(exc)

    def _warn_once(self, index: int, call: str, exc: Exception) -> None:
        key = (index, call, int(getattr(exc, "value", -1)))
        with self._state_lock:
            if key in self._warned:
                return
            self._warned.add(key)
        logger.warning("card %d: NVML call %s failed: %s", index, call, _error_text(exc))

    def _remember(self, index: int, **seen: str | None) -> None:
        """Update what card ``index`` is known as with the identity fields just read."""
        with self._state_lock:
            known = self._identities.get(index, _Identity())
            updates = {key: value for key, value in seen.items() if value}
            self._identities[index] = replace(known, **updates)

    def _read_identity(self, nvml: ModuleType, index: int, handle: Any) -> dict[str, Any]:
        pci = self._read(nvml, index, nvml.nvmlDeviceGetPciInfo, handle)
        pci_bus_id = None if pci is None else _bus_id(_text(pci.busId))
        self._remember(index, pci_bus_id=pci_bus_id)
        uuid = _text(self._read(nvml, index, nvml.nvmlDeviceGetUUID, handle))
        self._remember(index, uuid=uuid)
        name = _text(self._read(nvml, index, nvml.nvmlDeviceGetName, handle))
        serial = _text(self._read(nvml, index, nvml.nvmlDeviceGetSerial, handle))
        self._remember(index, name=name, serial=serial)
        vbios = _text(self._read(nvml, index, nvml.nvmlDeviceGetVbiosVersion, handle))
        with self._state_lock:
            known = self._identities[index]
        return {
            "pci_bus_id": known.pci_bus_id,
            "uuid": known.uuid,
            "name": known.name,
            "serial": serial,
            "pci_device_id": None if pci is None else (int(pci.pciDeviceId) >> 16) & 0xFFFF,
            "vbios_version": vbios,
        }

    def _read_memory(self, nvml: ModuleType, index: int, handle: Any) -> dict[str, Any]:
        memory = self._read(nvml, index, nvml.nvmlDeviceGetMemoryInfo, handle)
        if memory is None:
            return {}
        return {
            "memory_total_mib": int(memory.total) // MIB,
            "memory_used_mib": int(memory.used) // MIB,
        }

    def _read_power(self, nvml: ModuleType, index: int, handle: Any) -> dict[str, Any]:
        def read_w(fn: Callable[..., Any]) -> float | None:
            return _watts(self._read(nvml, index, fn, handle))

        constraints = self._read(
            nvml, index, nvml.nvmlDeviceGetPowerManagementLimitConstraints, handle
        )
        min_mw, max_mw = (None, None) if constraints is None else constraints
        return {
            "power_draw_w": read_w(nvml.nvmlDeviceGetPowerUsage),
            "power_limit_w": read_w(nvml.nvmlDeviceGetPowerManagementLimit),
            "power_enforced_limit_w": read_w(nvml.nvmlDeviceGetEnforcedPowerLimit),
            "power_default_limit_w": read_w(nvml.nvmlDeviceGetPowerManagementDefaultLimit),
            "power_min_limit_w": _watts(min_mw),
            "power_max_limit_w": _watts(max_mw),
        }

    def _read_clocks(self, nvml: ModuleType, index: int, handle: Any) -> dict[str, Any]:
        reasons = self._read_first(
            nvml,
            index,
            (
                getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None),
                getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None),
            ),
            handle,
        )
        clock = nvml.nvmlDeviceGetClockInfo
        return {
            "clock_event_reasons": _optional_int(reasons),
            "sm_clock_mhz": _optional_int(
                self._read(nvml, index, clock, handle, nvml.NVML_CLOCK_SM)
            ),
            "memory_clock_mhz": _optional_int(
                self._read(nvml, index, clock, handle, nvml.NVML_CLOCK_MEM)
            ),
        }

    def _read_thermal(self, nvml: ModuleType, index: int, handle: Any) -> dict[str, Any]:
        temperature = self._read_first(
            nvml,
            index,
            (
                getattr(nvml, "nvmlDeviceGetTemperature", None),
                getattr(nvml, "nvmlDeviceGetTemperatureV", None),
            ),
            handle,
            nvml.NVML_TEMPERATURE_GPU,
        )
        memory_field = getattr(nvml, "NVML_FI_DEV_MEMORY_TEMP", None)
        memory_temperature = (
            None if memory_field is None else self._field_value(nvml, index, handle, memory_field)
        )
        return {
            "temperature_c": _optional_float(temperature),
            "memory_temperature_c": _optional_float(memory_temperature),
            "fan_speed_pct": _optional_int(
                self._read(nvml, index, nvml.nvmlDeviceGetFanSpeed, handle)
            ),
        }

    def _read_pcie(self, nvml: ModuleType, index: int, handle: Any) -> dict[str, Any]:
        def read_int(fn: Callable[..., Any]) -> int | None:
            return _optional_int(self._read(nvml, index, fn, handle))

        persistence = self._read(nvml, index, nvml.nvmlDeviceGetPersistenceMode, handle)
        return {
            "pcie_gen_current": read_int(nvml.nvmlDeviceGetCurrPcieLinkGeneration),
            "pcie_width_current": read_int(nvml.nvmlDeviceGetCurrPcieLinkWidth),
            "pcie_gen_max": read_int(nvml.nvmlDeviceGetMaxPcieLinkGeneration),
            "pcie_width_max": read_int(nvml.nvmlDeviceGetMaxPcieLinkWidth),
            "persistence_mode": (
                None if persistence is None else persistence == nvml.NVML_FEATURE_ENABLED
            ),
        }

    def _read_recovery_action(self, nvml: ModuleType, index: int, handle: Any) -> int | None:
        """The driver's advised recovery (R565+); older modules lack the constant, not the field."""
        field_id = getattr(
            nvml, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", GPU_RECOVERY_ACTION_FIELD_ID
        )
        return _optional_int(self._field_value(nvml, index, handle, int(field_id)))

    def _field_value(
        self, nvml: ModuleType, index: int, handle: Any, field_id: int
    ) -> float | int | None:
        """One field of the field-values API; None when the driver does not know it."""
        values = self._read(nvml, index, nvml.nvmlDeviceGetFieldValues, handle, [field_id])
        if values is None:
            return None
        entry = values[0]
        if entry.nvmlReturn != nvml.NVML_SUCCESS:
            return None
        return _field_number(nvml, entry)

    # -- power limit errors ------------------------------------------------------------

    def _power_handle(self, nvml: ModuleType, index: int) -> Any:
        try:
            return self._call(index, nvml.nvmlDeviceGetHandleByIndex, index)
        except nvml.NVMLError as exc:
            if isinstance(exc, nvml.NVMLError_InvalidArgument | nvml.NVMLError_NotFound):
                raise PowerLimitError(f"there is no card {index}") from exc
            if _classify(nvml, exc) is _Kind.LOST:
                raise CardLostError(index, _error_text(exc)) from exc
            raise PowerLimitError(f"cannot open card {index}: {_error_text(exc)}") from exc

    def _power_error(
        self, nvml: ModuleType, index: int, watts: float, handle: Any, exc: Exception
    ) -> BackendError:
        if isinstance(exc, nvml.NVMLError_NoPermission):
            return PowerLimitError(
                f"setting the power limit of card {index} needs root (NVML: no permission); "
                "run fleetctl/fleetd as root"
            )
        if isinstance(exc, nvml.NVMLError_NotSupported):
            return PowerLimitError(f"card {index} does not support power limits")
        if isinstance(exc, nvml.NVMLError_InvalidArgument):
            return PowerLimitError(
                f"card {index} refused a power limit of {watts:g} W: "
                f"{self._allowed_range(nvml, index, handle)}"
            )
        if _classify(nvml, exc) is _Kind.LOST:
            return CardLostError(index, _error_text(exc))
        return PowerLimitError(
            f"setting the power limit of card {index} to {watts:g} W failed: {_error_text(exc)}"
        )

    def _allowed_range(self, nvml: ModuleType, index: int, handle: Any) -> str:
        try:
            min_mw, max_mw = self._call(
                index, nvml.nvmlDeviceGetPowerManagementLimitConstraints, handle
            )
        except BackendError as exc:
            return f"its allowed range could not be read ({exc})"
        except nvml.NVMLError as exc:
            return f"its allowed range could not be read ({_error_text(exc)})"
        return f"it allows {min_mw / 1000:g}..{max_mw / 1000:g} W"


# -- small pure helpers ------------------------------------------------------------------


def _classify(nvml: ModuleType, exc: Exception) -> _Kind:
    absent = (
        nvml.NVMLError_NotSupported,
        nvml.NVMLError_NotFound,
        nvml.NVMLError_NoData,
        nvml.NVMLError_FunctionNotFound,
    )
    lost = (
        nvml.NVMLError_GpuIsLost,
        nvml.NVMLError_ResetRequired,
        nvml.NVMLError_Unknown,
        nvml.NVMLError_Timeout,
    )
    if isinstance(exc, absent):
        return _Kind.ABSENT
    if isinstance(exc, lost):
        return _Kind.LOST
    return _Kind.OTHER


def _init_failure(nvml: ModuleType, exc: Exception) -> BackendUnavailable:
    """A failed ``nvmlInit`` as one reason line and its remedy."""
    kinds = (
        (nvml.NVMLError_DriverNotLoaded, NvmlDown.DRIVER_NOT_LOADED),
        (nvml.NVMLError_LibraryNotFound, NvmlDown.LIBRARY_NOT_FOUND),
        (nvml.NVMLError_LibRmVersionMismatch, NvmlDown.LIB_RM_VERSION_MISMATCH),
        (nvml.NVMLError_NoPermission, NvmlDown.NO_PERMISSION),
    )
    kind = next((kind for cls, kind in kinds if isinstance(exc, cls)), NvmlDown.OTHER)
    return nvml_unavailable(kind, _error_text(exc))


def _remedy(kind: NvmlDown) -> str:
    return nvml_unavailable(kind).remedy


def _error_text(exc: Exception) -> str:
    """``GPU is lost (NVML error 15)``: NVML's words plus the code, for logs and reasons."""
    code = getattr(exc, "value", None)
    return f"{exc} (NVML error {code})" if code is not None else str(exc)


def _call_name(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__name__", repr(fn)))


def _text(value: Any) -> str | None:
    """NVML strings come back as ``bytes`` from older modules and ``str`` from newer."""
    if value is None:
        return None
    if isinstance(value, bytes | bytearray):
        value = bytes(value).decode("utf-8", errors="replace")
    return str(value).strip().strip("\x00") or None


def _bus_id(raw: str | None) -> str | None:
    if raw is None:
        return None
    try:
        return normalize_pci_bus_id(raw)
    except ValueError:
        logger.warning("NVML returned a PCI bus id that is not an address: %r", raw)
        return raw.lower()


def _watts(milliwatts: Any) -> float | None:
    return None if milliwatts is None else int(milliwatts) / 1000.0


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _field_number(nvml: ModuleType, entry: Any) -> float | int | None:
    """The number in an ``nvmlFieldValue_t``, read through the union member its type names."""
    value_type = entry.valueType
    value = entry.value
    if value_type == nvml.NVML_VALUE_TYPE_DOUBLE:
        return float(value.dVal)
    members = {
        nvml.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
        nvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
        nvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
        nvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
        nvml.NVML_VALUE_TYPE_SIGNED_INT: "siVal",
        nvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: "usVal",
    }
    member = members.get(value_type)
    if member is None:
        logger.warning("NVML field %s has an unknown value type %s", entry.fieldId, value_type)
        return None
    return int(getattr(value, member))
