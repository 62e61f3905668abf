"""Canary regressions between builds: the last build that passed and the first that failed.

A verdict is stamped with the build it judged, so when a canary fails on the build serving
now, the builds before it say when it started: ``copy_depth at 96k: 100% on build
3f2a9c1d (...), 15% on build 9e8d7c6b (...) since 2026-12-03T10:12:00+00:00``. Deep
canaries compare depth by depth (the shallowest depth that passed before and fails now);
the others compare their figure. Pure: the builds and verdicts come in, lines go out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from serving.canary.depth import depth_label

_BAD = ("warn", "fail")


@dataclass(frozen=True, slots=True)
class Standing:
    """A canary's newest judged verdict on one build (``first_bad_ts``: its first warn/fail)."""

    result: str
    figure: float | None
    unit: str
    ts: datetime
    details: Mapping[str, Any] | None = None
    first_bad_ts: datetime | None = None


@dataclass(frozen=True, slots=True)
class BuildStandings:
    """One build (oldest first in the list given) and its canaries' standings."""

    build_id: int
    name: str
    standings: Mapping[str, Standing]


@dataclass(frozen=True, slots=True)
class Regression:
    """A canary that passed on an earlier build and fails on the one serving now."""

    canary: str
    depth: int | None
    passed_build: str
    passed_figure: str
    failed_build: str
    failed_figure: str
    since: datetime | None

    @property
    def text(self) -> str:
        """``copy_depth at 96k: 100% on build A, 15% on build B since <time>``."""
        where = "" if self.depth is None else f" at {depth_label(self.depth)}"
        since = "" if self.since is None else f" since {self.since.isoformat()}"
        return (
            f"{self.canary}{where}: {self.passed_figure} on {self.passed_build}, "
            f"{self.failed_figure} on {self.failed_build}{since}"
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form, the line included."""
        return {
            "canary": self.canary,
            "depth": self.depth,
            "passed_build": self.passed_build,
            "passed_figure": self.passed_figure,
            "failed_build": self.failed_build,
            "failed_figure": self.failed_figure,
            "since": None if self.since is None else self.since.isoformat(),
            "text": self.text,
        }


def figure_text(figure: float | None, unit: str, result: str) -> str:
    """A figure as a person reads it (a ratio in percent); the result word without one."""
    if figure is None:
        return result
    if unit == "ratio":
        return f"{figure:.0%}"
    return f"{figure:g} {unit}".strip()


def _depths(standing: Standing) -> dict[int, Mapping[str, Any]]:
    entries = (standing.details or {}).get("depths") or []
    return {
        int(entry["depth"]): entry
        for entry in entries
        if isinstance(entry, Mapping) and isinstance(entry.get("depth"), int)
    }


def _by_depth(
    canary: str, passed: BuildStandings, failed: BuildStandings, before: Standing, now: Standing
) -> Regression | None:
    """The shallowest depth that passed on ``passed`` and is bad on ``failed``."""
    old, new = _depths(before), _depths(now)
    for depth in sorted(new):
        was, is_now = old.get(depth), new[depth]
        if was is None or was.get("result") != "pass" or is_now.get("result") not in _BAD:
            continue
        return Regression(
            canary,
            depth,
            passed.name,
            figure_text(was.get("figure"), before.unit, "pass"),
            failed.name,
            figure_text(is_now.get("figure"), now.unit, str(is_now.get("result"))),
            now.first_bad_ts or now.ts,
        )
    return None


def regressions(builds: Sequence[BuildStandings]) -> list[Regression]:
    """Every canary bad on the newest build that judged it, with the last build it passed on.

    ``builds`` are oldest first. The "first that failed" is the first build after the last
    pass that the canary found bad.
    """
    found: list[Regression] = []
    names = sorted({name for build in builds for name in build.standings})
    for canary in names:
        judged = [build for build in builds if canary in build.standings]
        if not judged or judged[-1].standings[canary].result not in _BAD:
            continue
        passes = [i for i, build in enumerate(judged) if build.standings[canary].result == "pass"]
        if not passes:
            continue
        last_pass = passes[-1]
        passed, failed = judged[last_pass], judged[last_pass + 1]
        before, now = passed.standings[canary], failed.standings[canary]
        if now.result not in _BAD:
            continue
        by_depth = _by_depth(canary, passed, failed, before, now)
        found.append(
            by_depth
            or Regression(
                canary,
                None,
                passed.name,
                figure_text(before.figure, before.unit, before.result),
                failed.name,
                figure_text(now.figure, now.unit, now.result),
                now.first_bad_ts or now.ts,
            )
        )
    return found
