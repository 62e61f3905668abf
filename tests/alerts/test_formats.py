"""Every sink format's body, built from one stored notification, and the HMAC header."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from daemon.alerts.formats import (
    AM_ZERO_TIME,
    FORMATS,
    SCHEMA,
    Notification,
    RenderContext,
    render,
)
from daemon.alerts.signing import sign, verify
from daemon.alerts.sinks import build_sinks, display_url
from daemon.config import AlertSettings, ConfigError, WebhookSettings

T0 = datetime(2026, 9, 29, 13, 45, 55, tzinfo=UTC)
CTX = RenderContext(sink="phone", rig="rig-a", external_url="http://127.0.0.1:8170", hold_s=60)


def payload(status: str = "firing", severity: str = "critical", **extra: Any) -> dict[str, Any]:
    return {
        "alert_id": 7,
        "fingerprint": "xid:hardware:0000:21:00.0",
        "rule": "xid",
        "severity": severity,
        "status": status,
        "repeat": False,
        "summary": "Xid 79 (hardware) on card 1: GPU has fallen off the bus",
        "advice": "Reboot the host.",
        "labels": {"alertname": "XidHardware", "card": 1, "pci_bus_id": "0000:21:00.0", "x": ""},
        "count": 3,
        "started_at": T0.isoformat(),
        "resolved_at": None if status == "firing" else (T0 + timedelta(minutes=5)).isoformat(),
        **extra,
    }


def body(fmt: str, status: str = "firing", severity: str = "critical") -> Any:
    note = Notification("id-123", payload(status, severity), T0 + timedelta(seconds=1))
    return json.loads(render(fmt, note, CTX))  # type: ignore[arg-type]


def test_json_is_the_documented_versioned_schema() -> None:
    doc = body("json")
    assert doc["schema"] == SCHEMA and doc["version"] == 1
    assert doc["id"] == "id-123" and doc["status"] == "firing" and doc["rig"] == "rig-a"
    assert doc["name"] == "XidHardware" and doc["severity"] == "critical"
    assert doc["summary"].startswith("Xid 79") and doc["advice"] == "Reboot the host."
    assert doc["count"] == 3 and doc["started_at"] == T0.isoformat() and doc["resolved_at"] is None
    assert set(doc) == {
        "schema", "version", "id", "status", "repeat", "rig", "alert_id", "name",
        "fingerprint", "rule", "severity", "summary", "advice", "labels", "count",
        "started_at", "resolved_at", "queued_at",
    }  # fmt: skip


@pytest.mark.parametrize("status", ["firing", "resolved"])
def test_alertmanager_is_webhook_v4(status: str) -> None:
    doc = body("alertmanager", status)
    assert doc["version"] == "4" and doc["status"] == status and doc["receiver"] == "phone"
    for key in ("groupKey", "groupLabels", "commonLabels", "commonAnnotations", "externalURL"):
        assert key in doc
    (alert,) = doc["alerts"]
    assert set(alert) >= {
        "status", "labels", "annotations", "startsAt", "endsAt", "generatorURL", "fingerprint",
    }  # fmt: skip
    assert alert["labels"]["alertname"] == "XidHardware"
    assert alert["labels"]["severity"] == "critical" and alert["labels"]["instance"] == "rig-a"
    assert "x" not in alert["labels"]  # empty values are dropped
    assert all(isinstance(v, str) for v in alert["labels"].values())
    assert alert["annotations"]["summary"].startswith("Xid 79")
    assert alert["annotations"]["cmpfleet_id"] == "id-123"
    assert len(alert["fingerprint"]) == 16
    if status == "firing":
        assert alert["endsAt"] == AM_ZERO_TIME
    else:
        assert alert["endsAt"] == (T0 + timedelta(minutes=5)).isoformat()


def test_slack_text_reads_on_a_phone() -> None:
    doc = body("slack")
    first, *rest = doc["text"].splitlines()
    assert first == (
        ":red_circle: *CRITICAL on rig-a: Xid 79 (hardware) on card 1: GPU has fallen off the bus*"
    )
    assert "*Next step:* Reboot the host." in rest
    assert any("id-123" in line for line in rest)
    assert "Seen 3 times since 2026-09-29 13:45 UTC" in rest  # no raw ISO time on a phone
    resolved = body("slack", "resolved")["text"]
    assert resolved.startswith(":white_check_mark: *RESOLVED on rig-a:")


def test_discord_embed_with_colour_and_no_mentions() -> None:
    doc = body("discord", severity="warning")
    assert doc["allowed_mentions"] == {"parse": []}
    assert doc["content"].startswith("WARNING on rig-a:") and len(doc["content"]) <= 2000
    (embed,) = doc["embeds"]
    assert embed["color"] == 0xF5A623 and len(embed["title"]) <= 256
    assert embed["description"] == "Next step: Reboot the host."
    assert {"name": "Severity", "value": "warning", "inline": True} in embed["fields"]
    assert "id-123" in embed["footer"]["text"]
    long = Notification("x", payload(summary="y" * 5000), T0)
    capped = json.loads(render("discord", long, CTX))
    assert len(capped["content"]) <= 2000 and len(capped["embeds"][0]["title"]) <= 256


def test_alertmanager_api_has_starts_and_ends() -> None:
    (firing,) = body("alertmanager_api")
    assert firing["startsAt"] == T0.isoformat()
    assert firing["endsAt"] == (T0 + timedelta(seconds=61)).isoformat()  # queued + hold
    assert firing["labels"]["alertname"] == "XidHardware"
    (resolved,) = body("alertmanager_api", "resolved")
    assert resolved["endsAt"] == (T0 + timedelta(minutes=5)).isoformat()


def test_every_format_renders_utf8_json() -> None:
    note = Notification("id", payload(summary="température 91 °C"), T0)
    for fmt in FORMATS:
        raw = render(fmt, note, CTX)
        assert "91 °C" in raw.decode("utf-8")


def test_signature_is_hmac_sha256_of_the_raw_body() -> None:
    raw = render("json", Notification("id", payload(), T0), CTX)
    header = sign(b"s3cret", raw)
    assert header.startswith("sha256=") and len(header) == 7 + 64
    assert verify(b"s3cret", raw, header)
    assert not verify(b"other", raw, header)
    assert not verify(b"s3cret", raw + b" ", header)
    assert not verify(b"s3cret", raw, None)


def test_sinks_are_named_and_secrets_read_from_files(tmp_path: Any) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text("from-file\n")
    settings = AlertSettings(
        webhooks=[
            WebhookSettings(url="http://127.0.0.1:1/a"),
            WebhookSettings(url="http://127.0.0.1:1/b", secret_file=str(secret_file)),
            WebhookSettings(url="http://127.0.0.1:9093", format="alertmanager_api", name="am"),
            WebhookSettings(url="https://hooks.slack.com/services/T0/B0/KEY", format="slack"),
        ]
    )
    sinks = build_sinks(settings)
    assert [s.name for s in sinks] == ["json", "json-2", "am", "slack"]
    assert sinks[1].secret == b"from-file"
    assert sinks[2].url == "http://127.0.0.1:9093/api/v2/alerts"
    assert "KEY" not in repr(sinks[3]) and "from-file" not in repr(sinks[1])
    assert display_url(sinks[3].url) == "https://hooks.slack.com/..."


def test_an_unreadable_secret_file_is_one_line(tmp_path: Any) -> None:
    settings = AlertSettings(
        webhooks=[WebhookSettings(url="http://x/", secret_file=str(tmp_path / "missing"))]
    )
    with pytest.raises(ConfigError, match=r"^alerts.webhooks json: secret_file .*missing: "):
        build_sinks(settings)


def test_webhook_config_mistakes_are_one_line(tmp_path: Any) -> None:
    from daemon.config import load_settings

    def error(text: str) -> str:
        config = tmp_path / "fleet.toml"
        config.write_text(text)
        with pytest.raises(ConfigError) as caught:
            load_settings(config, environ={})
        return str(caught.value).replace(str(config), "FILE")

    both = '[[alerts.webhooks]]\nurl = "http://x/"\nsecret = "a"\nsecret_file = "/f"\n'
    assert error(both) == "FILE: alerts.webhooks[0]: give secret or secret_file, not both"
    assert "expected an http:// or https:// URL" in error('[[alerts.webhooks]]\nurl = "ftp://x"\n')
    twice = '[[alerts.webhooks]]\nurl = "http://a/"\nname = "ops"\n' * 2
    assert error(twice) == "FILE: alerts: webhook name 'ops' is used twice"
    hidden = error('[[alerts.webhooks]]\nurl = "http://a/"\nsecret = 12345678\n')
    assert "12345678" not in hidden and "secret" in hidden


def board_payload() -> dict[str, Any]:
    """A group notification as daemon.store.alert_batch builds it: four cards, one message."""
    first = payload(summary="Power brake on cards 0-3: HW power brake active")
    members = [
        {
            "alert_id": 7 + card,
            "fingerprint": f"check:power_brake:{card}",
            "summary": f"Power brake on card {card}: HW power brake active",
            "labels": {"alertname": "PowerBrake", "gpu": card, "card": card},
            "count": 1,
            "started_at": T0.isoformat(),
            "resolved_at": None,
        }
        for card in range(4)
    ]
    return {**first, "labels": members[0]["labels"], "cards": [0, 1, 2, 3], "members": members}


def test_a_board_level_group_is_one_body_with_every_card() -> None:
    note = Notification("id-9", board_payload(), T0)
    doc = json.loads(render("json", note, CTX))
    assert doc["summary"] == "Power brake on cards 0-3: HW power brake active"
    assert doc["cards"] == [0, 1, 2, 3] and len(doc["members"]) == 4
    am = json.loads(render("alertmanager", note, CTX))
    assert [a["labels"]["gpu"] for a in am["alerts"]] == ["0", "1", "2", "3"]
    assert am["commonLabels"]["alertname"] == "PowerBrake" and "gpu" not in am["commonLabels"]
    assert am["commonAnnotations"]["summary"].startswith("Power brake on cards 0-3")
    api = json.loads(render("alertmanager_api", note, CTX))
    assert [a["labels"]["gpu"] for a in api] == ["0", "1", "2", "3"]  # Alertmanager groups
    slack = json.loads(render("slack", note, CTX))
    assert "Power brake on cards 0-3" in slack["text"]


def test_a_cause_lists_the_symptoms_folded_into_it_in_every_format() -> None:
    slow = "Engine canary throughput: warn (was pass): 7.4 tok/s"
    note = Notification("id-9", payload(also_affected=[slow]), T0)

    def rendered(fmt: str) -> Any:
        return json.loads(render(fmt, note, CTX))  # type: ignore[arg-type]

    assert rendered("json")["also_affected"] == [slow]
    assert slow in rendered("slack")["text"]
    assert any(f["value"] == slow for f in rendered("discord")["embeds"][0]["fields"])
    assert rendered("alertmanager")["alerts"][0]["annotations"]["also_affected"] == slow
    assert "also_affected" not in body("json")  # only when there is one
