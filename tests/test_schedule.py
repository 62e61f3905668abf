"""The suite's file order: the long files longest first, then the others as collected."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tests.support import schedule


@dataclass
class Marker:
    kwargs: dict[str, object] = field(default_factory=dict)


@dataclass
class FakeItem:
    path: Path
    name: str
    slow: Marker | None = None

    def get_closest_marker(self, name: str) -> Marker | None:
        return self.slow if name == "slow" else None


def items_of(files: dict[str, tuple[int, Marker | None]]) -> list[FakeItem]:
    return [
        FakeItem(Path(name), f"{name}::t{number}", marker)
        for name, (count, marker) in files.items()
        for number in range(count)
    ]


def test_long_files_come_longest_first_then_the_others_as_collected() -> None:
    files = {
        "a.py": (2, None),
        "b_e2e.py": (2, Marker({"seconds": 20})),
        "c.py": (1, None),
        "d_e2e.py": (1, Marker({"seconds": 80})),
        "e.py": (1, None),
        "i_e2e.py": (1, Marker()),  # no seconds: SECONDS_UNSAID (10)
        "j.py": (1, None),
    }
    ordered = schedule.in_run_order(items_of(files))
    paths = list(dict.fromkeys(str(item.path) for item in ordered))
    assert paths == ["d_e2e.py", "b_e2e.py", "i_e2e.py", "a.py", "c.py", "e.py", "j.py"]
    # A file's tests stay together, in their own order.
    assert [item.name for item in ordered[:4]] == [
        "d_e2e.py::t0",
        "b_e2e.py::t0",
        "b_e2e.py::t1",
        "i_e2e.py::t0",
    ]


def test_a_file_with_one_slow_test_is_a_long_file_of_that_many_seconds() -> None:
    items = [
        FakeItem(Path("x.py"), "x.py::quick"),
        FakeItem(Path("x.py"), "x.py::long", Marker({"seconds": 30})),
        FakeItem(Path("y.py"), "y.py::long", Marker({"seconds": 25})),
    ]
    assert schedule.file_seconds(items) == {Path("x.py"): 30.0, Path("y.py"): 25.0}
    assert [item.name for item in schedule.in_run_order(items)] == [
        "x.py::quick",
        "x.py::long",
        "y.py::long",
    ]
