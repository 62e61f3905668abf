"""A simulated reboot never SIGKILLs an engine that is not the simulated one (rule 2).

Under ``--simulate`` a config may still name its own recipe; such an engine holds real
CUDA contexts on a real host, and a SIGKILL would strand them. Here the "real" engine is
the simulated engine started through ``python -c`` (so fleetd cannot take it for its own
simulation) and told to ignore SIGINT and SIGTERM: the simulated reboot must try the clean
stop, fail, say so, and leave the process running.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until

RUN_SIM_ENGINE = "import runpy; runpy.run_module('serving.sim.engine', run_name='__main__')"
CONFIG = f"""
[serving]
probe_interval_s = 0.3
stop_timeout_s = 0.5

[serving.recipe]
preset = "sim-engine"
command = ["{{python}}", "-c", "{RUN_SIM_ENGINE}", "serve"]
extra_args = ["--sim-ready-after-s", "0.3", "--sim-ignore-signals"]
"""


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleetd]:
    tmp = tmp_path_factory.mktemp("realengine")
    config = tmp / "fleet.toml"
    config.write_text(CONFIG)
    started = start_fleetd(tmp, tmp / "state", config=config)
    try:
        yield started
    finally:
        stop_all([started])


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_real_engine_is_stopped_cleanly_never_killed(daemon: Fleetd, tmp_path: Path) -> None:
    def serving() -> dict[str, object]:
        document: dict[str, object] = daemon.get("/api/v1/status").json()["serving"]
        return document

    wait_until(lambda: serving()["state"] == "ready", 30, "the engine ready")
    pid = serving()["pid"]
    assert isinstance(pid, int) and _alive(pid)
    assert daemon.post("/api/v1/sim/reboot").status_code == 200
    assert "did not stop" in daemon.log() and "never killed" in daemon.log()
    assert _alive(pid), "the simulated reboot killed an engine that is not the simulated one"
