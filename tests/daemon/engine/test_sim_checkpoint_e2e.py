"""A checkpoint with a short shard on a live simulated fleetd (``truncated-shard``, issue 43).

With the preflight on (``[serving] verify_checkpoint = "quick"``, the default) the start is
refused in one line naming the shard, before any card is probed, and the status's gate says
so before anyone presses Start. With it off, the simulated engine dies loading that shard as
vLLM does, and the crash is named ``checkpoint`` with the black box's ``checkpoint_short``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from daemon.statedir import StateDir
from serving.sim.checkpoint import SHARDS, SHORT_SHARD, CheckpointKind, checkpoint_dir
from tests.support.engine_e2e import fleetctl
from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until

pytestmark = pytest.mark.slow(seconds=5)

SHORT_NAME = f"model-{SHORT_SHARD:05d}-of-{SHARDS:05d}.safetensors"
WAIT_S = 60


def _events(daemon: Fleetd) -> list[str]:
    return [str(e["message"]) for e in daemon.get("/api/v1/events?limit=200").json()]


def _rig(tmp: Path, config: str) -> Fleetd:
    (tmp / "fleet.toml").write_text(config)
    return start_fleetd(tmp, tmp / "state", simulate="truncated-shard", config=tmp / "fleet.toml")


def test_the_start_is_refused_naming_the_shard_before_any_card_is_probed(tmp_path: Path) -> None:
    daemon = _rig(tmp_path, "")
    try:
        wait_until(
            lambda: any("refuse: checkpoint" in m for m in _events(daemon)),
            WAIT_S,
            "autostart's refusal",
        )
        refused = next(m for m in _events(daemon) if m.startswith("refuse: checkpoint"))
        assert SHORT_NAME in refused and "short" in refused, refused
        assert not any(m.startswith("probe: ") for m in _events(daemon)), _events(daemon)
        status: dict[str, Any] = daemon.get("/api/v1/status").json()
        assert status["serving"]["state"] == "stopped"
        # fleetctl start: exit 4 and one line that names the file.
        started = fleetctl(daemon, "start")
        assert started.returncode == 4, started.stdout + started.stderr
        assert SHORT_NAME in started.stdout + started.stderr
        assert "Traceback" not in started.stdout + started.stderr
        assert not any(m.startswith("probe: ") for m in _events(daemon))
        # fleetctl recipe verify on the same checkpoint: exit 2, the same shard.
        model = checkpoint_dir(StateDir(daemon.state_dir).sim_checkpoint, CheckpointKind.TRUNCATED)
        verified = fleetctl(daemon, "recipe", "verify", str(model))
        assert verified.returncode == 2, verified.stdout + verified.stderr
        assert SHORT_NAME in verified.stdout + verified.stderr
    finally:
        stop_all([daemon])


def test_with_the_preflight_off_the_engine_dies_loading_it_and_the_crash_says_why(
    tmp_path: Path,
) -> None:
    daemon = _rig(tmp_path, '[serving]\nverify_checkpoint = "off"\n')
    try:

        def crashes() -> list[dict[str, Any]]:
            return list(daemon.get("/api/v1/crashes").json().get("crashes") or [])

        wait_until(crashes, WAIT_S, "the crash bundle of the failed load")
        events = _events(daemon)
        ended = [m for m in events if m.startswith("engine exited with code 1 while starting")]
        assert ended and "checkpoint (" in ended[0], events[:20]
        assert "file not fully covered" in ended[0]
        shown = daemon.get(f"/api/v1/crashes/{crashes()[0]['id']}").json()
        assert shown["summary"]["verdict"]["rule"] == "checkpoint_short", shown["summary"]
    finally:
        stop_all([daemon])
