"""Where fleetctl's token goes: POSTs, GETs only when asked, never another rig's URL."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from daemon.cli.client import find_token
from tests.support.cli import run_fleetctl

STATUS = {
    "overall": "ok",
    "cards": [],
    "checks": [],
    "serving": {"state": "stopped"},
    "recovery": {},
}


class Recorder(ThreadingHTTPServer):
    """A loopback HTTP peer that records the Authorization header of every request."""

    def __init__(self, want_token: bool) -> None:
        self.seen: list[tuple[str, str | None]] = []
        self.want_token = want_token
        super().__init__(("127.0.0.1", 0), Handler)


class Handler(BaseHTTPRequestHandler):
    server: Recorder

    def _answer(self) -> None:
        auth = self.headers.get("Authorization")
        self.server.seen.append((self.command, auth))
        if self.server.want_token and auth is None:
            self.send_response(401)
            self.end_headers()
            return
        body = json.dumps(
            STATUS if self.path.startswith("/api/v1/status") else {"id": 1, "acked": True}
        )
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    do_GET = _answer  # noqa: N815 - http.server names
    do_POST = _answer  # noqa: N815 - http.server names

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(params=[False, True], ids=["loopback-rig", "token-everywhere-rig"])
def peer(request: pytest.FixtureRequest) -> Iterator[Recorder]:
    server = Recorder(want_token=request.param)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_gets_carry_the_token_only_when_asked_and_posts_always(
    peer: Recorder, tmp_path: Path
) -> None:
    (tmp_path / "api-token").write_text("local-secret\n")
    url = f"http://127.0.0.1:{peer.server_address[1]}"
    env = {"CMPFLEET_STATE_DIR": str(tmp_path)}
    assert run_fleetctl("--url", url, "status", "--json", env=env).returncode == 0
    assert run_fleetctl("--url", url, "ack", "1", env=env).returncode == 0
    gets = [auth for method, auth in peer.seen if method == "GET"]
    posts = [auth for method, auth in peer.seen if method == "POST"]
    assert gets[0] is None
    assert gets[1:] == (["Bearer local-secret"] if peer.want_token else [])
    assert posts == ["Bearer local-secret"]


def test_the_local_token_never_goes_to_another_rig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "api-token").write_text("local-secret\n")
    monkeypatch.setenv("CMPFLEET_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("FLEETCTL_TOKEN", raising=False)
    assert find_token(None, "http://127.0.0.1:8170") == "local-secret"
    assert find_token(None, "http://[::1]:8170") == "local-secret"
    assert find_token(None, "http://rig2.lan:8170") is None
    assert find_token(None, "http://10.1.2.3:8170") is None
    # a name that merely starts like a loopback address is someone else's machine
    assert find_token(None, "http://127.example.org:8170") is None
    assert find_token(None, "http://127.0.0.1.nip.io:8170") is None
    other = tmp_path / "rig2-token"
    other.write_text("rig2-secret\n")
    assert find_token(other, "http://rig2.lan:8170") == "rig2-secret"
