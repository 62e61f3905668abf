"""What fleetd reads for the ``host_resources`` check at each poll: where, and how much RAM.

``read_host_resources`` (``daemon/engine/resource_needs.py``) asks the host sources for the
state dir's filesystem (and the model's, with a profile) and the RAM the profile needs;
the profile in force is read at each call. A recording host stands in for the host.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from daemon.engine.resource_needs import ram_needed_mib, read_host_resources
from serving.recipe.recipe import recipe_from_table


class RecordingHost:
    def __init__(self) -> None:
        self.asked: list[tuple[list[tuple[str, Path]], int | None]] = []

    def resources(self, paths: list[tuple[str, Path]], ram_needed_mib: int | None) -> Any:
        self.asked.append((paths, ram_needed_mib))
        return "room"


def test_without_an_engine_only_the_state_dirs_filesystem_and_the_base_ram(
    tmp_path: Path,
) -> None:
    host = RecordingHost()
    assert read_host_resources(host, tmp_path, None) == "room"
    assert host.asked == [([("state dir", tmp_path)], None)]  # no engine: no RAM to expect


def test_the_profile_in_force_is_read_at_each_call(tmp_path: Path) -> None:
    host = RecordingHost()
    engine = SimpleNamespace(recipe=None)
    read_host_resources(host, tmp_path, engine)
    switched = recipe_from_table({"model": "/models/glm"}, "glm")
    engine.recipe = switched  # what fleetctl serve does between two polls
    read_host_resources(host, tmp_path, engine)
    assert host.asked[1] == (
        [("state dir", tmp_path), ("model", Path("/models/glm"))],
        ram_needed_mib(switched),
    )
    assert ram_needed_mib(switched) is not None
