"""Real Prometheus and Alertmanager servers on loopback for tests: own config, data, port.

Debian's ``prometheus`` and ``prometheus-alertmanager`` packages install the servers;
nothing starts them (no systemd as PID 1), so each test module starts its own with a
config written here. YAML is a superset of JSON, so a config given as a dict is written
with ``json.dumps``: no YAML library needed.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx

from tests.support import loopback
from tests.support.external import require_program
from tests.support.fleetd import free_port, wait_until


@dataclass
class Server:
    """A running Prometheus or Alertmanager child process."""

    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        """Base URL of its HTTP API."""
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        """What the server wrote so far (for failure messages)."""
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        """Terminate it and wait (killed if it lingers)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Prometheus(Server):
    """Prometheus, with its query API."""

    def api(self, path: str, **params: str) -> Any:
        """``GET /api/v1/PATH``'s ``data`` (fails the test on an API error)."""
        answer = loopback.get(f"{self.url}/api/v1/{path}", params=params, timeout=10).json()
        assert answer["status"] == "success", answer
        return answer["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's vector result."""
        return list(self.api("query", query=expr)["result"])

    def alerts(self) -> list[dict[str, Any]]:
        """Every active alert (pending and firing) with its labels and state."""
        return list(self.api("alerts")["alerts"])


S = TypeVar("S", bound="Server")


def _ready(server: Server) -> bool:
    if server.proc.poll() is not None:
        raise AssertionError(
            f"{server.proc.args} exited with {server.proc.returncode}:\n{server.log()}"
        )
    try:
        return loopback.get(f"{server.url}/-/ready", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _start(kind: type[S], tmp: Path, argv: list[str], port: int, timeout_s: float) -> S:
    """Start ``argv`` in ``tmp`` and wait until it answers ``/-/ready``."""
    log_path = tmp / f"{Path(argv[0]).name}.log"
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT, cwd=tmp)
    server = kind(proc=proc, port=port, log_path=log_path)
    try:
        wait_until(lambda: _ready(server), timeout_s, f"{argv[0]} /-/ready")
    except AssertionError:
        server.stop()
        raise
    return server


def start_prometheus(tmp: Path, config: dict[str, Any], ready_timeout_s: float = 30) -> Prometheus:
    """Write ``config`` to ``tmp/prometheus.yml`` and start the server on a free port."""
    binary = require_program("prometheus", "prometheus")
    config_path = tmp / "prometheus.yml"
    config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    port = free_port()
    argv = [
        binary,
        f"--config.file={config_path}",
        f"--storage.tsdb.path={tmp / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
    return _start(Prometheus, tmp, argv, port, ready_timeout_s)


def start_alertmanager(tmp: Path, config_text: str, ready_timeout_s: float = 30) -> Server:
    """Alertmanager with ``config_text`` as its config, alone (no cluster), on a free port."""
    binary = require_program("prometheus-alertmanager", "prometheus-alertmanager")
    config_path = tmp / "alertmanager.yml"
    config_path.write_text(config_text, encoding="utf-8")
    port = free_port()
    argv = [
        binary,
        f"--config.file={config_path}",
        f"--storage.path={tmp / 'am-data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",  # no gossip port: a single, private instance
        "--log.level=warn",
    ]
    return _start(Server, tmp, argv, port, ready_timeout_s)
