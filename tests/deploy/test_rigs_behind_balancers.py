"""Two rigs behind one address: the shipped nginx and HAProxy configs, run for real (issue 42).

Two real fleetds on simulated rigs, each with its guard; in front of them the real nginx
(Debian's ``nginx-light``) or HAProxy running the files in ``deploy/``, with only the
rigs' addresses and the front port put in. While rig A drains and reboots (a confirmed
reboot under ``--simulate``: the drain, the clean stop, the simulated reboot) sequential
requests through the balancer all succeed: rig B takes them. HAProxy's health check on the
guard's ``/health`` takes a drained rig out and puts it back once undrained. A missing program is
installed when the tests may (root with apt), skipped otherwise, a failure under CI.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import loopback
from tests.support.external import require_program
from tests.support.fleetd import Fleetd, free_port, start_fleetd, stop_all, wait_until
from tests.support.waiting import DEADLINE_SCALE

pytestmark = pytest.mark.slow(seconds=50)

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RIG_A, RIG_B = "192.0.2.10:8098", "192.0.2.11:8098"  # the shipped files' example addresses
REQUESTS = 200


class Rig:
    """A fleetd and its guard's port."""

    def __init__(self, daemon: Fleetd, guard_port: int) -> None:
        self.daemon = daemon
        self.guard_port = guard_port

    def guard_counter(self, name: str) -> int:
        counters: dict[str, Any] = self.daemon.get("/api/v1/guard").json()["counters"]
        return int(counters.get(name, 0))

    def ready(self) -> bool:
        status = self.daemon.get("/api/v1/status").json()
        health = loopback.get(
            f"http://127.0.0.1:{self.guard_port}/health", timeout=10 * DEADLINE_SCALE
        )
        return bool(status["serving"]["state"] == "ready" and health.status_code == 200)


def _start(tmp: Path, name: str) -> Rig:
    guard_port = free_port()
    config = tmp / f"{name}.toml"
    config.write_text(
        f"""
[recovery]
drain_grace_s = 30
[canary]
enabled = false
[guard]
listen = "127.0.0.1:{guard_port}"
""",
        encoding="utf-8",
    )
    return Rig(start_fleetd(tmp, tmp / f"state-{name}", config=config), guard_port)


@pytest.fixture(scope="module")
def rigs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Rig, Rig]]:
    """Rig A and rig B, started side by side, both serving."""
    tmp = tmp_path_factory.mktemp("rigs")
    started: dict[str, Rig] = {}
    failures: list[BaseException] = []

    def start(name: str) -> None:
        try:
            started[name] = _start(tmp, name)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=start, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        if failures:
            raise failures[0]
        for rig in started.values():
            wait_until(rig.ready, 60, "the rig serving through its guard")
        yield started["a"], started["b"]
    finally:
        stop_all([rig.daemon for rig in started.values()])


def _fill(text: str, replacements: dict[str, str]) -> str:
    """The shipped file with the test's addresses: each example must be there exactly once."""
    for old, new in replacements.items():
        assert text.count(old) == 1, f"{old!r} is not once in the shipped file"
        text = text.replace(old, new)
    return text


def _model(front: str) -> str:
    models = loopback.get(f"{front}/v1/models", timeout=10)
    assert models.status_code == 200, models.text
    return str(models.json()["data"][0]["id"])


def _requests_across_a_reboot(front: str, a: Rig, b: Rig) -> None:
    """Sequential chats through ``front`` while rig A drains and reboots: none fails."""
    model = _model(front)
    body = {"model": model, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}
    boot = a.daemon.get("/api/v1/status").json()["rig"]["boot_id"]
    answers: list[int] = []
    reboot: list[httpx.Response | httpx.HTTPError] = []

    def reboot_a() -> None:
        try:
            reboot.append(
                loopback.post(
                    f"{a.daemon.url}/api/v1/recovery/reboot",
                    json={"confirm": True},
                    headers={"Authorization": f"Bearer {a.daemon.token}"},
                    timeout=180,
                )
            )
        except httpx.HTTPError as exc:
            reboot.append(exc)

    rebooting = threading.Thread(target=reboot_a)
    b_before = 0
    deadline_s = time.monotonic() + 240
    with httpx.Client(timeout=60, trust_env=False) as client:
        while len(answers) < REQUESTS or rebooting.is_alive():
            assert time.monotonic() < deadline_s, "the reboot never ended"
            if len(answers) == 10:
                b_before = b.guard_counter("requests")
                rebooting.start()
            reply = client.post(f"{front}/v1/chat/completions", json=body)
            assert reply.status_code == 200, (len(answers), reply.status_code, reply.text)
            assert reply.json()["choices"], reply.text
            answers.append(reply.status_code)
    rebooting.join()
    answer = reboot[0] if reboot else None
    assert isinstance(answer, httpx.Response), f"the confirmed reboot: {answer!r}"
    assert answer.status_code == 200, answer.text
    assert len(answers) >= REQUESTS
    wait_until(
        lambda: b.guard_counter("requests") > b_before, 15, "rig B's guard counting its share"
    )
    wait_until(
        lambda: a.daemon.get("/api/v1/status").json()["rig"]["boot_id"] != boot,
        30,
        "rig A booted again",
    )
    wait_until(lambda: not a.daemon.get("/api/v1/drain").json()["draining"], 15, "A undrained")
    wait_until(a.ready, 60, "rig A serving again after its reboot")


def test_nginx_keeps_every_request_while_a_rig_drains_and_reboots(
    rigs: tuple[Rig, Rig], tmp_path: Path
) -> None:
    nginx = require_program("nginx", "nginx-light")
    a, b = rigs
    front_port = free_port()
    site = _fill(
        (DEPLOY / "nginx" / "cmpfleet-rigs.conf").read_text(encoding="utf-8"),
        {
            RIG_A: f"127.0.0.1:{a.guard_port}",
            RIG_B: f"127.0.0.1:{b.guard_port}",
            "listen 8000;": f"listen 127.0.0.1:{front_port};",
        },
    )
    (tmp_path / "rigs.conf").write_text(site, encoding="utf-8")
    temp = {name: tmp_path / name for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi")}
    for path in temp.values():
        path.mkdir()
    (tmp_path / "nginx.conf").write_text(
        f"""
daemon off;
master_process off;
pid {tmp_path / "nginx.pid"};
error_log {tmp_path / "error.log"} warn;
events {{ worker_connections 256; }}
http {{
    access_log {tmp_path / "access.log"};
    client_body_temp_path {temp["body"]};
    proxy_temp_path {temp["proxy"]};
    fastcgi_temp_path {temp["fastcgi"]};
    uwsgi_temp_path {temp["uwsgi"]};
    scgi_temp_path {temp["scgi"]};
    include {tmp_path / "rigs.conf"};
}}
""",
        encoding="utf-8",
    )
    argv = [nginx, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")]
    checked = subprocess.run([*argv, "-t"], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stderr
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    front = f"http://127.0.0.1:{front_port}"
    try:
        wait_until(lambda: _answers(front, proc), 30, "nginx listening")
        _requests_across_a_reboot(front, a, b)
        assert a.guard_counter("drain_refused") + a.guard_counter("engine_unavailable") > 0, (
            "nginx never met the drained rig: the test proved nothing"
        )
    finally:
        proc.terminate()
        proc.wait(15)


def test_haproxy_keeps_every_request_while_a_rig_drains_and_reboots(
    rigs: tuple[Rig, Rig], tmp_path: Path
) -> None:
    haproxy = require_program("haproxy", "haproxy")
    shipped = DEPLOY / "haproxy" / "cmpfleet-rigs.cfg"
    valid = subprocess.run(
        [haproxy, "-c", "-f", str(shipped)], capture_output=True, text=True, check=False
    )
    assert valid.returncode == 0, valid.stdout + valid.stderr
    a, b = rigs
    wait_until(a.ready, 60, "rig A serving")
    front_port = free_port()
    config = tmp_path / "haproxy.cfg"
    config.write_text(
        _fill(
            shipped.read_text(encoding="utf-8"),
            {
                RIG_A: f"127.0.0.1:{a.guard_port}",
                RIG_B: f"127.0.0.1:{b.guard_port}",
                "bind :8000": f"bind 127.0.0.1:{front_port}",
                # The test's own addition: a stats socket to read the health checks' verdict.
                "global\n": f"global\n    stats socket {tmp_path / 'stats.sock'} mode 600\n",
            },
        ),
        encoding="utf-8",
    )
    proc = subprocess.Popen(
        [haproxy, "-db", "-f", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    front = f"http://127.0.0.1:{front_port}"
    stats = tmp_path / "stats.sock"
    try:
        wait_until(lambda: _answers(front, proc), 30, "haproxy listening")
        wait_until(lambda: _server_status(stats, "rig-a") == "UP", 30, "rig A checked UP")
        # The health check on the guard's /health takes a drained rig out, and back after.
        drained = a.daemon.post("/api/v1/drain", {"reason": "haproxy test"})
        assert drained.status_code == 200, drained.text
        wait_until(lambda: _server_status(stats, "rig-a") == "DOWN", 30, "rig A checked DOWN")
        assert a.daemon.post("/api/v1/undrain").status_code == 200
        wait_until(lambda: _server_status(stats, "rig-a") == "UP", 30, "rig A checked UP again")
        _requests_across_a_reboot(front, a, b)
    finally:
        proc.terminate()
        proc.wait(15)


def _server_status(sock_path: Path, server: str) -> str | None:
    """A backend server's status as HAProxy's health checks judge it (``show stat``)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(str(sock_path))
            sock.sendall(b"show stat\n")
            raw = b""
            while chunk := sock.recv(65536):
                raw += chunk
    except OSError:
        return None
    lines = raw.decode(errors="replace").splitlines()
    if not lines or not lines[0].startswith("# "):
        return None
    header = lines[0][2:].split(",")
    for line in lines[1:]:
        row = dict(zip(header, line.split(","), strict=False))
        if row.get("pxname") == "cmpfleet_rigs" and row.get("svname") == server:
            return row.get("status")
    return None


def _answers(front: str, proc: subprocess.Popen[bytes]) -> bool:
    assert proc.poll() is None, f"the balancer exited with {proc.returncode}"
    try:
        return loopback.get(f"{front}/v1/models", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False
