"""``canary run NAME`` on a one-engine rig: its own profile runs, any other NAME is one line."""

from __future__ import annotations

from typing import Any, cast

import pytest

from daemon.canaries.runner import CanaryRunner
from daemon.canaries.service import CanaryService
from serving.errors import NotFound


class Runner:
    def __init__(self) -> None:
        self.rounds = 0

    def run_now(self, force: bool, deep: bool) -> dict[str, Any]:
        self.rounds += 1
        return {"ran": True}


def test_only_this_engines_profile_runs() -> None:
    runner = Runner()
    service = CanaryService(cast(CanaryRunner, runner), None, lambda: "dsv4")
    assert service.run_canaries(force=False) == {"ran": True}
    assert service.run_canaries(force=False, engine="dsv4") == {"ran": True}
    with pytest.raises(NotFound, match=r"no engine 'qwen' on this rig \(engines: dsv4\)"):
        service.run_canaries(force=False, engine="qwen")
    assert runner.rounds == 2
