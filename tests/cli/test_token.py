"""Where fleetctl's token goes: POSTs, GETs only when asked, never another rig's URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.cli.client import find_token
from tests.support.cli import run_fleetctl_here
from tests.support.token_peer import Recorder, peer

__all__ = ["peer"]  # the fixture, from tests/support


def test_gets_carry_the_token_only_when_asked_and_posts_always(
    peer: Recorder, tmp_path: Path
) -> None:
    (tmp_path / "api-token").write_text("local-secret\n")
    url = f"http://127.0.0.1:{peer.server_address[1]}"
    env = {"CMPFLEET_STATE_DIR": str(tmp_path)}
    assert run_fleetctl_here("--url", url, "status", "--json", env=env).returncode == 0
    assert run_fleetctl_here("--url", url, "ack", "1", env=env).returncode == 0
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
