"""The configured webhooks as fleetd uses them: named, secrets loaded, routes derived.

A webhook without a ``name`` is named after its format (``json``, then ``json-2`` for a
second one): the outbox keys a sink's queue by this name, so it must be stable across
restarts of one configuration. A ``secret_file`` is read once at start; a file that
cannot be read stops the start with one line (a silently unsigned webhook would be
refused by its receiver, which is no better than no webhook at all).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from daemon.alerts.formats import SinkFormat
from daemon.config import AlertSettings, ConfigError, WebhookSettings
from daemon.store.alerts import SinkRoute
from hwcheck.model import Severity
from hwcheck.regular_file import read_regular

AM_API_PATH = "/api/v2/alerts"


@dataclass(frozen=True, slots=True)
class Sink:
    """One webhook, ready to send to (``secret``: bytes, never printed: see ``__repr__``)."""

    name: str
    url: str
    format: SinkFormat
    min_severity: Severity
    timeout_s: float
    secret: bytes | None = None

    def __repr__(self) -> str:
        signed = "signed" if self.secret else "unsigned"
        return f"Sink({self.name!r}, {self.format}, {display_url(self.url)}, {signed})"

    @property
    def route(self) -> SinkRoute:
        """Which alerts it gets (Alertmanager's API also gets repeats of every severity)."""
        return SinkRoute(self.name, self.min_severity, self.format == "alertmanager_api")


def display_url(url: str) -> str:
    """``url`` fit for logs: scheme and host only.

    No user:password, and no path or query either: Slack and Discord webhook URLs carry
    their key in the path.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, "/..." if parts.path.strip("/") else "", "", ""))


# Webhook services whose URL is itself the credential (the key sits in the path).
_KEY_IN_PATH_FORMATS = frozenset({"slack", "discord"})
_KEY_IN_PATH_HOSTS = frozenset({"hooks.slack.com", "discord.com", "discordapp.com"})


def url_holds_secret(url: str, fmt: str) -> bool:
    """Whether ``url`` is a credential: a password or query in it, or a Slack/Discord key path.

    A plain receiver path (``https://alerts.example.org/cmpfleet``) is not: a config with
    only such URLs and a ``secret_file`` may stay readable by everyone.
    """
    parts = urlsplit(url)
    if parts.password or parts.query:
        return True
    keyed = fmt in _KEY_IN_PATH_FORMATS or (parts.hostname or "") in _KEY_IN_PATH_HOSTS
    return keyed and bool(parts.path.strip("/"))


def _target_url(hook: WebhookSettings) -> str:
    """The URL to POST to: an Alertmanager base URL gets ``/api/v2/alerts`` appended."""
    if hook.format != "alertmanager_api":
        return hook.url
    parts = urlsplit(hook.url)
    if parts.path.rstrip("/") == "":
        return urlunsplit((parts.scheme, parts.netloc, AM_API_PATH, parts.query, ""))
    return hook.url


def _secret(hook: WebhookSettings, name: str) -> bytes | None:
    if hook.secret is not None:
        return hook.secret.encode()
    if hook.secret_file is None:
        return None
    path = Path(hook.secret_file)
    try:
        text = read_regular(path).decode("utf-8", "replace").strip()  # never a FIFO's hang
    except OSError as exc:
        reason = exc.strerror or exc.__class__.__name__
        raise ConfigError(f"alerts.webhooks {name}: secret_file {path}: {reason}") from None
    if not text:
        raise ConfigError(f"alerts.webhooks {name}: secret_file {path} is empty")
    return text.splitlines()[0].encode()


def build_sinks(settings: AlertSettings) -> list[Sink]:
    """The configured webhooks in order, each with its name and secret."""
    sinks: list[Sink] = []
    taken = {hook.name for hook in settings.webhooks if hook.name is not None}
    for hook in settings.webhooks:
        name = hook.name
        if name is None:
            name, n = hook.format, 1
            while name in taken:
                n += 1
                name = f"{hook.format}-{n}"
            taken.add(name)
        sinks.append(
            Sink(
                name=name,
                url=_target_url(hook),
                format=hook.format,
                min_severity=Severity(hook.min_severity),
                timeout_s=hook.timeout_s,
                secret=_secret(hook, name),
            )
        )
    return sinks
