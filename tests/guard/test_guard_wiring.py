"""fleetd's side of the guard without a daemon: config, sockets, profiles, totals, alerts."""

from __future__ import annotations

import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from daemon.alerts.rules import event_signals
from daemon.config import ConfigError, load_settings
from daemon.engine.guard import GuardBindError, GuardService, bind_guard_sockets
from daemon.engine.profiles import behind_guard
from daemon.store import Store
from daemon.store.events import EventRow
from hwcheck.model import EventKind, Severity
from serving.guard.settings import GuardSettings
from serving.guard.supervisor import EngineView
from serving.profiles import ProfileSet
from serving.recipe.recipe import preset_recipe


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "fleet.toml"
    path.write_text(text)
    return path


def test_the_guard_is_off_unless_listen_is_set(tmp_path: Path) -> None:
    assert not load_settings(None, environ={}).guard.enabled
    settings = load_settings(_config(tmp_path, '[guard]\nlisten = "0.0.0.0:8098"\n'), environ={})
    assert settings.guard.enabled
    assert settings.guard.depth_event_tokens() == 100_000


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('[guard]\nlisten = "8098"\n', "guard.listen: expected HOST:PORT"),
        ('[guard]\ncap_mode = "block"\n', "guard.cap_mode"),
        ("[guard.pin]\nmessages = []\n", "'messages' cannot be pinned"),
        ('[guard]\nlisen = "x:1"\n', "unknown key 'guard.lisen' (did you mean 'listen'?)"),
        ('[[guard.keys]]\nname = "a"\nsha256 = "hunter2"\n', "guard.keys"),
    ],
)
def test_a_bad_guard_section_is_one_line_naming_the_key(
    tmp_path: Path, text: str, words: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(_config(tmp_path, text), environ={})
    message = str(caught.value)
    assert words in message
    assert "\n" not in message
    assert "hunter2" not in message  # a key field is never echoed


def test_a_taken_guard_port_refuses_in_one_line() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        settings = GuardSettings(listen=f"127.0.0.1:{port}")
        with pytest.raises(GuardBindError, match=rf"guard.listen 127.0.0.1:{port}: cannot listen"):
            bind_guard_sockets(settings, wait_s=0)


def test_behind_the_guard_every_engine_moves_to_an_internal_port() -> None:
    recipe = preset_recipe("sim-engine").model_copy(update={"host": "0.0.0.0", "port": 8000})
    moved = behind_guard(ProfileSet.single(recipe))
    inner = moved.get(moved.configured).recipe
    assert (inner.host, inner.port) == ("127.0.0.1", 0)
    assert moved.configured == "default"


def _report(started: float, requests: int, prompt: int, signs: dict[str, int]) -> dict[str, Any]:
    hour = int(datetime.now(UTC).timestamp()) // 3600 * 3600
    return {
        "started": started,
        "counters": {"requests": requests},
        "signs": signs,
        "usage": [
            {"key": "laptop", "hour": hour, "requests": requests, "prompt_tokens": prompt,
             "completion_tokens": 1}
        ],
        "sessions": [],
        "news": [],
    }  # fmt: skip


def _service(tmp_path: Path, store: Store) -> GuardService:
    sockets = bind_guard_sockets(GuardSettings(listen="127.0.0.1:0"), wait_s=0)
    return GuardService(
        GuardSettings(listen="127.0.0.1:0"),
        sockets,
        store,
        lambda job: job(),
        lambda: EngineView(None, None, None),
        tick_s=1.0,
    )


def test_totals_and_usage_survive_guard_and_fleetd_restarts(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    service = _service(tmp_path, store)
    service.take_report(_report(1.0, 3, 30, {"dsml_markup": 2}))
    service.take_report(_report(1.0, 5, 50, {"dsml_markup": 2}))  # the same guard, later
    service.take_report(_report(2.0, 1, 10, {"dsml_markup": 1}))  # a restarted guard
    metrics = service.metrics()
    assert metrics.counters["requests"] == 6
    assert metrics.signs["dsml_markup"] == 3
    assert metrics.tokens[("laptop", "prompt")] == 60
    service.stop()  # stores the usage
    again = _service(tmp_path, store)  # a restarted fleetd
    assert again.usage(24)[0]["prompt_tokens"] == 60
    again.stop()
    store.close()


def _event(details: dict[str, Any], message: str = "m") -> EventRow:
    return EventRow(
        id=1,
        ts=datetime.now(UTC),
        kind=EventKind.GUARD,
        severity=Severity.WARNING,
        message=message,
        details=details,
    )


def test_guard_events_become_alerts() -> None:
    down = event_signals(_event({"guard": "exited"}, "guard exited with signal SIGKILL"))
    assert down[0].fire
    assert down[0].labels["alertname"] == "GuardDown"
    back = event_signals(_event({"guard": "started"}))
    assert back[0].fingerprint == "guard:down"
    assert not back[0].fire
    leaks = event_signals(_event({"guard": "leaks", "session": "abc", "key": "laptop"}))
    assert leaks[0].labels == {"alertname": "GuardSessionLeaks", "key": "laptop"}
    assert leaks[0].one_shot
    assert event_signals(_event({"guard": "something else"})) == []
