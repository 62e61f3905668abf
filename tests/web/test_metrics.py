"""``GET /metrics`` of a real in-process fleetd on loopback: names, labels, units, and proof
that a scrape reads memory only (a counting GPU backend and a count of every SQL statement
sent to the database stay still while it is scraped), checked by Prometheus' own parser
and ``promtool check metrics``."""

from __future__ import annotations

import dataclasses
import platform
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from sqlalchemy import event
from sqlalchemy.engine import Engine

from daemon.config import load_settings
from daemon.engine.profiles import recipe_for_daemon
from daemon.runtime import Daemon
from daemon.sdnotify import Notifier
from daemon.startup import build_host
from hwcheck.backend import GpuBackend
from hwcheck.model import ClockEventReason, RigSnapshot
from tests.support import loopback
from tests.support.external import require_program
from tests.support.fleetd import free_port, kill_engine, wait_until
from web.version import __version__

CARD_GAUGES = [
    "cmpfleet_gpu_power_watts",
    "cmpfleet_gpu_power_limit_watts",
    "cmpfleet_gpu_memory_total_bytes",
    "cmpfleet_gpu_memory_used_bytes",
    "cmpfleet_gpu_memory_temperature_celsius",
    "cmpfleet_gpu_vram_unlocked",
    "cmpfleet_gpu_power_brake_active",
    "cmpfleet_gpu_temperature_celsius",
    "cmpfleet_gpu_sm_clock_hertz",
    "cmpfleet_gpu_pcie_link_gen",
    "cmpfleet_gpu_pcie_link_width",
    "cmpfleet_gpu_lost",
    "cmpfleet_gpu_utilization_ratio",
    "cmpfleet_gpu_memory_utilization_ratio",
    "cmpfleet_gpu_pcie_tx_bytes_per_second",
    "cmpfleet_gpu_pcie_rx_bytes_per_second",
    "cmpfleet_gpu_processes",
    "cmpfleet_gpu_in_profile",
]


class CountingBackend:
    """The simulated GPU backend, counting every call that would be an NVML call."""

    def __init__(self, inner: GpuBackend) -> None:
        self._inner = inner
        self.name = inner.name
        self.calls = 0
        self._lock = threading.Lock()

    def _count(self) -> None:
        with self._lock:
            self.calls += 1

    def snapshot(self) -> RigSnapshot:
        self._count()
        return self._inner.snapshot()

    def set_power_limit(self, index: int, watts: float) -> None:
        self._count()
        self._inner.set_power_limit(index, watts)

    def close(self) -> None:
        self._inner.close()


class StatementCounter:
    """Counts SQL statements sent to any database of this process (the driver boundary)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, *_: Any) -> None:
        self.count += 1


@dataclasses.dataclass
class Rig:
    daemon: Daemon
    backend: CountingBackend
    statements: StatementCounter
    url: str

    def scrape(self) -> str:
        answer = loopback.get(f"{self.url}/metrics", timeout=10)
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
        return answer.text

    def samples(self, name: str) -> list[Sample]:
        return [
            sample
            for family in text_string_to_metric_families(self.scrape())
            for sample in family.samples
            if sample.name == name
        ]


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    """fleetd with the simulated engine; polls only when a test calls ``poll()``."""
    state = tmp_path_factory.mktemp("metrics") / "state"
    state.mkdir(mode=0o700)
    settings = load_settings(
        None,
        environ={},
        overrides={
            "web": {"listen": f"127.0.0.1:{free_port()}"},
            "poll": {"interval_s": 3600, "rollup_interval_s": 3600},
            "serving": {"stop_on_exit": True},
        },
    )
    host, sim, sim_engine = build_host(settings, state, "healthy")
    backend = CountingBackend(host.gpu)
    host = dataclasses.replace(host, gpu=backend)
    recipe = recipe_for_daemon(settings, None, sim_engine)
    statements = StatementCounter()
    event.listen(Engine, "before_cursor_execute", statements)
    daemon = Daemon(settings, state, host, sim, Notifier({}), recipe)
    try:
        daemon.start()
        rig = Rig(daemon, backend, statements, f"http://127.0.0.1:{daemon.api.port}")
        wait_until(
            lambda: daemon.services.serving_state() == "ready", 30, "the simulated engine ready"
        )
        yield rig
    finally:
        daemon.request_stop()
        daemon.shutdown()
        event.remove(Engine, "before_cursor_execute", statements)
        kill_engine(state)


def test_a_scrape_touches_neither_nvml_nor_the_database(rig: Rig) -> None:
    def scrapes_touch_nothing() -> bool:
        before = (rig.backend.calls, rig.statements.count)
        for _ in range(3):
            assert "cmpfleet_gpu_power_watts" in rig.scrape()
        return (rig.backend.calls, rig.statements.count) == before

    # The engine's own state-change records may still land: retry until a quiet spell, which
    # never comes if the scrapes themselves query the database or the backend.
    rig.daemon.writer.flush(10)
    wait_until(scrapes_touch_nothing, 10, "three scrapes with no NVML call or SQL statement")
    before = (rig.backend.calls, rig.statements.count)
    # The counters do see what they count: a status read queries the latch, a poll reads NVML.
    assert loopback.get(f"{rig.url}/api/v1/status", timeout=10).status_code == 200
    assert rig.statements.count > before[1]
    rig.daemon.poll()
    assert rig.backend.calls > before[0]


def test_every_card_has_every_gauge_in_base_units(rig: Rig) -> None:
    families = {f.name: f for f in text_string_to_metric_families(rig.scrape())}
    for name in CARD_GAUGES:
        samples = families[name].samples
        assert sorted(s.labels["gpu"] for s in samples) == ["0", "1", "2", "3"], name
        for sample in samples:
            assert set(sample.labels) == {"gpu", "uuid", "pci_bus_id"}
            assert sample.labels["uuid"].startswith("GPU-")
            assert sample.labels["pci_bus_id"].endswith(":00.0")

    def by_gpu(name: str) -> dict[str, float]:
        return {s.labels["gpu"]: s.value for s in families[name].samples}

    assert set(by_gpu("cmpfleet_gpu_power_limit_watts").values()) == {180.0}
    assert set(by_gpu("cmpfleet_gpu_memory_total_bytes").values()) == {65536 * 1024 * 1024}
    assert set(by_gpu("cmpfleet_gpu_vram_unlocked").values()) == {1.0}
    assert set(by_gpu("cmpfleet_gpu_power_brake_active").values()) == {0.0}
    assert set(by_gpu("cmpfleet_gpu_pcie_link_gen").values()) == {2.0}
    assert set(by_gpu("cmpfleet_gpu_pcie_link_width").values()) == {4.0}
    assert set(by_gpu("cmpfleet_gpu_lost").values()) == {0.0}
    assert min(by_gpu("cmpfleet_gpu_sm_clock_hertz").values()) > 1e8  # MHz scaled to Hz
    assert all(0 < watts <= 180 for watts in by_gpu("cmpfleet_gpu_power_watts").values())


def test_what_nvitop_shows_is_exported_per_card(rig: Rig) -> None:
    """The simulated engine runs on every card: each lists its process and holds its memory."""
    rig.daemon.poll()
    families = {f.name: f for f in text_string_to_metric_families(rig.scrape())}

    def by_gpu(name: str) -> dict[str, float]:
        return {s.labels["gpu"]: s.value for s in families[name].samples}

    assert all(0 <= share <= 1 for share in by_gpu("cmpfleet_gpu_utilization_ratio").values())
    assert set(by_gpu("cmpfleet_gpu_processes").values()) == {1.0}
    assert set(by_gpu("cmpfleet_gpu_in_profile").values()) == {1.0}
    used = by_gpu("cmpfleet_gpu_memory_used_bytes")
    total = by_gpu("cmpfleet_gpu_memory_total_bytes")
    assert all(0.8 < used[gpu] / total[gpu] < 0.9 for gpu in used)  # gpu_memory_utilization 0.85
    assert all(rate >= 0 for rate in by_gpu("cmpfleet_gpu_pcie_rx_bytes_per_second").values())


def test_grafana_facts_energy_reasons_identity_and_build(rig: Rig) -> None:
    families = {f.name: f for f in text_string_to_metric_families(rig.scrape())}
    energy = families["cmpfleet_gpu_energy_joules"]
    assert energy.type == "counter" and energy.samples[0].name == "cmpfleet_gpu_energy_joules_total"
    joules = {s.labels["gpu"]: s.value for s in energy.samples}
    assert sorted(joules) == ["0", "1", "2", "3"] and min(joules.values()) > 0
    rig.daemon.poll()
    later = {s.labels["gpu"]: s.value for s in rig.samples("cmpfleet_gpu_energy_joules_total")}
    assert all(later[gpu] >= joules[gpu] for gpu in joules)  # a counter never goes back
    info = {s.labels["gpu"]: s for s in families["cmpfleet_gpu_info"].samples}
    assert sorted(info) == ["0", "1", "2", "3"]
    assert set(info["0"].labels) == {
        "gpu",
        "uuid",
        "pci_bus_id",
        "name",
        "serial",
        "vbios",
        "driver",
    }
    assert info["0"].value == 1 and info["0"].labels["name"] == "NVIDIA CMP 170HX"
    assert info["0"].labels["driver"] and info["0"].labels["vbios"]
    (build,) = families["cmpfleet_build_info"].samples
    assert build.value == 1 and build.labels["version"] == __version__
    assert build.labels["python"] == platform.python_version()
    reasons = {
        (s.labels["gpu"], s.labels["reason"])
        for s in families["cmpfleet_gpu_clock_event_reason"].samples
    }
    assert reasons == {(gpu, "gpu_idle") for gpu in "0123"}  # the simulated cards idle


def test_each_active_clock_event_reason_is_a_series(rig: Rig) -> None:
    sim = rig.daemon.services.sim
    assert sim is not None

    def active() -> dict[tuple[str, str], float]:
        return {
            (s.labels["gpu"], s.labels["reason"]): s.value
            for s in rig.samples("cmpfleet_gpu_clock_event_reason")
        }

    before = [reason for gpu, reason in active() if gpu == "2"]
    braked = ClockEventReason.HW_POWER_BRAKE_SLOWDOWN | ClockEventReason.SW_POWER_CAP
    sim.set_card(2, {"clock_event_reasons": int(braked)})
    try:
        rig.daemon.poll()
        on_card_2 = {k: v for k, v in active().items() if k[0] == "2"}
        assert on_card_2 == {("2", "hw_power_brake_slowdown"): 1, ("2", "sw_power_cap"): 1}
    finally:
        mask = sum(int(ClockEventReason[reason.upper()]) for reason in before)
        sim.set_card(2, {"clock_event_reasons": mask})
        rig.daemon.poll()


def test_rig_level_metrics(rig: Rig) -> None:
    families = {f.name: f for f in text_string_to_metric_families(rig.scrape())}
    checks = {s.labels["check"]: s.value for s in families["cmpfleet_check_status"].samples}
    assert {"vram_unlocked", "power_brake", "power_cap", "kernel_log"} <= set(checks)
    assert set(checks.values()) == {0.0}, checks
    assert families["cmpfleet_reboot_required"].samples[0].value == 0
    states = {s.labels["state"]: s.value for s in families["cmpfleet_serving_state"].samples}
    assert states["ready"] == 1 and sum(states.values()) == 1, states
    assert "failed" in states and "held" in states  # every state is a series, 0 or 1
    assert families["cmpfleet_serving_restarts"].type == "counter"
    assert families["cmpfleet_serving_restarts"].samples[0].name.endswith("_total")
    assert "cmpfleet_serving_generation_tokens_per_second" in families
    assert families["cmpfleet_kernel_log_follower_up"].samples[0].value == 1
    histogram = families["cmpfleet_poll_duration_seconds"]
    assert histogram.type == "histogram"
    count = next(s for s in histogram.samples if s.name.endswith("_count")).value
    inf = next(s for s in histogram.samples if s.labels.get("le") == "+Inf").value
    assert count == inf >= 2  # the start-up polls were timed


# Every family's HELP and TYPE line as the one RigCollector printed them before each wing
# got its own collector (issue 38): names, help and types are the outside, kept as they are.
FAMILIES = Path(__file__).with_name("metrics_families.txt")


def test_each_wings_collector_keeps_every_family_as_it_was(rig: Rig) -> None:
    text = rig.scrape()
    lines = sorted({line for line in text.splitlines() if line.startswith(("# HELP", "# TYPE"))})
    assert lines == FAMILIES.read_text().splitlines()
    bounds = [
        s.labels["le"]
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "cmpfleet_poll_duration_seconds_bucket"
    ]
    assert bounds == [
        "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0",
        "30.0", "+Inf",
    ]  # fmt: skip
    assert "cmpfleet_poll_duration_seconds_created" not in text  # the library's, not ours


def test_host_truth_metrics(rig: Rig) -> None:
    families = {f.name: f for f in text_string_to_metric_families(rig.scrape())}

    def by_gpu(name: str) -> dict[str, float]:
        return {s.labels["gpu"]: s.value for s in families[name].samples}

    assert by_gpu("cmpfleet_gpu_bar1_total_bytes") == dict.fromkeys("0123", 65536 * 1024 * 1024)
    assert set(by_gpu("cmpfleet_gpu_memory_clock_max_hertz").values()) == {1728e6}
    assert set(by_gpu("cmpfleet_gpu_sm_clock_max_hertz").values()) == {1410e6}
    replays = families["cmpfleet_gpu_pcie_replay_errors"]
    assert replays.type == "counter"
    assert {s.name for s in replays.samples} == {"cmpfleet_gpu_pcie_replay_errors_total"}
    assert {s.value for s in replays.samples} == {0.0}
    aer = families["cmpfleet_pcie_aer_errors"].samples
    devices = {s.labels["pci_bus_id"] for s in aer}
    assert {"0000:01:00.0", "0000:00:01.1"} <= devices  # a card and the root port above it
    assert {s.labels["severity"] for s in aer} == {"correctable", "nonfatal", "fatal"}
    checks = {s.labels["check"]: s.value for s in families["cmpfleet_check_status"].samples}
    host_checks = {"host_kernel", "kernel_cmdline", "driver_module", "bar1", "p2p", "pcie_errors"}
    assert {checks[c] for c in host_checks | {"vbios", "clocks", "memtest"}} == {0.0}


def test_an_injected_xid_is_counted_by_card_and_number(rig: Rig) -> None:
    sim = rig.daemon.services.sim
    assert sim is not None
    sim.inject_xid(1, 43, None)  # application-class: no recovery move on the rig

    def xid_43_on_card_1() -> bool:
        return any(
            s.labels["gpu"] == "1" and s.labels["xid"] == "43" and s.value == 1
            for s in rig.samples("cmpfleet_gpu_xid_errors_total")
        )

    wait_until(xid_43_on_card_1, 10, "Xid 43 on gpu 1 in /metrics")


def test_a_lost_card_is_flagged_and_its_readings_left_out(rig: Rig) -> None:
    sim = rig.daemon.services.sim
    assert sim is not None
    sim.set_card(3, {"lost": True})
    try:
        rig.daemon.poll()
        lost = {s.labels["gpu"]: s.value for s in rig.samples("cmpfleet_gpu_lost")}
        assert lost == {"0": 0, "1": 0, "2": 0, "3": 1}
        power = {s.labels["gpu"] for s in rig.samples("cmpfleet_gpu_power_watts")}
        assert power == {"0", "1", "2"}
    finally:
        sim.set_card(3, {"lost": False})
        rig.daemon.poll()


def test_promtool_accepts_the_exposition(rig: Rig, tmp_path: Path) -> None:
    promtool = require_program("promtool", "prometheus")
    exposition = rig.scrape()
    checked = subprocess.run(
        [promtool, "check", "metrics"],
        input=exposition,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.strip() == "", checked.stdout  # no lint warnings either
