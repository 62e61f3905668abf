"""fleetctl at 3 a.m.: wrong URLs, wrong tokens, peers that are not fleetd, and Ctrl-C.

Every case is a real fleetctl process against a real loopback peer. The standard: one line
on stderr naming what is wrong, the right exit code, never a traceback; under ``--json``
still one JSON document on stdout.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO

import pytest

from tests.support.cli import one_clean_line, run_fleetctl
from tests.support.terminal import read_until, spawn_in_pty

EXIT_INTERRUPTED = 130
REBOOT_DELAY_S = 3.0


@dataclass
class Peer:
    """A loopback HTTP server that answers every request the way ``mode`` says."""

    mode: str
    server: ThreadingHTTPServer = field(init=False)

    def __post_init__(self) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.mode = self.mode  # type: ignore[attr-defined]
        self.server.asked = []  # type: ignore[attr-defined]  # every request's path, in order
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


FAKE_STATUS = {
    "overall": "ok",
    "cards": [],
    "checks": [],
    "serving": {"state": "starting", "last_log_line": "loading weights"},
    "recovery": {},
}


class Handler(BaseHTTPRequestHandler):
    """``html``/``html404``: a web server; ``jsonlist``: JSON of another shape;
    ``slow-fleetd``: a fleetd whose engine never finishes starting or stopping, whose
    confirmed reboot and canary round take ``REBOOT_DELAY_S`` and whose engine log never
    ends."""

    def _send(self, code: int, body: bytes, ctype: str) -> None:
        self.send_response(code)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _answer(self) -> None:
        mode = self.server.mode  # type: ignore[attr-defined]
        self.server.asked.append(self.path)  # type: ignore[attr-defined]
        if self.command == "POST":
            self.rfile.read(int(self.headers.get("content-length", 0)))
        if mode in ("html", "html404"):
            page = b"<html><body>Welcome to nginx!</body></html>"
            self._send(200 if mode == "html" else 404, page, "text/html")
        elif mode == "jsonlist":
            self._send(200, b"[1, 2]", "application/json")
        elif self.path.startswith("/api/v1/serving/logs/follow"):
            self._follow()
        elif self.path.startswith("/api/v1/canary/run"):
            time.sleep(REBOOT_DELAY_S)
            self._send(200, b'{"canaries": []}', "application/json")
        elif self.path.startswith("/api/v1/recovery/reboot"):
            time.sleep(REBOOT_DELAY_S)
            self._send(
                200, b'{"confirmed": true, "done": true, "message": "ran it"}', "application/json"
            )
        elif self.path.startswith("/api/v1/serving/"):
            self._send(
                200, json.dumps({"serving": {"state": "starting"}}).encode(), "application/json"
            )
        else:
            self._send(200, json.dumps(FAKE_STATUS).encode(), "application/json")

    def _follow(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/plain")
        self.end_headers()
        try:
            for n in range(600):
                self.wfile.write(f"engine line {n}\n".encode())
                self.wfile.flush()
                time.sleep(0.1)
        except OSError:
            return  # fleetctl went away

    do_GET = _answer  # noqa: N815 - http.server names
    do_POST = _answer  # noqa: N815 - http.server names

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def peers() -> Iterator[dict[str, Peer]]:
    made = {mode: Peer(mode) for mode in ("html", "html404", "jsonlist", "slow-fleetd")}
    yield made
    for peer in made.values():
        peer.close()


@pytest.fixture(scope="module")
def silent_url() -> Iterator[str]:
    """A port that accepts connections and never answers (a hung daemon, a firewall)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


@pytest.mark.parametrize(
    ("mode", "args", "code", "words"),
    [
        ("html", ["status"], 3, "answered HTTP 200 (text/html), not fleetd's JSON API"),
        ("html", ["events"], 1, "answered HTTP 200 (text/html), not fleetd's JSON API"),
        ("html404", ["logs"], 1, "answered HTTP 404 (text/html), not fleetd's JSON API"),
        ("html404", ["start", "--no-wait"], 1, "not fleetd's JSON API"),
        ("jsonlist", ["status"], 3, "did not answer a fleetd status document"),
        ("jsonlist", ["events"], 1, "unexpected TypeError"),
        ("jsonlist", ["alerts"], 1, "unexpected TypeError"),
    ],
)
def test_a_peer_that_is_not_fleetd_is_one_line(
    peers: dict[str, Peer], mode: str, args: list[str], code: int, words: str
) -> None:
    result = run_fleetctl("--url", peers[mode].url, *args)
    assert result.returncode == code, result.stderr
    assert words in one_clean_line(result.stderr)
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("mode", "args"), [("html", ["status"]), ("jsonlist", ["status"]), ("html", ["events"])]
)
def test_json_mode_still_prints_one_document(
    peers: dict[str, Peer], mode: str, args: list[str]
) -> None:
    result = run_fleetctl("--url", peers[mode].url, *args, "--json")
    one_clean_line(result.stderr)
    document = json.loads(result.stdout)
    assert document["error"]
    if args == ["status"]:
        assert result.returncode == 3 and document["overall"] == "unknown"
    else:
        assert result.returncode == 1 and document["exit_code"] == 1


def test_a_peer_that_never_answers_is_named_with_the_wait(silent_url: str) -> None:
    """``top`` waits 2 s per refresh; piped it prints one frame, or exits 3 saying why."""
    result = run_fleetctl("--url", silent_url, "top")
    assert result.returncode == 3
    assert "connected, but no answer within 2 s" in one_clean_line(result.stderr)


@pytest.mark.parametrize(
    ("url", "args", "code", "words"),
    [
        ("127.0.0.1:8170", ["status"], 3, "'127.0.0.1:8170' is not an http(s)://HOST[:PORT] URL"),
        ("localhost", ["events"], 2, "is not an http(s)://HOST[:PORT] URL"),
        ("ftp://127.0.0.1:21", ["events"], 2, "is not an http(s)://HOST[:PORT] URL"),
        ("http://127.0.0.1:99999", ["events"], 2, "port 99999 is out of range"),
        ("http://", ["logs"], 2, "is not a"),
    ],
)
def test_a_malformed_url_is_refused_before_any_request(
    url: str, args: list[str], code: int, words: str
) -> None:
    for given in (["--url", url], []):
        env = {} if given else {"FLEETCTL_URL": url}
        result = run_fleetctl(*given, *args, env=env)
        assert result.returncode == code, result.stderr
        line = one_clean_line(result.stderr)
        assert "--url (or $FLEETCTL_URL)" in line and words in line


def test_nothing_listening_says_connection_refused() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = run_fleetctl("--url", f"http://127.0.0.1:{port}", "events")
    assert result.returncode == 1
    assert "connection refused (is fleetd running? see --url)" in one_clean_line(result.stderr)


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "is empty"),
        (b"\n  \n", "is empty"),
        (b"\xff\xfe\x00binary", "does not hold a token"),
        ("t\u00f6ken".encode(), "does not hold a token"),
        (b"first-line\nsecond-line\n", "does not hold a token"),
    ],
    ids=["empty", "blank", "binary", "non-ascii", "two-lines"],
)
def test_a_token_that_cannot_be_one_is_named(
    peers: dict[str, Peer], tmp_path: Path, content: bytes, words: str
) -> None:
    token_file = tmp_path / "api-token"
    token_file.write_bytes(content)
    url = peers["slow-fleetd"].url
    by_file = run_fleetctl("--url", url, "--token-file", str(token_file), "ack", "1")
    assert by_file.returncode == 1
    line = one_clean_line(by_file.stderr)
    assert f"token file {token_file}" in line and words in line
    if content.strip() and b"\x00" not in content:
        by_env = run_fleetctl(
            "--url", url, "ack", "1", env={"FLEETCTL_TOKEN": content.decode("utf-8", "replace")}
        )
        assert by_env.returncode == 1
        assert "$FLEETCTL_TOKEN" in one_clean_line(by_env.stderr)


def test_a_token_with_a_trailing_newline_in_the_environment_works(peers: dict[str, Peer]) -> None:
    result = run_fleetctl(
        "--url", peers["slow-fleetd"].url, "ack", "1", env={"FLEETCTL_TOKEN": "  abc-123\n"}
    )
    assert result.returncode == 0, result.stderr


def test_a_confirmed_reboot_waits_past_the_request_timeout_with_its_own(
    peers: dict[str, Peer],
) -> None:
    """The clean stop before a reboot takes minutes on a real rig: ``--timeout`` bounds it."""
    url = peers["slow-fleetd"].url
    short = run_fleetctl("--url", url, "reboot", "--confirm", "--timeout", "1")
    assert short.returncode == 1
    assert "Traceback" not in short.stderr
    line = short.stderr.strip().splitlines()[-1]  # after the progress lines of a pipe
    assert line.startswith(f"fleetctl: fleetd at {url} during the confirmed reboot: "), line
    assert "no answer within 1 s; it may still be stopping the engine" in line
    waited = run_fleetctl("--url", url, "reboot", "--confirm", "--timeout", "30")
    assert waited.returncode == 0, waited.stderr
    assert "rebooting: ran it" in waited.stdout
    assert "engine starting" in waited.stderr  # the progress while it waited


def _wait_for_output(stream: IO[bytes], needle: bytes, timeout_s: float) -> None:
    """Read ``stream`` until ``needle`` shows up (the command is waiting), or fail."""
    seen = b""
    deadline = time.monotonic() + timeout_s
    os.set_blocking(stream.fileno(), False)
    while needle not in seen:
        assert time.monotonic() < deadline, f"no {needle!r} within {timeout_s} s: {seen!r}"
        chunk = stream.read(4096)
        if chunk:
            seen += chunk
        else:
            time.sleep(0.05)


@pytest.mark.parametrize(
    ("args", "waiting_on", "words"),
    [
        (["logs", "--follow"], "stdout", None),
        (["start"], "stderr", "stopped waiting: fleetd carries on with the start"),
        (["stop", "--json"], "stderr", "stopped waiting: fleetd carries on with the stop"),
        (["reboot", "--confirm"], "stderr", "stopped waiting: fleetd carries on with the reboot"),
        (["canary", "run"], "/api/v1/canary/run", "stopped waiting: fleetd finishes the canary"),
    ],
    ids=["logs-follow", "start", "stop-json", "reboot", "canary-run"],
)
def test_ctrl_c_while_waiting_exits_130_without_a_traceback(
    peers: dict[str, Peer], args: list[str], waiting_on: str, words: str | None
) -> None:
    """SIGINT once the command waits: on its output, or (silent into a pipe) on its request."""
    peer = peers["slow-fleetd"]
    argv = [sys.executable, "-m", "daemon.fleetctl", "--url", peer.url, *args]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        assert process.stdout is not None and process.stderr is not None
        try:
            if waiting_on.startswith("/"):
                _wait_for_request(peer, waiting_on, 20)
            else:
                stream = process.stdout if waiting_on == "stdout" else process.stderr
                _wait_for_output(stream, b"engine", 20)
            process.send_signal(signal.SIGINT)
            process.wait(timeout=10)
        finally:
            if process.poll() is None:
                process.kill()
        for stream in (process.stdout, process.stderr):
            os.set_blocking(stream.fileno(), True)
        stdout, stderr = process.stdout.read().decode(), process.stderr.read().decode()
    assert process.returncode == EXIT_INTERRUPTED, stderr
    assert "Traceback" not in stderr
    if words is not None:
        assert words in stderr
    if "--json" in args:
        assert json.loads(stdout)["exit_code"] == EXIT_INTERRUPTED


def _wait_for_request(peer: Peer, path: str, timeout_s: float) -> None:
    """Poll the peer's record until ``path`` was asked for (the command now waits on it)."""
    deadline = time.monotonic() + timeout_s
    asked: list[str] = peer.server.asked  # type: ignore[attr-defined]
    while not any(seen.startswith(path) for seen in list(asked)):
        assert time.monotonic() < deadline, f"no request for {path} within {timeout_s} s"
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("args", "drawn"),
    [(["top"], b"engine"), (["canary", "run"], b"canaries running on the engine")],
    ids=["top", "canary-run-progress"],
)
def test_ctrl_c_in_a_terminal_leaves_it_clean(
    peers: dict[str, Peer], args: list[str], drawn: bytes
) -> None:
    """Full screen or a live progress line: Ctrl-C gives 130, no traceback, the screen back."""
    argv = [sys.executable, "-m", "daemon.fleetctl", "--url", peers["slow-fleetd"].url, *args]
    process, master = spawn_in_pty(argv)
    seen = bytearray()
    try:
        read_until(master, drawn, 20, seen=seen)
        process.send_signal(signal.SIGINT)
        # Keep reading while it exits: a full terminal buffer would block its last writes.
        with contextlib.suppress(AssertionError):  # ends when the terminal closes
            read_until(master, b"\x00never drawn\x00", 10, seen=seen)
        assert process.wait(5) == EXIT_INTERRUPTED, bytes(seen[-1500:])
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(master)
    assert b"Traceback" not in seen
    if args == ["top"]:
        assert b"\x1b[?1049l" in seen  # the alternate screen was left
        assert b"\x1b[?25h" in seen  # and the cursor shown again
    else:
        assert b"stopped waiting: fleetd finishes the canary round" in seen
