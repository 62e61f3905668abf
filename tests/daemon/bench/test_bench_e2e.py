"""``fleetctl bench`` against a real fleetd and its simulated engine (real processes, real HTTP).

The quick matrix on ``healthy`` (the built-in, at its own pace: the Done-when's minute), the
refusals, the 80-column tables and the power brake named first. The cap sweep's promises
are in ``test_bench_sweep_e2e`` (one file each, so two workers run them side by side).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.bench_e2e import bench_fleetctl, engine_ready, start_serving, wait_idle
from tests.support.fleetd import Fleetd, stop_all
from tests.support.scenarios import faster
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow(seconds=75)


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleetd]:
    daemon = start_serving(tmp_path_factory.mktemp("bench"), "healthy", "healthy")
    try:
        yield daemon
    finally:
        stop_all([daemon])


def _every_field_filled(document: Any, where: str = "method") -> list[str]:
    """The paths of empty fields (None, empty string, empty list or table)."""
    if document is None or document in ("", [], {}):
        return [where]
    if isinstance(document, dict):
        return [p for k, v in document.items() for p in _every_field_filled(v, f"{where}.{k}")]
    return []


def test_quick_bench_on_healthy_in_under_a_minute_with_the_method_filled(
    healthy: Fleetd,
) -> None:
    wait_idle(healthy)
    began = time.monotonic()
    done = bench_fleetctl(healthy, "bench", "--quick", "--json")
    took_s = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    assert took_s < 60, f"the quick bench took {took_s:.0f} s"
    run = json.loads(done.stdout)
    assert run["state"] == "done"
    method = run["method"]
    # What may be empty by right: no clipping note, no live traffic, no sweep on a matrix run.
    empty = _every_field_filled(
        {k: v for k, v in method.items() if k not in ("notes", "warnings", "sweep_caps_w")}
    )
    # Provenance the rig was not configured to collect ([serving] provenance_labels, command).
    optional = ("method.build.provenance_output", "method.build.labels")
    empty = [path for path in empty if path not in optional]
    assert not empty, f"method fields not filled: {empty}"
    assert method["speculative"] == {
        "enabled": True,
        "method": "dspark",
        "num_speculative_tokens": 5,
    }
    assert method["sampling"]["ignore_eos"] is True
    assert set(method["caps_w"].values()) == {180.0}
    assert (
        method["build"]["image_digest"].startswith("sha256:")
        or "@sha256:" in (method["build"]["image_digest"])
    )
    assert method["reference"]["source"]
    cells = {cell["key"]: cell for cell in run["cells"]}
    assert len(cells) == 8
    head = cells["c1-d1k-t0"]
    for figure in (
        "decode_tok_s_per_stream",
        "decode_tok_s_total",
        "prefill_tok_s",
        "ttft_s",
        "itl_p50_ms",
        "itl_p95_ms",
        "spec_acceptance",
        "tokens_per_joule",
    ):
        assert head[figure] is not None, figure
    assert set(head["power_w"]) == {"0", "1", "2", "3"}
    # The curves: 8 streams decode more in total and less each; temperature 1 accepts fewer
    # drafts than 0; a deeper prompt accepts fewer too.
    assert cells["c8-d1k-t0"]["decode_tok_s_total"] > 2 * head["decode_tok_s_total"]
    assert cells["c8-d1k-t0"]["decode_tok_s_per_stream"] < head["decode_tok_s_per_stream"]
    assert cells["c1-d1k-t1"]["spec_acceptance"] < head["spec_acceptance"]
    assert cells["c1-d32k-t0"]["spec_acceptance"] < head["spec_acceptance"]
    assert run["verdict"]["status"] == "at_reference", run["verdict"]["text"]
    assert run["verdict"]["text"].startswith("at reference")

    shown = bench_fleetctl(healthy, "bench", "show")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    assert any(line.startswith("c8-d32k-t1") for line in lines)
    listed = bench_fleetctl(healthy, "bench", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    builds = json.loads(listed.stdout)["builds"]
    assert builds[0]["build"] == method["build"]["name"]
    assert builds[0]["runs"][0]["id"] == run["id"]


def test_one_run_at_a_time_and_refused_with_the_engine_stopped(healthy: Fleetd) -> None:
    body = {"concurrency": [1], "depths": [1000], "temperatures": [0], "output_tokens": 64}
    first = healthy.post("/api/v1/bench", body)
    assert first.status_code == 200, first.text
    second = healthy.post("/api/v1/bench", body)
    assert second.status_code == 429, second.text
    assert "bench_running" in second.text
    run_id = first.json()["id"]
    wait_until(
        lambda: healthy.get(f"/api/v1/bench/{run_id}").json()["state"] != "running",
        60,
        "the first run's end",
    )
    bad = bench_fleetctl(healthy, "bench", "--depths", "deep")
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "--depths" in bad.stderr
    assert bench_fleetctl(healthy, "stop").returncode == 0
    refused = bench_fleetctl(healthy, "bench", "--quick")
    assert refused.returncode == 4, refused.stderr
    assert "not ready" in refused.stderr
    assert bench_fleetctl(healthy, "start").returncode == 0
    wait_until(lambda: engine_ready(healthy), 30, "the engine ready again")


def test_power_brake_names_the_brake_first(tmp_path: Path) -> None:
    scenario = faster(tmp_path, "power-brake")
    daemon = start_serving(tmp_path, "brake", str(scenario))
    try:
        wait_idle(daemon)
        done = bench_fleetctl(
            daemon,
            *("bench", "--quick", "--concurrency", "1", "--temperatures", "0", "--json"),
        )
        assert done.returncode == 0, done.stderr
        verdict = json.loads(done.stdout)["verdict"]
        assert verdict["status"] == "below_reference"
        assert verdict["text"].startswith("below reference: check the power brake first")
        assert "PWRBRK# asserted on cards 0-3" in verdict["text"]
        decode = next(c for c in verdict["comparisons"] if c["figure"] == "decode tok/s")
        assert 0.15 < decode["ratio"] < 0.35  # about a quarter
    finally:
        stop_all([daemon])
