"""Request bodies for each sink format, built from one outbox notification.

Every format is rendered from the notification's stored snapshot alone (never from the
alert's current state), so a retry sends the same message as the first try, and a
receiver can de-duplicate on the notification's ``id`` (in the body where the format has
room for it, and always in the ``X-Cmpfleet-Id`` header).

- ``json``: cmpfleet's own versioned document (``SCHEMA``/``SCHEMA_VERSION``; docs/reference.md
  "Alerting" documents every key; new keys may appear, existing ones keep their meaning).
- ``alertmanager``: Alertmanager's webhook v4 shape, so receivers written for it work.
- ``slack`` / ``discord``: their incoming-webhook shapes, readable on a phone.
- ``alertmanager_api``: the list ``POST /api/v2/alerts`` takes; ``endsAt`` says when the
  alert ends (resolved) or, while firing, how long Alertmanager keeps it without news.

A cause's notification lists the symptoms folded into it (``also_affected``: their
summaries), in every format that has text for it.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

SinkFormat = Literal["json", "alertmanager", "slack", "discord", "alertmanager_api"]
FORMATS: tuple[SinkFormat, ...] = ("json", "alertmanager", "slack", "discord", "alertmanager_api")
SCHEMA = "cmpfleet.alert"
SCHEMA_VERSION = 1
# Alertmanager's zero time: "not resolved yet" in webhook v4 bodies.
AM_ZERO_TIME = "0001-01-01T00:00:00Z"
SEVERITY_EMOJI = {
    "critical": ":red_circle:",
    "warning": ":warning:",
    "info": ":information_source:",
}
DISCORD_COLOUR = {"critical": 0xD0021B, "warning": 0xF5A623, "info": 0x4A90E2, "resolved": 0x2E7D32}
DISCORD_TITLE_CHARS, DISCORD_TEXT_CHARS, DISCORD_CONTENT_CHARS = 256, 4096, 2000
_LABEL_NAME = re.compile(r"[^A-Za-z0-9_]")


@dataclass(frozen=True, slots=True)
class Notification:
    """What a sender hands a format: the outbox row's id, snapshot and queue time."""

    uid: str
    payload: dict[str, Any]
    queued_at: datetime


@dataclass(frozen=True, slots=True)
class RenderContext:
    """What a body needs besides the alert: the sink, the rig, links, Alertmanager's hold."""

    sink: str
    rig: str
    external_url: str = ""
    hold_s: float = 8 * 3600.0


def alert_name(payload: dict[str, Any]) -> str:
    """The alert's name (``alertname`` for Alertmanager): its rule's name for this alert."""
    return str(payload["labels"].get("alertname") or payload["rule"])


def _headline(payload: dict[str, Any], rig: str) -> str:
    if payload["status"] == "resolved":
        return f"RESOLVED on {rig}: {payload['summary']}"
    again = " (still firing)" if payload["repeat"] else ""
    return f"{payload['severity'].upper()} on {rig}: {payload['summary']}{again}"


def _when(iso: str) -> str:
    """An ISO time as a phone shows it: ``2026-12-06 09:00 UTC`` (the text as is if not one)."""
    try:
        moment = datetime.fromisoformat(iso)
    except (TypeError, ValueError):
        return str(iso)
    zone = "UTC" if moment.utcoffset() == timedelta(0) else moment.strftime("%z")
    return f"{moment:%Y-%m-%d %H:%M} {zone}".rstrip()


def _affected(payload: dict[str, Any]) -> str:
    """The symptoms folded into this alert, on one line."""
    return "; ".join(str(summary) for summary in payload.get("also_affected") or [])


def render_json(note: Notification, ctx: RenderContext) -> Any:
    """cmpfleet's own schema (version 1)."""
    p = note.payload
    return {
        "schema": SCHEMA,
        "version": SCHEMA_VERSION,
        "id": note.uid,
        "status": p["status"],
        "repeat": p["repeat"],
        "rig": ctx.rig,
        "alert_id": p["alert_id"],
        "name": alert_name(p),
        "fingerprint": p["fingerprint"],
        "rule": p["rule"],
        "severity": p["severity"],
        "summary": p["summary"],
        "advice": p["advice"],
        "labels": p["labels"],
        "count": p["count"],
        "started_at": p["started_at"],
        "resolved_at": p["resolved_at"],
        "queued_at": note.queued_at.isoformat(),
        **({"cards": p["cards"], "members": p["members"]} if p.get("members") else {}),
        **({"also_affected": p["also_affected"]} if p.get("also_affected") else {}),
    }


def members(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The alerts a notification is about: its group's members, or the alert alone.

    A board-level fault's notification (``daemon.store.alert_batch``) carries one member
    per card; each is the group's payload with that card's id, fingerprint and labels.
    """
    return [{**payload, **member} for member in payload.get("members") or [payload]]


def am_labels(payload: dict[str, Any], rig: str) -> dict[str, str]:
    """Alertmanager labels: ``alertname``, ``severity``, ``instance``, then the alert's own.

    Label names are made valid (``[A-Za-z0-9_]``) and empty values dropped, as
    Alertmanager's API refuses both.
    """
    labels = {"alertname": alert_name(payload), "severity": payload["severity"], "instance": rig}
    for key, value in payload["labels"].items():
        name = _LABEL_NAME.sub("_", str(key))
        if value is None or str(value) == "" or name in labels:
            continue
        labels[name if not name[0].isdecimal() else f"_{name}"] = str(value)
    labels["source"] = "cmpfleet"
    return labels


def am_fingerprint(payload: dict[str, Any]) -> str:
    """A 16-hex-digit fingerprint of cmpfleet's (Alertmanager's own is 16 hex digits too)."""
    return hashlib.sha256(payload["fingerprint"].encode()).hexdigest()[:16]


def _am_alert(note: Notification, ctx: RenderContext) -> dict[str, Any]:
    p = note.payload
    return {
        "status": p["status"],
        "labels": am_labels(p, ctx.rig),
        "annotations": {
            "summary": p["summary"],
            "description": p["advice"],
            "cmpfleet_id": note.uid,
            **({"also_affected": _affected(p)} if p.get("also_affected") else {}),
        },
        "startsAt": p["started_at"],
        "endsAt": p["resolved_at"] if p["status"] == "resolved" else AM_ZERO_TIME,
        "generatorURL": ctx.external_url,
        "fingerprint": am_fingerprint(p),
    }


def render_alertmanager(note: Notification, ctx: RenderContext) -> Any:
    """Alertmanager's webhook v4 body: one alert, or one per card of a board-level fault."""
    alerts = [
        _am_alert(Notification(note.uid, m, note.queued_at), ctx) for m in members(note.payload)
    ]
    group = {"alertname": alerts[0]["labels"]["alertname"]}
    common = {
        key: value
        for key, value in alerts[0]["labels"].items()
        if all(a["labels"].get(key) == value for a in alerts)
    }
    annotations = dict(alerts[0]["annotations"], summary=note.payload["summary"])
    return {
        "version": "4",
        "groupKey": f'{{}}:{{alertname="{group["alertname"]}"}}',
        "truncatedAlerts": 0,
        "status": alerts[0]["status"],
        "receiver": ctx.sink,
        "groupLabels": group,
        "commonLabels": common,
        "commonAnnotations": annotations,
        "externalURL": ctx.external_url,
        "alerts": alerts,
    }


def render_slack(note: Notification, ctx: RenderContext) -> Any:
    """A Slack incoming-webhook message: one bold headline, the next step, the id."""
    p = note.payload
    emoji = ":white_check_mark:" if p["status"] == "resolved" else SEVERITY_EMOJI[p["severity"]]
    lines = [f"{emoji} *{_headline(p, ctx.rig)}*"]
    if p["status"] != "resolved" and p["advice"]:
        lines.append(f"*Next step:* {p['advice']}")
    if p.get("also_affected"):
        lines.append(f"*Also affected:* {_affected(p)}")
    if p["count"] > 1:
        lines.append(f"Seen {p['count']} times since {_when(p['started_at'])}")
    lines.append(f"_cmpfleet alert {p['alert_id']} · id {note.uid}_")
    return {"text": "\n".join(lines), "mrkdwn": True}


def render_discord(note: Notification, ctx: RenderContext) -> Any:
    """A Discord incoming-webhook message with one coloured embed (no mentions parsed)."""
    p = note.payload
    resolved = p["status"] == "resolved"
    fields = [
        {"name": "Severity", "value": p["severity"], "inline": True},
        {"name": "Rig", "value": ctx.rig, "inline": True},
        {"name": "Seen", "value": f"{p['count']} time(s)", "inline": True},
    ]
    if p.get("also_affected"):
        fields.append({"name": "Also affected", "value": _affected(p)[:1024], "inline": False})
    embed = {
        "title": _headline(p, ctx.rig)[:DISCORD_TITLE_CHARS],
        "description": ("Resolved." if resolved else f"Next step: {p['advice']}")[
            :DISCORD_TEXT_CHARS
        ],
        "color": DISCORD_COLOUR["resolved" if resolved else p["severity"]],
        "fields": fields,
        "footer": {"text": f"cmpfleet alert {p['alert_id']} · id {note.uid}"},
        "timestamp": p["resolved_at"] if resolved else p["started_at"],
    }
    # The notification line names the alert only: the embed's title is the headline, so a
    # phone does not show the same ten lines twice.
    state = "RESOLVED" if resolved else p["severity"].upper()
    return {
        "content": f"{state} on {ctx.rig}: {alert_name(p)}"[:DISCORD_CONTENT_CHARS],
        "embeds": [embed],
        "allowed_mentions": {"parse": []},
    }


def render_alertmanager_api(note: Notification, ctx: RenderContext) -> Any:
    """``POST /api/v2/alerts``: a list of one postable alert with ``startsAt``/``endsAt``.

    While firing, ``endsAt`` is the queue time plus ``hold_s``: Alertmanager resolves an
    alert nobody re-posts, and cmpfleet re-posts firing alerts to this sink every repeat
    interval (half the hold), so only a dead cmpfleet lets it lapse.
    """
    hold = (note.queued_at + timedelta(seconds=ctx.hold_s)).isoformat()
    return [
        {
            "labels": am_labels(p, ctx.rig),
            "annotations": {"summary": p["summary"], "description": p["advice"]},
            "startsAt": p["started_at"],
            "endsAt": p["resolved_at"] if p["status"] == "resolved" else hold,
            "generatorURL": ctx.external_url,
        }
        for p in members(note.payload)  # Alertmanager groups a board-level fault itself
    ]


_RENDERERS = {
    "json": render_json,
    "alertmanager": render_alertmanager,
    "slack": render_slack,
    "discord": render_discord,
    "alertmanager_api": render_alertmanager_api,
}


def render(fmt: SinkFormat, note: Notification, ctx: RenderContext) -> bytes:
    """The raw request body (UTF-8 JSON) for ``fmt``: exactly the bytes that get signed."""
    document = _RENDERERS[fmt](note, ctx)
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()
