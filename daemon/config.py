"""fleetd's configuration: TOML file < ``CMPFLEET_*`` environment < command-line flags.

Every section and key is optional (an empty or absent file is valid). Validation is
strict: an unknown key, a wrong type or an out-of-range value is a ``ConfigError`` whose
message is one line naming the file, the key and the problem, so fleetd can refuse to
start before touching anything. Settings are passed explicitly; there is no global.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from daemon import defaults
from daemon.config_bounds import first_problem
from hwcheck.atomic import NotARegularFile
from hwcheck.carddiag.settings import DiagSettings
from hwcheck.checks import KNOWN_CHECK_IDS
from hwcheck.hostfacts.baseline import HostBaseline
from hwcheck.kernellog.catalogue import XidCatalogue, XidOverride, overrides_by_xid
from hwcheck.model import RigProfile
from hwcheck.regular_file import read_regular
from recovery.settings import RecoverySettings
from serving.canary.settings import CanarySettings
from serving.evidence.settings import EvidenceSettings
from serving.guard.settings import GuardSettings
from serving.settings import ServingSettings

# Defined in daemon.defaults, which fleetctl reads without importing this module.
DEFAULT_CONFIG_PATH = defaults.DEFAULT_CONFIG_PATH
DEFAULT_STATE_DIR = defaults.DEFAULT_STATE_DIR
DEFAULT_LISTEN = defaults.DEFAULT_LISTEN
ENV_PREFIX = "CMPFLEET_"


class ConfigError(Exception):
    """A config problem, already phrased as the one line a person reads."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# Below this a poll cannot finish before the next is due (NVML reads, checks, a store
# write): 0.0001 s only spins the CPU and floods the store.
MIN_POLL_INTERVAL_S = 0.1


class PollSettings(_Section):
    """How often fleetd reads the cards and where it reads the kernel log."""

    interval_s: Annotated[float, Field(ge=MIN_POLL_INTERVAL_S, le=3600)] = 2.0
    nvml_timeout_s: Annotated[float, Field(gt=0, le=600)] = 10.0
    rollup_interval_s: Annotated[float, Field(gt=0, le=86400)] = 60.0
    kernel_log: Literal["auto", "kmsg", "journal", "file"] = "auto"
    kernel_log_file: str | None = None
    # A kernel-log follower down this long stops the watchdog pings (systemd restarts
    # fleetd); 0 never does.
    kernel_log_down_watchdog_s: Annotated[float, Field(ge=0, le=86400)] = 300.0


class WebSettings(_Section):
    """The HTTP listener (API, dashboard, metrics)."""

    listen: str = DEFAULT_LISTEN
    # On a loopback listener only requests addressed to loopback names or this machine's
    # name are served (DNS rebinding); a reverse proxy keeping the client's Host adds it here.
    allowed_hosts: list[str] = []

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not name.strip() or any(c.isspace() or c in "/:@" for c in name.strip()):
                raise ValueError(f"expected host names without port or scheme, got {name!r}")
        return [name.strip().lower() for name in value]

    @field_validator("listen")
    @classmethod
    def _host_port(cls, value: str) -> str:
        host, sep, port = value.rpartition(":")
        if not sep or not host or not port.isdecimal() or not 0 < int(port) < 65536:
            raise ValueError(f"expected HOST:PORT, got {value!r}")
        return value


class StoreSettings(_Section):
    """Where history lives and for how long."""

    url: str | None = None
    raw_retention_h: Annotated[float, Field(gt=0)] = 48.0
    rollup_retention_days: Annotated[float, Field(gt=0)] = 90.0

    @field_validator("url")
    @classmethod
    def _usable_url(cls, value: str | None) -> str | None:
        """Vet the URL as the store will (without connecting), so the error names the key.

        Found here, a bad URL is one line with the file and ``store.url`` before anything
        starts, instead of a store error at start-up that does not say where it was set.
        """
        if value is None:
            return value
        from daemon.store.db import StoreError, build_engines

        try:
            build_engines(value).read.dispose()  # parses, loads the dialect; connects lazily
        except StoreError as exc:
            raise ValueError(str(exc)) from None
        return value


class WebhookSettings(_Section):
    """One alert destination (``[[alerts.webhooks]]``)."""

    url: str
    name: (
        Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")] | None
    ) = None
    format: Literal["json", "alertmanager", "slack", "discord", "alertmanager_api"] = "json"
    secret: Annotated[str, Field(min_length=1)] | None = None
    # A file holding the secret (first line), so the config itself can stay world-readable.
    secret_file: str | None = None
    min_severity: Literal["info", "warning", "critical"] = "warning"
    timeout_s: Annotated[float, Field(gt=0, le=300)] = 10.0

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        scheme, sep, rest = value.partition("://")
        if not sep or scheme.lower() not in ("http", "https") or not rest.split("/")[0]:
            raise ValueError("expected an http:// or https:// URL with a host")
        return value

    @model_validator(mode="after")
    def _one_secret(self) -> WebhookSettings:
        if self.secret is not None and self.secret_file is not None:
            raise ValueError("give secret or secret_file, not both")
        return self


class AlertSettings(_Section):
    """Alerting: where alerts go (``webhooks``) and the timing of delivery and repeats."""

    webhooks: list[WebhookSettings] = Field(default_factory=list)
    # Longest pause between two delivery tries of one notification (backoff cap).
    retry_max_s: Annotated[float, Field(gt=0)] = 30.0
    # The first pause after a failed try; it doubles each try (with jitter) up to retry_max_s.
    retry_min_s: Annotated[float, Field(gt=0)] = 1.0
    # A notification still undelivered after this long is given up (recorded, not sent).
    max_age_s: Annotated[float, Field(gt=0)] = 86400.0
    # A critical alert still firing is sent again this often.
    repeat_interval_s: Annotated[float, Field(gt=0)] = 14400.0
    # Firings of an open alert fold into it; a resolve waits this long in case it fires again.
    group_window_s: Annotated[float, Field(ge=0)] = 60.0

    @model_validator(mode="after")
    def _unique_names(self) -> AlertSettings:
        names = [hook.name for hook in self.webhooks if hook.name is not None]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"webhook name {duplicates[0]!r} is used twice")
        if self.retry_min_s > self.retry_max_s:
            raise ValueError("retry_min_s must not exceed retry_max_s")
        return self


class Settings(_Section):
    """The whole configuration, one object handed to whoever needs it."""

    rig: RigProfile = Field(default_factory=RigProfile)
    poll: PollSettings = Field(default_factory=PollSettings)
    serving: ServingSettings = Field(default_factory=ServingSettings)
    recovery: RecoverySettings = Field(default_factory=RecoverySettings)
    web: WebSettings = Field(default_factory=WebSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    alerts: AlertSettings = Field(default_factory=AlertSettings)
    canary: CanarySettings = Field(default_factory=CanarySettings)
    guard: GuardSettings = Field(default_factory=GuardSettings)
    diag: DiagSettings = Field(default_factory=DiagSettings)
    evidence: EvidenceSettings = Field(default_factory=EvidenceSettings)
    xid: dict[str, XidOverride] = Field(default_factory=dict)
    # The host baseline's pins (any key wins over the recorded baseline) and its knob.
    host: HostBaseline = Field(default_factory=HostBaseline)

    @field_validator("xid")
    @classmethod
    def _xid_keys(cls, value: dict[str, XidOverride]) -> dict[str, XidOverride]:
        overrides_by_xid(value)  # the catalogue's own check of the keys, before anything starts
        return value


def _location(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts[-1:] = [f"{parts[-1]}[{item}]"] if parts else [f"[{item}]"]
        else:
            parts.append(item)
    return ".".join(parts)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The settings model a field holds (itself, or inside ``list[...]``/``... | None``)."""
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _did_you_mean(loc: tuple[int | str, ...]) -> str:
    """`` (did you mean 'power_cap_w'?)`` for a misspelt key, from the section's own fields."""
    model: type[BaseModel] | None = Settings
    keyed = False  # the part after a table of tables ([host.cards."<address>"]) is its key
    for part in loc[:-1]:
        if isinstance(part, int) or keyed:
            keyed = False
            continue  # an item of a list of tables, or a key of a table of tables: same model
        field = model.model_fields.get(part) if model is not None else None
        model = _model_in(field.annotation) if field is not None else None
        keyed = field is not None and get_origin(field.annotation) is dict
    if model is None:
        return ""
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _plain(msg: str) -> str:
    """Pydantic's wording without its internals: no "Value error, ", no model class names."""
    msg = msg.removeprefix("Value error, ")
    if msg.startswith("Input should be a valid dictionary"):
        return "expected a table"
    return msg


def _first_error(exc: ValidationError) -> Any:
    """The problem to name: an unknown key first (a misspelt key also makes one "missing")."""
    return min(exc.errors(), key=lambda err: err["type"] != "extra_forbidden")


def _one_line(source: str, exc: ValidationError) -> str:
    err = _first_error(exc)
    key = _location(tuple(err["loc"]))
    if err["type"] == "extra_forbidden":
        return f"{source}: unknown key '{key}'{_did_you_mean(tuple(err['loc']))}"
    more = len(exc.errors()) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    got = err.get("input")
    if key.endswith("url") and isinstance(got, str):
        from daemon.store.db import mask_url

        got = mask_url(got)  # a database or webhook URL may carry a password
    # A webhook URL is itself a credential (Slack and Discord keep the key in its path).
    webhook_url = key.startswith("alerts.webhooks") and key.endswith("url")
    hidden = (
        isinstance(got, dict | list)
        or key.endswith("secret")
        or key.startswith("guard.keys")  # a key pasted where its hash goes
        or webhook_url
        or repr(got) in err["msg"]
    )
    shown = "" if hidden else f" (got {got!r})"  # a webhook secret is never echoed
    return f"{source}: {key}: {_plain(err['msg'])}{shown}{suffix}"


def read_toml(path: Path) -> dict[str, Any]:
    """Read a TOML file, turning every failure into one ``ConfigError`` line."""
    try:
        # A regular file only, bounded: a FIFO or a device never hangs or floods fleetd.
        text = read_regular(path).decode("utf-8-sig")  # editors on Windows add a BOM
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: no such file") from exc
    except NotARegularFile as exc:
        raise ConfigError(f"{path}: is {exc.what}, not a config file") from None
    except PermissionError as exc:
        raise ConfigError(f"{path}: cannot read: permission denied") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}): "
            "is it the config file?"
        ) from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc


def _env_value(raw: str) -> Any:
    """Parse an environment value as a TOML literal when it is one, else a string."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def _env_overrides(environ: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """``CMPFLEET_POLL_INTERVAL_S=1`` -> ``{"poll": {"interval_s": 1}}``."""
    sections = (
        "rig",
        "poll",
        "serving",
        "recovery",
        "web",
        "store",
        "alerts",
        "canary",
        "host",
        "guard",
    )
    out: dict[str, dict[str, Any]] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        rest = name[len(ENV_PREFIX) :].lower()
        for section in sections:
            if rest.startswith(section + "_"):
                out.setdefault(section, {})[rest[len(section) + 1 :]] = _env_value(raw)
                break
    return out


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(dict(merged[key]), value)
        else:
            merged[key] = value
    return merged


def load_settings(
    path: Path | None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    missing_ok: bool = False,
) -> Settings:
    """Load and validate the settings.

    ``path=None`` or a missing file with ``missing_ok`` gives the defaults. ``overrides``
    are the command-line flags as nested tables (highest precedence).
    """
    table: dict[str, Any] = {}
    source = str(path) if path is not None else "config"
    if path is not None and (os.path.lexists(path) or not missing_ok):
        table = read_toml(path)
    env = _env_overrides(os.environ if environ is None else environ)
    if env:
        table = _merge(table, env)
    if overrides:
        table = _merge(table, overrides)
    bounds = first_problem(table, Settings)
    if bounds is not None:
        loc, problem = bounds
        where = _blame(loc[:2], source, env, overrides or {})
        raise ConfigError(f"{where}: {'.'.join(loc)}: {problem}")
    try:
        settings = Settings.model_validate(table)
    except ValidationError as exc:
        loc = tuple(str(part) for part in _first_error(exc)["loc"][:2])
        raise ConfigError(_one_line(_blame(loc, source, env, overrides or {}), exc)) from None
    unknown = [check for check in settings.recovery.gate_checks if check not in KNOWN_CHECK_IDS]
    if unknown:
        where = _blame(("recovery", "gate_checks"), source, env, overrides or {})
        known = ", ".join(sorted(KNOWN_CHECK_IDS))
        raise ConfigError(
            f"{where}: recovery.gate_checks: unknown check id {unknown[0]!r} (known: {known})"
        )
    return settings


def _blame(
    loc: tuple[str, ...], file_source: str, env: Mapping[str, Any], flags: Mapping[str, Any]
) -> str:
    """Who set the bad key: a flag, a ``CMPFLEET_*`` variable, or the file."""
    if len(loc) == 2:
        section, key = loc
        if key in flags.get(section, {}):
            return "command line"
        if key in env.get(section, {}):
            return f"environment {ENV_PREFIX}{section.upper()}_{key.upper()}"
    return file_source


def xid_catalogue(settings: Settings) -> XidCatalogue:
    """The Xid catalogue with this config's ``[xid.N]`` overrides applied."""
    return XidCatalogue(overrides_by_xid(settings.xid))


def load_cli_settings(path: Path | None) -> Settings:
    """Settings for a one-shot command: ``path``, else the default file when it exists."""
    if path is not None:
        return load_settings(path)
    return load_settings(DEFAULT_CONFIG_PATH, missing_ok=True)
